package layout_test

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"

	"github.com/monolith-go/monolith/internal/fixtures"
	"github.com/monolith-go/monolith/io/pbtext"
	"github.com/monolith-go/monolith/kernels/featcfg"
	klayout "github.com/monolith-go/monolith/kernels/layout"
	kshard "github.com/monolith-go/monolith/kernels/shard"
	"github.com/monolith-go/monolith/runners/beamtest"
	"github.com/monolith-go/monolith/schemas/batch/batchtest"
	"github.com/monolith-go/monolith/transforms/beamio"
	"github.com/monolith-go/monolith/transforms/config"
	"github.com/monolith-go/monolith/transforms/element"
	"github.com/monolith-go/monolith/transforms/layout"
	"github.com/monolith-go/monolith/transforms/shard"
)

func TestMain(m *testing.M) { beamtest.Main(m) }

func init() {
	register.Function1x2[*element.Sharded, string, error](tensorDigest)
	register.Function1x2[*element.Sharded, *element.Sharded, error](syntheticGrads)
	register.Function1x1[element.TableGrads, string](gradDigest)
}

// synthGrad is the gradient the tests feed back: element i of output o.
func synthGrad(o, i int) float32 { return float32(i%7+1)/4 + float32(o%3)/2 }

// syntheticGrads replaces an element's layout outputs by synthetic gradients.
func syntheticGrads(in *element.Sharded) (*element.Sharded, error) {
	ts, err := element.Tensors(in.Tensors)
	if err != nil {
		return nil, err
	}
	out := make([]element.Tensor, len(ts))
	for o, t := range ts {
		g := make([]float32, len(t.Data))
		for i := range g {
			g[i] = synthGrad(o, i)
		}
		out[o] = element.Tensor{Name: t.Name, Shape: t.Shape, Data: g}
	}
	rec, err := element.NewTensors(in.Rows(), out)
	if err != nil {
		return nil, err
	}
	return &element.Sharded{Shard: in.Shard, Tensors: rec}, nil
}

func floatsDigest(h interface{ Write([]byte) (int, error) }, fs []float32) {
	var b [4]byte
	for _, f := range fs {
		binary.LittleEndian.PutUint32(b[:], math.Float32bits(f))
		h.Write(b[:])
	}
}

// tensorDigest identifies an element's tensors by name, shape and exact values; the
// first fid of the batch tells batches apart.
func tensorDigest(in *element.Sharded) (string, error) {
	ts, err := element.Tensors(in.Tensors)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	for _, t := range ts {
		fmt.Fprintf(h, "%s%v;", t.Name, t.Shape)
		floatsDigest(h, t.Data)
	}
	return fmt.Sprintf("rows %d fids %d: %x", in.Rows(), len(in.Shard.Fids), h.Sum(nil)[:8]), nil
}

func gradDigest(g element.TableGrads) string {
	h := sha256.New()
	for _, f := range g.Fids {
		fmt.Fprintf(h, "%x,", f)
	}
	floatsDigest(h, g.Grads)
	return fmt.Sprintf("%s %d fids: %x", g.Key(), len(g.Fids), h.Sum(nil)[:8])
}

