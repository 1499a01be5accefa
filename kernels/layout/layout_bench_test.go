package layout_test

// Layout and sharding v5 on the §6.1 shape and a large shape, with 1 and 2 goroutines.
// Each benchmark reports MB/s of the bytes the kernel must touch (kernelbench.LayoutBytes,
// ShardBytes), the memcpy bandwidth measured just before it in the same process
// (memcpy_MB/s) and their ratio (x_memcpy). Reproduce:
//
//	go test -run '^$' -bench 'Benchmark(Shard|Layout)' -benchmem -count 5 ./kernels/layout | tee kernels.txt

import (
	"fmt"
	"testing"

	"github.com/monolith-go/monolith/kernels/kernelbench"
	"github.com/monolith-go/monolith/kernels/layout"
	"github.com/monolith-go/monolith/kernels/shard"
)

var cases = []func(uint64) kernelbench.Case{kernelbench.Scenario61, kernelbench.Large}

func report(b *testing.B, bytes int64, base float64) {
	mbps := float64(bytes) * float64(b.N) / b.Elapsed().Seconds() / 1e6
	b.ReportMetric(base, "memcpy_MB/s")
	b.ReportMetric(mbps/base, "x_memcpy")
}

func BenchmarkShard(b *testing.B) {
	for _, mk := range cases {
		c := mk(1)
		for _, mode := range []string{"unique", "plain"} {
			for _, g := range []int{1, 2} {
				b.Run(fmt.Sprintf("%s/v5/%s/g%d", c.Name, mode, g), func(b *testing.B) {
					s, err := shard.New(c.Cfg, shard.Options{PS: c.PS, Version: 5, Unique: mode == "unique", Parallel: g})
					if err != nil {
						b.Fatal(err)
					}
					r, err := s.Shard(c.In)
					if err != nil {
						b.Fatal(err)
					}
					bytes := kernelbench.ShardBytes(c, r)
					base := kernelbench.MemcpyMBps(int(bytes / 2))
					b.SetBytes(bytes)
					b.ReportAllocs()
					for b.Loop() {
						if _, err := s.Shard(c.In); err != nil {
							b.Fatal(err)
						}
					}
					b.ReportMetric(float64(len(r.FidOffset))*float64(b.N)/b.Elapsed().Seconds(), "fids/s")
					report(b, bytes, base)
				})
			}
		}
	}
}

func BenchmarkLayout(b *testing.B) {
	for _, mk := range cases {
		c := mk(1)
		s, err := shard.New(c.Cfg, shard.Options{PS: c.PS, Version: 5, Unique: true})
		if err != nil {
			b.Fatal(err)
		}
		r, err := s.Shard(c.In)
		if err != nil {
			b.Fatal(err)
		}
		emb, err := layout.Arrange(5, c.Cfg, r, layout.ListBuffers(c.Cfg, r, layout.SyntheticValue))
		if err != nil {
			b.Fatal(err)
		}
		req := []layout.Sharded{layout.FromShard(r)}
		// forward-reads: Forward's embedding reads alone (Layouter.ForwardReads), against
		// the forward's bytes.
		for _, dir := range []string{"forward", "forward-reads", "backward"} {
			for _, g := range []int{1, 2} {
				b.Run(fmt.Sprintf("%s/v5/%s/g%d", c.Name, dir, g), func(b *testing.B) {
					l, err := layout.New(c.Cfg, layout.Options{Version: 5, PS: c.PS, Parallel: g})
					if err != nil {
						b.Fatal(err)
					}
					out := l.Outputs(c.In.Rows)
					eg := layout.Zeros(emb)
					bytes := kernelbench.LayoutBytes(c, r, l, dir == "backward")
					base := kernelbench.MemcpyMBps(int(bytes / 2))
					b.SetBytes(bytes)
					b.ReportAllocs()
					for b.Loop() {
						switch dir {
						case "forward":
							err = l.Forward(req, emb, out)
						case "forward-reads":
							_, err = l.ForwardReads(req, emb)
						default:
							err = l.Backward(req, out, eg)
						}
						if err != nil {
							b.Fatal(err)
						}
					}
					report(b, bytes, base)
				})
			}
		}
	}
}
