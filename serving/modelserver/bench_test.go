package modelserver

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	"github.com/monolith-go/monolith/io/synth"
	"github.com/monolith-go/monolith/pipelines/train"
	"github.com/monolith-go/monolith/ps/servingmodel"
	"github.com/monolith-go/monolith/schemas/batch"
	"github.com/monolith-go/monolith/schemas/tfcorepb"
	pb "github.com/monolith-go/monolith/schemas/tfservingpb"
	"github.com/monolith-go/monolith/transforms/beamio"
)

// plantedVersion trains the benchmark suite's planted FM (8 v1 features of one fid each,
// Zipf 1.05 over vocab fids, dim 4) on rows rows for one epoch and exports it with its
// sparse segments stored as compress says ("" for fp32): the version's folder, its
// version and the training data's file pattern.
func plantedVersion(tb testing.TB, rows int64, vocab uint64, compress string) (dir string, version int64, data string) {
	tb.Helper()
	ctx := context.Background()
	base := tb.TempDir()
	c := synth.DefaultConfig()
	c.Features, c.Shared, c.Dense, c.Tasks = 8, 0, 0, 1
	c.FidsMin, c.FidsMax, c.Vocab, c.Zipf, c.BatchRows = 1, 1, vocab, 1.05, 256
	c.Rows, c.Files, c.Seed = rows, 1, 1
	const dim = 4
	pm, err := synth.NewPlanted(synth.PlantedFM, c, dim, c.Seed)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := synth.GeneratePlanted(ctx, c, pm, 2, 1, base); err != nil {
		tb.Fatal(err)
	}
	fc, err := synth.PlantedFeatureConfigs(c, dim)
	if err != nil {
		tb.Fatal(err)
	}
	b, err := prototext.Marshal(fc)
	if err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(base, "feature_configs.pbtxt"), b, 0o644); err != nil {
		tb.Fatal(err)
	}
	if compress == "" {
		compress = "null"
	}
	tc, err := train.ParseConfig(fmt.Appendf(nil, `{"model": "fm", "data": %q, "batch_size": 256, "epochs": 1, "threads": 2, "ps": {"shards": 2},
		"sparse": {"segments": [{"init": {"zeros": {}}, "optimizer": {"adagrad": {"learning_rate": 0.1}}, "compress": %s},
		{"init": {"random_uniform": {"minval": -0.05, "maxval": 0.05}}, "optimizer": {"adagrad": {"learning_rate": 0.1}}, "compress": %s}]},
		"dense": {"optimizer": {"adagrad": {"learning_rate": 0.1}}}}`, base, compress, compress), false)
	if err != nil {
		tb.Fatal(err)
	}
	if err := tc.Normalize(); err != nil {
		tb.Fatal(err)
	}
	tc.EvalInput, tc.Planted, tc.Checkpoint.Dir = "", "", filepath.Join(base, "model")
	if _, err := train.Run(ctx, tc, train.Options{Loop: true, HealthEvery: -1}); err != nil {
		tb.Fatal(err)
	}
	exp, err := train.ExportModel(ctx, tc, "", filepath.Join(base, "models"), "bench", -1)
	if err != nil {
		tb.Fatal(err)
	}
	return exp.Dir, exp.Version, tc.TrainInput
}

// predictRequest is one Predict request of the first n rows of the data's first file, as
// one serialized ExampleBatch.
func predictRequest(tb testing.TB, data string, n int) *pb.PredictRequest {
	tb.Helper()
	ctx := context.Background()
	files, err := beamio.Files(ctx, data)
	if err != nil || len(files) == 0 {
		tb.Fatalf("data %s: %v", data, err)
	}
	read := beamio.DefaultReadConfig()
	read.RowsPerBatch = n
	var req *pb.PredictRequest
	errDone := errors.New("done")
	err = beamio.ReadFile(ctx, files[0], read, nil, func(rec arrow.RecordBatch) error {
		defer rec.Release()
		rows := make([]int, n)
		for i := range rows {
			rows[i] = i
		}
		sub, err := batch.Take(memory.DefaultAllocator, rec, rows)
		if err != nil {
			return err
		}
		defer sub.Release()
		eb, err := batch.ToExampleBatch(sub)
		if err != nil {
			return err
		}
		b, err := proto.Marshal(eb)
		if err != nil {
			return err
		}
		req = &pb.PredictRequest{ModelSpec: &pb.ModelSpec{Name: "bench"},
			Inputs: map[string]*tfcorepb.TensorProto{InputExampleBatch: {Dtype: tfcorepb.DataType_DT_STRING, StringVal: [][]byte{b}}}}
		return errDone
	})
	if !errors.Is(err, errDone) {
		tb.Fatalf("request: %v", err)
	}
	return req
}

// BenchmarkPredict: Predict in process on a version of the planted FM (fp16 storage),
// per request size; and the lookup of one table's rows alone (rowsOf over 4096 fids, half
// of them absent).
func BenchmarkPredict(b *testing.B) {
	dir, v, data := plantedVersion(b, 64<<10, 1<<20, `{"fp16": {}}`)
	sv, err := (Loader{Workers: 1}).Load(context.Background(), "bench", dir, v)
	if err != nil {
		b.Fatal(err)
	}
	m := sv.(*Model)
	for _, n := range []int{1, 256} {
		req := predictRequest(b, data, n)
		b.Run(fmt.Sprintf("batch=%d", n), func(b *testing.B) {
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := m.Predict(ctx, req); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
		})
	}
	b.Run("rowsOf", func(b *testing.B) {
		man, err := servingmodel.Open(dir)
		if err != nil {
			b.Fatal(err)
		}
		st := m.byName[man.Tables[0].Name]
		var have []uint64
		if err := man.Tables[0].Scan(dir, func(fid int64, _ []float32) error {
			have = append(have, uint64(fid))
			return nil
		}); err != nil {
			b.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(1, 2))
		fids := make([]uint64, 4096)
		for i := range fids {
			if i%2 == 0 {
				fids[i] = have[rng.IntN(len(have))]
			} else {
				fids[i] = rng.Uint64()
			}
		}
		dst := make([]float32, 0, len(fids)*st.Dim)
		b.ReportAllocs()
		for b.Loop() {
			dst = st.rowsOf(fids, dst[:0])
		}
		b.ReportMetric(float64(len(fids))*float64(b.N)/b.Elapsed().Seconds(), "fids/s")
	})
}