// expected computes the digests with the kernels directly, batch by batch.
func expected(t *testing.T, k config.Kernels, rowsPerBatch int) (fwd, grads []any) {
	t.Helper()
	cfg, err := k.Build()
	if err != nil {
		t.Fatal(err)
	}
	s, err := kshard.New(cfg, kshard.Options{PS: k.PS, Version: k.Version})
	if err != nil {
		t.Fatal(err)
	}
	lay, err := klayout.New(cfg, klayout.Options{PS: k.PS, Version: k.Version})
	if err != nil {
		t.Fatal(err)
	}
	fix := batchtest.FixtureRecord(t, memory.DefaultAllocator)
	names := layout.OutputNames(cfg)
	for lo := int64(0); lo < fix.NumRows(); lo += int64(rowsPerBatch) {
		rec := fix.NewSlice(lo, min(lo+int64(rowsPerBatch), fix.NumRows()))
		rows := int(rec.NumRows())
		var in kshard.Input
		if err := in.FromBatch(rec, cfg); err != nil {
			t.Fatal(err)
		}
		r, err := s.Shard(&in)
		if err != nil {
			t.Fatal(err)
		}
		emb, err := klayout.Arrange(k.Version, cfg, r, klayout.ListBuffers(cfg, r, klayout.SyntheticValue))
		if err != nil {
			t.Fatal(err)
		}
		outs := lay.Outputs(rows)
		req := []klayout.Sharded{klayout.FromShard(r)}
		if err := lay.Forward(req, emb, outs); err != nil {
			t.Fatal(err)
		}
		h := sha256.New()
		o := 0
		for li := range cfg.Layouts {
			l := &cfg.Layouts[li]
			for i := 0; i < l.Outputs(); i++ {
				fmt.Fprintf(h, "%s%v;", names[o], l.OutputShape(i, rows)[1:])
				floatsDigest(h, outs[o])
				o++
			}
		}
		fwd = append(fwd, fmt.Sprintf("rows %d fids %d: %x", rows, len(r.Fids), h.Sum(nil)[:8]))
		gs := lay.Outputs(rows)
		for o, g := range gs {
			for i := range g {
				g[i] = synthGrad(o, i)
			}
		}
		eg := klayout.Zeros(emb)
		if err := lay.Backward(req, gs, eg); err != nil {
			t.Fatal(err)
		}
		for kk, b := range klayout.Lists(k.Version, cfg, r, eg) {
			tb, p := kk/r.PS, kk%r.PS
			h := sha256.New()
			for _, f := range r.List(tb, p) {
				fmt.Fprintf(h, "%x,", f)
			}
			floatsDigest(h, b)
			grads = append(grads, fmt.Sprintf("%s:%d %d fids: %x", cfg.Tables[tb].Name, p, len(r.List(tb, p)), h.Sum(nil)[:8]))
		}
	}
	return fwd, grads
}

// TestShardLayoutGrad runs read → shard → layout → (synthetic gradients) → layout grad on
// prism with Reshuffles between the steps (so every element goes through its coder), for
// each op version, and compares with the kernels run directly.
func TestShardLayoutGrad(t *testing.T) {
	for _, version := range []int{1, 2, 3, 4, 5} {
		t.Run(fmt.Sprintf("v%d", version), func(t *testing.T) {
			fc, err := pbtext.ReadFeatureConfigsFile(batchtest.ConfigPath(t))
			if err != nil {
				t.Fatal(err)
			}
			if version == 1 {
				// v1 needs one embedding width per table and the fixture config mixes
				// widths in a table: give every feature a table of its own.
				for name, f := range fc.GetFeatureConfigs() {
					f.Table = "t_" + name
				}
			}
			k, err := config.New(fc, 3, version)
			if err != nil {
				t.Fatal(err)
			}
			wantFwd, wantGrad := expected(t, k, 20)
			p, s := beam.NewPipelineWithRoot()
			recs := beamio.Read(s, fixtures.Path(t, "example_batch.pbtxt"), beamio.WithRowsPerBatch(20))
			sharded := beam.Reshuffle(s, shard.Shard(s, recs, k))
			out := beam.Reshuffle(s, layout.Layout(s, sharded, k, layout.Synthetic{}))
			passert.Equals(s, beam.ParDo(s, tensorDigest, out), wantFwd...)
			grads := layout.LayoutGrad(s, beam.Reshuffle(s, beam.ParDo(s, syntheticGrads, out)), k)
			passert.Equals(s, beam.ParDo(s, gradDigest, beam.Reshuffle(s, grads)), wantGrad...)
			ptest.RunAndValidate(t, p)
		})
	}
}

// unregistered is a Source whose type is not registered with Beam.
type unregistered struct{}

func (unregistered) Embeddings(context.Context, *featcfg.Config, int, *element.Sharded) (klayout.Embedding, error) {
	return klayout.Embedding{}, nil
}

func TestConstructionErrors(t *testing.T) {
	k, err := config.Load(batchtest.ConfigPath(t), 1, 5)
	if err != nil {
		t.Fatal(err)
	}
	mustPanic := func(name string, fn func()) {
		t.Helper()
		defer func() {
			if recover() == nil {
				t.Errorf("%s: no panic", name)
			}
		}()
		fn()
	}
	_, s := beam.NewPipelineWithRoot()
	col := beam.Create(s, &element.Sharded{})
	mustPanic("unregistered source", func() { layout.Layout(s, col, k, unregistered{}) })
	bad := k
	bad.Version = 9
	mustPanic("bad version", func() { layout.Layout(s, col, bad, layout.Synthetic{}) })
	mustPanic("bad version grad", func() { layout.LayoutGrad(s, col, bad) })
	var _ arrow.RecordBatch
}
