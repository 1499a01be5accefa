package element_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"
	"google.golang.org/protobuf/proto"

	"github.com/monolith-go/monolith/io/pbtext"
	"github.com/monolith-go/monolith/kernels/featcfg"
	"github.com/monolith-go/monolith/kernels/shard"
	"github.com/monolith-go/monolith/runners/beamtest"
	"github.com/monolith-go/monolith/schemas/batch"
	"github.com/monolith-go/monolith/schemas/batch/batchtest"
	"github.com/monolith-go/monolith/schemas/prototest"
	"github.com/monolith-go/monolith/transforms/element"
)

func TestMain(m *testing.M) { beamtest.Main(m) }

func init() {
	register.DoFn2x1[[]byte, func(arrow.RecordBatch), error](&makeFn{})
	register.Emitter1[arrow.RecordBatch]()
	register.Function1x2[arrow.RecordBatch, string, error](digest)
	register.Function1x2[*element.Sharded, string, error](shardedDigest)
	register.DoFn2x1[arrow.RecordBatch, func(*element.Sharded), error](&shardFn{})
	register.Emitter1[*element.Sharded]()
}

// makeBatches builds the same batches in the test and inside the pipeline.
func makeBatches(seed uint64) ([]arrow.RecordBatch, error) {
	rng := rand.New(rand.NewPCG(seed, 7))
	mem := memory.DefaultAllocator
	var out []arrow.RecordBatch
	for i := 0; i < 3; i++ {
		eb, err := batch.FromExampleBatch(mem, prototest.ExampleBatch(rng, 1+rng.IntN(20)))
		if err != nil {
			return nil, err
		}
		ex, err := batch.FromExamples(mem, prototest.Examples(rng, 1+rng.IntN(20)))
		if err != nil {
			return nil, err
		}
		in, err := batch.FromInstances(mem, prototest.Instances(rng, 1+rng.IntN(20)))
		if err != nil {
			return nil, err
		}
		out = append(out, eb, ex, in)
	}
	return out, nil
}

type makeFn struct{ Seed uint64 }

func (f *makeFn) ProcessElement(_ []byte, emit func(arrow.RecordBatch)) error {
	recs, err := makeBatches(f.Seed)
	if err != nil {
		return err
	}
	for _, r := range recs {
		emit(r)
	}
	return nil
}

// digest identifies a batch by the messages it converts back to.
func digest(rec arrow.RecordBatch) (string, error) {
	src, err := batch.SourceOf(rec.Schema())
	if err != nil {
		return "", err
	}
	h := sha256.New()
	opts := proto.MarshalOptions{Deterministic: true}
	var msgs []proto.Message
	switch src {
	case batch.SourceExampleBatch:
		eb, err := batch.ToExampleBatch(rec)
		if err != nil {
			return "", err
		}
		msgs = append(msgs, eb)
	case batch.SourceExample:
		exs, err := batch.ToExamples(rec)
		if err != nil {
			return "", err
		}
		for _, e := range exs {
			msgs = append(msgs, e)
		}
	case batch.SourceInstance:
		ins, err := batch.ToInstances(rec)
		if err != nil {
			return "", err
		}
		for _, e := range ins {
			msgs = append(msgs, e)
		}
	}
	for _, m := range msgs {
		b, err := opts.Marshal(m)
		if err != nil {
			return "", err
		}
		h.Write(b)
	}
	return fmt.Sprintf("%s/%d/%s", src, rec.NumRows(), hex.EncodeToString(h.Sum(nil))[:16]), nil
}

// TestRecordCoderOnPrism moves batches of every source through a Reshuffle, which makes
// prism encode and decode them with the registered IPC coder.
func TestRecordCoderOnPrism(t *testing.T) {
	const seed = 42
	recs, err := makeBatches(seed)
	if err != nil {
		t.Fatal(err)
	}
	var want []any
	for _, r := range recs {
		d, err := digest(r)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, d)
	}
	p, s := beam.NewPipelineWithRoot()
	col := beam.ParDo(s, &makeFn{Seed: seed}, beam.Impulse(s))
	col = beam.Reshuffle(s, col)
	passert.Equals(s, beam.ParDo(s, digest, col), want...)
	if err := ptest.Run(p); err != nil {
		t.Fatal(err)
	}
}

