package suite

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	"github.com/monolith-go/monolith/benchmarks/internal/child"
	"github.com/monolith-go/monolith/pipelines/train"
	"github.com/monolith-go/monolith/ps/servingmodel"
	"github.com/monolith-go/monolith/schemas/batch"
	"github.com/monolith-go/monolith/schemas/tfcorepb"
	pb "github.com/monolith-go/monolith/schemas/tfservingpb"
	"github.com/monolith-go/monolith/serving/modelserver"
	"github.com/monolith-go/monolith/serving/tfs"
	"github.com/monolith-go/monolith/transforms/beamio"
)

// serveBatches are the request sizes of the serving section.
var serveBatches = []int{1, 32, 256}

// serveVocab is the fids per feature of the serving section's data, and serveScale its
// rows in units of the training section's 1× input: enough distinct fids that the served
// tables dwarf the fixed cost of a loaded version (its configs and per-worker steps, about
// 1 MB).
const (
	serveVocab = 1 << 20
	serveScale = 4
)

// serve measures a model exported by training (train.ExportModel) as `monolith serve` runs
// it: Predict throughput and latency over gRPC on 127.0.0.1 against the same version's
// Predict in process, per request size, and the heap a loaded version takes against its
// rows' fp32 bytes.
func (r *run) serve(ctx context.Context) error {
	dir := filepath.Join(r.tmp, "serve")
	// A large vocabulary, so that the served tables dwarf the fixed costs of a version.
	if err := trainData(ctx, dir, serveScale*r.sz.trainRows, serveScale*r.sz.trainFiles, serveVocab); err != nil {
		return fmt.Errorf("serve data: %w", err)
	}
	c, exp, sv, err := r.servedModel(ctx, dir, "fp32", "", 1.3)
	if err != nil {
		return err
	}
	base := filepath.Dir(filepath.Dir(exp.Dir))
	r.res.Inputs = append(r.res.Inputs, fmt.Sprintf("serve: the training section's planted FM at %d× (%d rows) with %d fids per feature, one epoch, exported (%d rows in %d tables, fp32, %d bytes; and again with fp16 storage) and served by monolith serve's loader; requests of %v rows of its data, one client, over gRPC on 127.0.0.1 and in process",
		serveScale, serveScale*r.sz.trainRows, serveVocab, exp.Entries, exp.Tables, exp.Bytes, serveBatches))
	// The same training with every sparse segment stored as fp16.
	if _, _, _, err := r.servedModel(ctx, dir, "fp16", `{"fp16": {}}`, 0.7); err != nil {
		return err
	}

	// The same version behind the gRPC API.
	f, err := tfs.NewFake(tfs.FakeOptions{Step: time.Millisecond, Loader: modelserver.Loader{}, Logger: r.log,
		Config: &pb.ModelServerConfig{Config: &pb.ModelServerConfig_ModelConfigList{ModelConfigList: &pb.ModelConfigList{
			Config: []*pb.ModelConfig{{Name: "bench", BasePath: filepath.Join(base, "bench")}}}}}})
	if err != nil {
		return err
	}
	sctx, stop := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- f.Serve(sctx) }()
	defer func() { stop(); <-served; f.Close() }()
	cc, err := grpc.NewClient(f.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20), grpc.MaxCallSendMsgSize(64<<20)))
	if err != nil {
		return err
	}
	defer cc.Close()
	stub := pb.NewPredictionServiceClient(cc)

	reqs, err := serveRequests(ctx, c, serveBatches)
	if err != nil {
		return err
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		if _, err := stub.Predict(ctx, reqs[0]); err == nil {
			break
		} else if time.Now().After(deadline) {
			return fmt.Errorf("serve: the version did not become available: %w", err)
		}
	}
	for i, b := range serveBatches {
		var local, remote, p50, p99 []float64
		for range r.sz.reps {
			sec, err := timeLoop(r.sz.budget, func() error {
				_, err := sv.Predict(ctx, reqs[i])
				return err
			})
			if err != nil {
				return fmt.Errorf("serve: in process, batch %d: %w", b, err)
			}
			local = append(local, float64(b)/sec)
			var lat []float64
			sec, err = timeLoop(r.sz.budget, func() error {
				t0 := time.Now()
				_, err := stub.Predict(ctx, reqs[i])
				lat = append(lat, time.Since(t0).Seconds()*1e3)
				return err
			})
			if err != nil {
				return fmt.Errorf("serve: gRPC, batch %d: %w", b, err)
			}
			remote = append(remote, float64(b)/sec)
			slices.Sort(lat)
			p50, p99 = append(p50, lat[len(lat)/2]), append(p99, lat[min(len(lat)-1, len(lat)*99/100)])
			r.log.Info("measured", "section", SectionServe, "batch", b, "grpc_rows/s", int64(float64(b)/sec), "p99_ms", p99[len(p99)-1])
		}
		fig := Figure{Issue: 21, Section: SectionServe, Name: fmt.Sprintf("Predict over gRPC vs in process, batch %d", b),
			Unit: "rows/s", Values: remote, Baseline: "in-process rows/s", Base: local, RatioOf: "gRPC ÷ in process", Ratios: ratios(remote, local)}
		if b == 256 {
			fig.Target = &Target{On: OnRatio, Op: ">=", Bound: 0.5, Text: "≥ 0.5× in-process throughput at batch 256"}
		}
		r.add(fig)
		r.add(Figure{Issue: 21, Section: SectionServe, Name: fmt.Sprintf("Predict latency over gRPC, batch %d, p50", b), Unit: "ms", Values: p50})
		r.add(Figure{Issue: 21, Section: SectionServe, Name: fmt.Sprintf("Predict latency over gRPC, batch %d, p99", b), Unit: "ms", Values: p99})
	}
	return nil
}

