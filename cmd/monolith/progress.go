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

// progressMode decides --progress: whether progress goes to w ("auto": when w is a
// terminal, "always", "never"), and whether w is a terminal.
func progressMode(mode string, w io.Writer) (on, tty bool, err error) {
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			tty = true
		}
	}
	switch mode {
	case "never":
		return false, tty, nil
	case "auto":
		return tty, tty, nil
	case "always":
		return true, tty, nil
	}
	return false, tty, fmt.Errorf("%w: --progress %q (want auto, always or never)", errUsage, mode)
}

// startProgress starts the reporter according to mode (see progressMode). It returns nil
// when progress is off.
func startProgress(ctx context.Context, mode string, w io.Writer, stats func() dataset.Stats) (*progress, error) {
	on, tty, err := progressMode(mode, w)
	if err != nil || !on {
		return nil, err
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
