package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/monolith-go/monolith/io/dataset"
)

// progress prints a status line to stderr once a second while a long command runs.
type progress struct {
	w     io.Writer
	stats func() dataset.Stats
	start time.Time
	stop  chan struct{}
	done  sync.WaitGroup
	tty   bool
}

// startProgress starts the reporter according to mode ("auto", "always", "never"). It
// returns nil when progress is off.
func startProgress(ctx context.Context, mode string, w io.Writer, stats func() dataset.Stats) (*progress, error) {
	tty := false
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			tty = true
		}
	}
	switch mode {
	case "never":
		return nil, nil
	case "auto":
		if !tty {
			return nil, nil
		}
	case "always":
	default:
		return nil, fmt.Errorf("%w: --progress %q (want auto, always or never)", errUsage, mode)
	}
	p := &progress{w: w, stats: stats, start: time.Now(), stop: make(chan struct{}), tty: tty}
	p.done.Add(1)
	go func() {
		defer p.done.Done()
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-p.stop:
				return
			case <-t.C:
				p.print(false)
			}
		}
	}()
	return p, nil
}

func (p *progress) print(final bool) {
	s := p.stats()
	el := time.Since(p.start).Seconds()
	line := fmt.Sprintf("%d files, %d records, %d rows, %.1f MB in %.1fs (%.0f rows/s, %.1f MB/s)",
		s.Files, s.Records, s.Rows, float64(s.Bytes)/1e6, el, float64(s.Rows)/el, float64(s.Bytes)/1e6/el)
	switch {
	case p.tty && !final:
		fmt.Fprintf(p.w, "\r%s", line)
	case p.tty:
		fmt.Fprintf(p.w, "\r%s\n", line)
	default:
		fmt.Fprintln(p.w, line)
	}
}

// finish stops the reporter and prints the final line.
func (p *progress) finish() {
	if p == nil {
		return
	}
	close(p.stop)
	p.done.Wait()
	p.print(true)
}