// serveRequests are Predict requests of the first rows of c's first training file, one per
// size, each one serialized ExampleBatch.
func serveRequests(ctx context.Context, c *train.Config, sizes []int) ([]*pb.PredictRequest, error) {
	files, err := beamio.Files(ctx, c.TrainInput)
	if err != nil || len(files) == 0 {
		return nil, fmt.Errorf("serve: data %s: %v", c.TrainInput, err)
	}
	read := beamio.DefaultReadConfig()
	read.RowsPerBatch = slices.Max(sizes)
	var reqs []*pb.PredictRequest
	errDone := errors.New("done")
	err = beamio.ReadFile(ctx, files[0], read, nil, func(rec arrow.RecordBatch) error {
		defer rec.Release()
		for _, n := range sizes {
			if int(rec.NumRows()) < n {
				return fmt.Errorf("serve: a batch of %d rows, need %d", rec.NumRows(), n)
			}
			rows := make([]int, n)
			for i := range rows {
				rows[i] = i
			}
			sub, err := batch.Take(memory.DefaultAllocator, rec, rows)
			if err != nil {
				return err
			}
			eb, err := batch.ToExampleBatch(sub)
			sub.Release()
			if err != nil {
				return err
			}
			b, err := proto.Marshal(eb)
			if err != nil {
				return err
			}
			reqs = append(reqs, &pb.PredictRequest{ModelSpec: &pb.ModelSpec{Name: "bench"},
				Inputs: map[string]*tfcorepb.TensorProto{modelserver.InputExampleBatch: {Dtype: tfcorepb.DataType_DT_STRING, StringVal: [][]byte{b}}}})
		}
		return errDone
	})
	if !errors.Is(err, errDone) {
		return nil, fmt.Errorf("serve: requests: %w", err)
	}
	return reqs, nil
}