type shardFn struct{ Config string }

func (f *shardFn) ProcessElement(rec arrow.RecordBatch, emit func(*element.Sharded)) error {
	fc, err := pbtext.ReadFeatureConfigsFile(f.Config)
	if err != nil {
		return err
	}
	cfg, err := featcfg.New(fc)
	if err != nil {
		return err
	}
	s, err := shard.New(cfg, shard.Options{PS: 2, Version: 5})
	if err != nil {
		return err
	}
	var in shard.Input
	if err := in.FromBatch(rec, cfg); err != nil {
		return err
	}
	r, err := s.Shard(&in)
	if err != nil {
		return err
	}
	tens, err := element.NewTensors(int(rec.NumRows()), []element.Tensor{{Name: "x", Shape: []int{2}, Data: make([]float32, 2*rec.NumRows())}})
	if err != nil {
		return err
	}
	emit(&element.Sharded{Batch: rec, Shard: r.Clone(), Tensors: tens})
	return nil
}

func shardedDigest(s *element.Sharded) (string, error) {
	d, err := digest(s.Batch)
	if err != nil {
		return "", err
	}
	enc, err := s.Shard.MarshalBinary()
	if err != nil {
		return "", err
	}
	ts, err := element.Tensors(s.Tensors)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s %x %d %v", d, sha256.Sum256(enc), len(ts[0].Data), ts[0].Shape), nil
}

// TestShardedCoderOnPrism moves a Sharded element through a Reshuffle.
func TestShardedCoderOnPrism(t *testing.T) {
	cfgPath := batchtest.ConfigPath(t)
	p, s := beam.NewPipelineWithRoot()
	fix := batchtest.FixtureRecord(t, memory.DefaultAllocator)
	recs := element.Create(s, fix)
	sharded := beam.Reshuffle(s, beam.ParDo(s, &shardFn{Config: cfgPath}, recs))
	want, err := func() (string, error) {
		var out *element.Sharded
		err := (&shardFn{Config: cfgPath}).ProcessElement(fix, func(x *element.Sharded) { out = x })
		if err != nil {
			return "", err
		}
		return shardedDigest(out)
	}()
	if err != nil {
		t.Fatal(err)
	}
	passert.Equals(s, beam.ParDo(s, shardedDigest, sharded), want)
	if err := ptest.Run(p); err != nil {
		t.Fatal(err)
	}
}

func TestRecordRoundTrip(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	fix := batchtest.FixtureRecord(t, mem)
	defer fix.Release()
	enc, err := element.EncodeRecord(fix)
	if err != nil {
		t.Fatal(err)
	}
	got, err := element.DecodeRecord(enc)
	if err != nil {
		t.Fatal(err)
	}
	defer got.Release()
	batchtest.CheckFixture(t, got)
	batchtest.SameBatch(t, 0, got, fix)
	// Every truncation is an error, never a panic.
	for n := 0; n < len(enc); n += 1 + n/50 {
		if r, err := element.DecodeRecord(enc[:n]); err == nil {
			r.Release()
			t.Fatalf("a %d-byte prefix of %d decoded", n, len(enc))
		} else if !errors.Is(err, element.ErrCorrupt) {
			t.Fatalf("prefix %d: error %v does not wrap ErrCorrupt", n, err)
		}
	}
}

func TestTensors(t *testing.T) {
	data := []float32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}
	rec, err := element.NewTensors(2, []element.Tensor{
		{Name: "a", Shape: []int{2, 3}, Data: data},
		{Name: "b", Shape: []int{1}, Data: []float32{-1, -2}},
	})
	if err != nil {
		t.Fatal(err)
	}
	enc, err := element.EncodeRecord(rec)
	if err != nil {
		t.Fatal(err)
	}
	back, err := element.DecodeRecord(enc)
	if err != nil {
		t.Fatal(err)
	}
	ts, err := element.Tensors(back)
	if err != nil {
		t.Fatal(err)
	}
	if len(ts) != 2 || ts[0].Name != "a" || !reflect.DeepEqual(ts[0].Shape, []int{2, 3}) || !reflect.DeepEqual(ts[0].Data, data) ||
		!reflect.DeepEqual(ts[1].Data, []float32{-1, -2}) {
		t.Fatalf("tensors = %+v", ts)
	}
	// A slice of the record sees its rows only.
	sl := back.NewSlice(1, 2)
	ts, err = element.Tensors(sl)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(ts[0].Data, data[6:]) {
		t.Fatalf("slice data = %v", ts[0].Data)
	}
	if _, err := element.NewTensors(3, []element.Tensor{{Name: "a", Shape: []int{2}, Data: data}}); err == nil {
		t.Fatal("NewTensors accepted 12 floats for 3 rows × 2")
	}
}

