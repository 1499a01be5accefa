// Package collect brings a pipeline's small merged result back to the driver: a bundle
// emits a compact state ([]byte), the caller combines the states into one, and WriteFile
// writes it atomically to a path the driver reads once the pipeline is done.
//
// Only small aggregates travel this way (per-feature counters, per-bundle statistics,
// predictions): batches never do. The path must be visible to the workers and the driver
// (a local path on the embedded runner, shared storage elsewhere).
package collect

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/monolith-go/monolith/internal/atomicfile"
)

func init() {
	register.DoFn2x1[context.Context, []byte, error](&writeFileFn{})
}

// WriteFile writes every []byte element of col to path, atomically; col should hold one
// element (the output of a global Combine). No element writes nothing: ReadFile then
// reports ok == false.
func WriteFile(s beam.Scope, col beam.PCollection, path string) {
	beam.ParDo0(s.Scope("collect.WriteFile"), &writeFileFn{Path: path}, col)
}

type writeFileFn struct {
	Path string
}

func (f *writeFileFn) ProcessElement(_ context.Context, b []byte) error {
	out, err := atomicfile.Create(f.Path)
	if err != nil {
		return fmt.Errorf("collect: %w", err)
	}
	if _, err := out.Write(b); err != nil {
		return errors.Join(fmt.Errorf("collect: %s: %w", f.Path, err), out.Abort())
	}
	return out.Commit()
}

// Prepare removes a stale result at path before a run.
func Prepare(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("collect: %w", err)
	}
	return nil
}

// ReadFile reads and removes the result at path; ok is false when the pipeline wrote none
// (it had no input).
func ReadFile(path string) (b []byte, ok bool, err error) {
	b, err = os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil, false, nil
	case err != nil:
		return nil, false, fmt.Errorf("collect: %w", err)
	}
	_ = os.Remove(path)
	return b, true, nil
}