// servedModel trains the serving section's model with its sparse segments stored as
// compress says (a FloatCompressorConfig in JSON; "" for fp32), exports it as model
// "bench" under dir/models-{storage}, loads it as monolith serve does, and records the
// heap and the peak RSS (target bound) the loaded version takes against the bytes the same
// rows take in fp32 (an 8-byte fid and 4 bytes per value).
func (r *run) servedModel(ctx context.Context, dir, storage, compress string, bound float64) (*train.Config, *train.ExportedModel, tfs.Servable, error) {
	c, err := trainConfig(dir, runtime.GOMAXPROCS(0), 2)
	if err != nil {
		return nil, nil, nil, err
	}
	for i := range c.Sparse.Segments {
		c.Sparse.Segments[i].Compress = json.RawMessage(compress)
	}
	c.EvalInput, c.Planted, c.Checkpoint.Dir = "", "", filepath.Join(dir, "model-"+storage)
	if _, err := train.Run(ctx, c, train.Options{Loop: true, HealthEvery: -1}); err != nil {
		return nil, nil, nil, fmt.Errorf("serve: train (%s): %w", storage, err)
	}
	exp, err := train.ExportModel(ctx, c, "", filepath.Join(dir, "models-"+storage), "bench", -1)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("serve: export (%s): %w", storage, err)
	}
	man, err := servingmodel.Open(exp.Dir)
	if err != nil {
		return nil, nil, nil, err
	}
	var raw float64 // the rows in fp32: each an 8-byte fid and its values
	for _, t := range man.Tables {
		raw += float64(t.Entries) * float64(8+4*t.Dim)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	sv, err := (modelserver.Loader{}).Load(ctx, "bench", exp.Dir, exp.Version)
	if err != nil {
		return nil, nil, nil, err
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	heap := float64(after.HeapInuse) - float64(before.HeapInuse)
	r.add(Figure{Issue: 21, Section: SectionServe, Name: fmt.Sprintf("served version heap vs its fp32 table bytes, %s storage (%d rows)", storage, exp.Entries),
		Unit: "bytes", Values: []float64{heap}, Baseline: "fp32 table bytes", Base: []float64{raw},
		RatioOf: "heap ÷ fp32 table bytes", Ratios: []float64{heap / raw},
		Note: fmt.Sprintf("heap in use after a GC, around Load in this process; the version's table files hold %d bytes", exp.Bytes)})
	runtime.KeepAlive(sv)

	// The issue's figure: the peak RSS a process takes to load the version, against the
	// same process without it, each load in a fresh child. Below minRSSTable bytes of
	// tables (the quick and tiny suites) the difference drowns in the processes' own
	// variation of a few MB, and is not measured.
	if raw < minRSSTable {
		r.log.Info("serve: peak RSS not measured: tables too small", "bytes", raw, "min", minRSSTable)
		return c, exp, sv, nil
	}
	var grown []float64
	for range r.sz.reps {
		var peak [2]int64
		for i, load := range []bool{false, true} {
			var res serveLoadResult
			u, err := child.Run(ctx, r.tmp, serveLoadChildFunc, serveLoadJob{Dir: exp.Dir, Version: exp.Version, Load: load}, &res)
			if err == nil && res.Loaded != load {
				err = fmt.Errorf("the child loaded: %v, asked: %v", res.Loaded, load)
			}
			if err != nil {
				return nil, nil, nil, fmt.Errorf("serve: load child (%s): %w", storage, err)
			}
			peak[i] = u.MaxRSS
		}
		grown = append(grown, float64(peak[1]-peak[0]))
	}
	r.add(Figure{Issue: 21, Section: SectionServe, Name: fmt.Sprintf("served version peak RSS vs its fp32 table bytes, %s storage (%d rows)", storage, exp.Entries),
		Unit: "bytes", Values: grown, Baseline: "fp32 table bytes", Base: slices.Repeat([]float64{raw}, len(grown)),
		RatioOf: "peak RSS ÷ fp32 table bytes", Ratios: ratios(grown, slices.Repeat([]float64{raw}, len(grown))),
		Target: &Target{On: OnRatio, Op: "<=", Bound: bound, Text: fmt.Sprintf("≤ %.1f× the raw table bytes with %s storage", bound, storage)},
		Note:   "peak RSS (VmHWM) of a fresh process that loads the version as monolith serve does, less that of the same process not loading it"})
	return c, exp, sv, nil
}

// minRSSTable is the fp32 table bytes from which the serving section measures a loaded
// version's peak RSS.
const minRSSTable = 16 << 20

// serveLoadChildFunc is the child.Func name of serveLoadChild.
const serveLoadChildFunc = "serve-load"

// serveLoadJob is a serve-load child's job: load the version in Dir, or (Load false) only
// start, for the baseline.
type serveLoadJob struct {
	Dir     string
	Version int64
	Load    bool
}

// serveLoadResult says whether the child loaded the version.
type serveLoadResult struct{ Loaded bool }

// serveLoadChild loads a version with monolith serve's loader and keeps it until its
// peak RSS is read.
func serveLoadChild(ctx context.Context, spec json.RawMessage) (any, error) {
	var job serveLoadJob
	if err := json.Unmarshal(spec, &job); err != nil {
		return nil, fmt.Errorf("serve-load child: %w", err)
	}
	if !job.Load {
		return serveLoadResult{}, nil
	}
	sv, err := (modelserver.Loader{}).Load(ctx, "bench", job.Dir, job.Version)
	if err != nil {
		return nil, err
	}
	runtime.KeepAlive(sv)
	return serveLoadResult{Loaded: true}, nil
}
