package filter

import (
	"testing"

	"github.com/monolith-go/monolith/schemas/fid"
	"github.com/monolith-go/monolith/schemas/pspb"
)

// go test -run '^$' -bench '^BenchmarkAdmit$' -count 6 ./ps/filter | tee new.txt   (compare with benchstat)
func BenchmarkAdmit(b *testing.B) {
	const keys = 1 << 18 // a quarter of the default capacity: counts, no slides
	fids := make([]int64, keys)
	for i := range fids {
		fids[i] = int64(fid.MakeV2(uint64(i%100), uint64(i)*0x9e3779b97f4a7c15))
	}
	for _, bc := range []struct {
		name string
		cfg  *pspb.FilterConfig
	}{
		{"sliding", &pspb.FilterConfig{}},
		{"probabilistic", &pspb.FilterConfig{Type: pspb.FilterConfig_PROBABILISTIC}},
		{"none", &pspb.FilterConfig{Type: pspb.FilterConfig_NONE}},
	} {
		f := mustNew(b, bc.cfg, occurrence(5))
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				f.Admit(fids[i&(keys-1)], 1)
				i++
			}
			b.ReportMetric(float64(i)/b.Elapsed().Seconds(), "fids/s")
		})
		b.Run(bc.name+"/parallel", func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				i := 0
				for pb.Next() {
					f.Admit(fids[i&(keys-1)], 1)
					i += 7
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "fids/s")
		})
	}
}
