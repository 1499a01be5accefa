package shard_test

import (
	"crypto/sha256"
	"fmt"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"

	kshard "github.com/monolith-go/monolith/kernels/shard"
	"github.com/monolith-go/monolith/runners/beamtest"
	"github.com/monolith-go/monolith/schemas/batch/batchtest"
	"github.com/monolith-go/monolith/transforms/config"
	"github.com/monolith-go/monolith/transforms/element"
	"github.com/monolith-go/monolith/transforms/parse"
	"github.com/monolith-go/monolith/transforms/shard"
)

func TestMain(m *testing.M) { beamtest.Main(m) }

func init() { register.Function1x2(digest) }

// digest identifies a sharded element: its rows and the encoding of its sharding result.
func digest(s *element.Sharded) (string, error) {
	b, err := s.Shard.MarshalBinary()
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%d rows %x", s.Rows(), sha256.Sum256(b)), nil
}

// TestShard shards the fixture, cut into batches, on prism (through the Sharded coder)
// for every version and both dedup modes, fused and after Parse, and compares with the
// kernel run directly.
func TestShard(t *testing.T) {
	fix := batchtest.FixtureRecord(t, memory.NewGoAllocator())
	var recs []arrow.RecordBatch
	for lo := int64(0); lo < fix.NumRows(); lo += 10 {
		recs = append(recs, fix.NewSlice(lo, min(lo+10, fix.NumRows())))
	}
	for _, version := range []int{1, 2, 3, 4, 5} {
		for _, unique := range []bool{false, true} {
			for _, parsed := range []bool{false, true} {
				t.Run(fmt.Sprintf("v%d unique=%v parsed=%v", version, unique, parsed), func(t *testing.T) {
					k, err := config.Load(batchtest.ConfigPath(t), 3, version)
					if err != nil {
						t.Fatal(err)
					}
					k.Unique = unique
					cfg, err := k.Build()
					if err != nil {
						t.Fatal(err)
					}
					s, err := kshard.New(cfg, kshard.Options{PS: k.PS, Version: k.Version, Unique: unique})
					if err != nil {
						t.Fatal(err)
					}
					names := make([]string, len(cfg.Features))
					for i, f := range cfg.Features {
						names[i] = f.Name
					}
					var pr parse.Parser
					if err := pr.Init(parse.SparseOnly(names...)); err != nil {
						t.Fatal(err)
					}
					var want []any
					for _, r := range recs {
						if parsed {
							if r, err = pr.Parse(r); err != nil {
								t.Fatal(err)
							}
						}
						var in kshard.Input
						if err := in.FromBatch(r, cfg); err != nil {
							t.Fatal(err)
						}
						res, err := s.Shard(&in)
						if err != nil {
							t.Fatal(err)
						}
						d, err := digest(&element.Sharded{Batch: r, Shard: res})
						if err != nil {
							t.Fatal(err)
						}
						want = append(want, d)
					}
					p, sc := beam.NewPipelineWithRoot()
					col := element.Create(sc, recs...)
					if parsed {
						col = parse.Parse(sc, col, parse.SparseOnly(names...))
					}
					out := beam.Reshuffle(sc, shard.Shard(sc, col, k))
					passert.Equals(sc, beam.ParDo(sc, digest, out), want...)
					if err := ptest.Run(p); err != nil {
						t.Fatal(err)
					}
				})
			}
		}
	}
}

func TestShardConstruction(t *testing.T) {
	good, err := config.Load(batchtest.ConfigPath(t), 1, 5)
	if err != nil {
		t.Fatal(err)
	}
	tooManyPS := good
	tooManyPS.PS = 1<<20 + 1 // accepted by config.Kernels, rejected by kernels/shard
	for name, k := range map[string]config.Kernels{
		"bad version":  {PS: 1, Version: 9},
		"too many PSs": tooManyPS,
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "shard.Shard") {
					t.Fatalf("recover() = %v, want a shard.Shard panic", r)
				}
			}()
			_, s := beam.NewPipelineWithRoot()
			shard.Shard(s, beam.Create(s, 1), k)
		})
	}
}
