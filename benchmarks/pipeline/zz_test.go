package pipeline

import (
	"context"
	"os"
	"testing"
)

func TestZZChild(t *testing.T) {
	if os.Getenv("ZZ") == "" {
		t.Skip()
	}
	ctx := context.Background()
	d, err := Prepare(ctx, Shape{BaseRows: 65536, BaseFiles: 4, MaxScale: 4, PS: 4, Version: 5, Unique: true}, "/tmp/zzdata")
	if err != nil {
		t.Fatal(err)
	}
	tiny, err := Prepare(ctx, Shape{BaseRows: 256, BaseFiles: 1, MaxScale: 1, PS: 4, Version: 5, Unique: true}, "/tmp/zztiny")
	if err != nil {
		t.Fatal(err)
	}
	for rep := 0; rep < 4; rep++ {
		for _, s := range []int{0, 1, 4} {
			for _, m := range []string{ModeLoop, ModePipeline} {
				job := d.Job(m, s, 0)
				if s == 0 {
					job = tiny.Job(m, 1, 0)
				}
				r, err := RunChild(ctx, job, t.TempDir())
				if err != nil {
					t.Fatal(err)
				}
				t.Logf("x%d %-8s wall %6.1f ms cpu %6.1f ms proc %6.1f ms rss %d MiB", s, m, r.Wall.Seconds()*1e3, r.CPU.Seconds()*1e3, r.ProcRun.Seconds()*1e3, r.MaxRSS>>20)
			}
		}
	}
}