func TestTableGradsCodec(t *testing.T) {
	cases := []element.TableGrads{
		{Table: "user", Shard: 1},
		{Table: "item", Shard: 0, Fids: []uint64{7, 1 << 60}, Offsets: []int32{0, 2, 3}, Grads: []float32{1, 2, 3}},
		{Table: "t", Shard: 3, Fids: []uint64{9}, Offsets: []int32{0, 1}, Grads: []float32{0.5}, Counts: []int32{4}},
	}
	for _, g := range cases {
		b, err := element.EncodeTableGrads(g)
		if err != nil {
			t.Fatal(err)
		}
		got, err := element.DecodeTableGrads(b)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, g) {
			t.Fatalf("round trip %+v -> %+v", g, got)
		}
		for n := 0; n < len(b); n++ {
			if _, err := element.DecodeTableGrads(b[:n]); err == nil {
				t.Fatalf("%d-byte prefix decoded", n)
			}
		}
	}
	if _, err := element.EncodeTableGrads(element.TableGrads{Fids: []uint64{1}, Offsets: []int32{0, 5}, Grads: []float32{1}}); err == nil {
		t.Fatal("inconsistent TableGrads encoded")
	}
}

// readAll runs every reader of the batch layout over a decoded record: a record that
// decodes but does not follow the layout must make them fail, never panic.
func readAll(r arrow.RecordBatch) {
	_, _ = batch.ToExampleBatch(r)
	_, _ = batch.ToExamples(r)
	_, _ = batch.ToInstances(r)
	_, _ = batch.Rows(r)
	_, _ = batch.LineIDBytes(r, 0)
	if d, err := batch.DenseColumn(r, batch.ColLabel); err == nil {
		for row := range d.Rows {
			_ = d.Row(row)
		}
	}
	for i, f := range r.Schema().Fields() {
		if !batch.IsFeature(f) {
			continue
		}
		if s, err := batch.SparseAt(r, i); err == nil {
			for row := range s.Rows {
				_ = s.Row(row)
			}
		}
		for row := range min(int(r.NumRows()), 4) {
			_, _ = batch.RawFids(r, i, row, nil)
		}
	}
}

func FuzzDecodeElements(f *testing.F) {
	recs, err := makeBatches(1)
	if err != nil {
		f.Fatal(err)
	}
	for _, r := range recs[:3] {
		b, err := element.EncodeRecord(r)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	g, _ := element.EncodeTableGrads(element.TableGrads{Table: "t", Fids: []uint64{1}, Offsets: []int32{0, 1}, Grads: []float32{1}, Counts: []int32{1}})
	f.Add(g)
	f.Fuzz(func(t *testing.T, b []byte) {
		if r, err := element.DecodeRecord(b); err == nil {
			if _, err := element.EncodeRecord(r); err != nil {
				t.Fatal(err)
			}
			readAll(r)
			r.Release()
		}
		if s, err := element.DecodeSharded(b); err == nil {
			if _, err := element.EncodeSharded(s); err != nil {
				t.Fatal(err)
			}
		}
		if g, err := element.DecodeTableGrads(b); err == nil {
			again, err := element.EncodeTableGrads(g)
			if err != nil {
				t.Fatal(err)
			}
			// Compared as encodings: NaN gradients (any bit pattern) must survive bit-exactly,
			// which reflect.DeepEqual cannot tell (NaN != NaN).
			g2, err := element.DecodeTableGrads(again)
			if err != nil {
				t.Fatalf("re-decoding: %v", err)
			}
			if third, err := element.EncodeTableGrads(g2); err != nil || !bytes.Equal(third, again) || g2.Table != g.Table || len(g2.Counts) != len(g.Counts) || (g2.Counts == nil) != (g.Counts == nil) {
				t.Fatalf("re-encoding differs: %v\n%x\n%x", err, again, third)
			}
		}
	})
}
