package suite

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/monolith-go/monolith/benchmarks"
	"github.com/monolith-go/monolith/kernels/kernelbench"
	"github.com/monolith-go/monolith/schemas/batch"
)

// readFile reads path through buf to its end and returns the bytes read: the raw
// file-read baseline of decoding (page cache, no parsing).
func readFile(path string, buf []byte) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var n int64
	for {
		m, err := f.Read(buf)
		n += int64(m)
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

// decode times file bytes → Arrow batches for the three record types against reading the
// same file (raw read bandwidth) and memcpy of its size, and on two goroutines against
// one, in the same repetition. Each way of decoding keeps one benchmarks.Decoder over all
// its repetitions, as a job's reader keeps its buffers from file to file.
func (r *run) decode(ctx context.Context) error {
	buf := make([]byte, 1<<20)
	for _, tc := range []struct {
		name string
		typ  batch.Source
		goal float64 // ÷ memcpy, issue 22
	}{
		{"ExampleBatch", batch.SourceExampleBatch, 0.08},
		{"Example", batch.SourceExample, 0.04},
		{"Instance", batch.SourceInstance, 0.04},
	} {
		path := filepath.Join(r.tmp, "decode-"+tc.name+".pb")
		size, err := benchmarks.WriteDecodeInput(path, tc.typ, r.sz.decodeRecs)
		if err != nil {
			return fmt.Errorf("%s input: %w", tc.name, err)
		}
		rowsIn := int64(r.sz.decodeRecs * benchmarks.DefaultShape.Rows)
		r.res.Inputs = append(r.res.Inputs, fmt.Sprintf("decode, %s: %d rows of benchmarks.DefaultShape (%d fid features, %d shared) in %s records, PB stream with sort ids, %.1f MB",
			tc.name, rowsIn, benchmarks.DefaultShape.Features, benchmarks.DefaultShape.Shared, tc.name, float64(size)/1e6))
		var dec, dec2, read, mem []float64
		dec1, dec2p := benchmarks.NewDecoder(), benchmarks.NewDecoder()
		for range r.sz.reps {
			tRead, err := timeLoop(r.sz.budget, func() error {
				n, err := readFile(path, buf)
				if err == nil && n != size {
					err = fmt.Errorf("read %d of %d bytes", n, size)
				}
				return err
			})
			if err != nil {
				return fmt.Errorf("%s: read %s: %w", tc.name, path, err)
			}
			m := kernelbench.MemcpyMBpsFor(int(size), r.sz.budget)
			// One goroutine and two alternate file by file (timeAlternating): their ratio
			// is the target.
			ts, err := timeAlternating(r.sz.budget,
				decodeCall("1 goroutine", rowsIn, func() (int64, error) { return dec1.File(ctx, path, tc.typ) }),
				decodeCall("2 goroutines", rowsIn, func() (int64, error) { return dec2p.FileParallel(ctx, path, tc.typ, 2) }))
			if err != nil {
				return fmt.Errorf("%s: decode %s: %w", tc.name, path, err)
			}
			tDec, tDec2 := ts[0], ts[1]
			dec = append(dec, float64(size)/tDec/1e6)
			dec2 = append(dec2, float64(size)/tDec2/1e6)
			read = append(read, float64(size)/tRead/1e6)
			mem = append(mem, m)
		}
		r.add(Figure{Issue: 2, Section: SectionDecode, Name: fmt.Sprintf("decode %s file → Arrow batches vs reading the file", tc.name),
			Unit: "MB/s of file", Values: dec, Baseline: "file read MB/s", Base: read, RatioOf: "÷ file read", Ratios: ratios(dec, read),
			Note: "issue 2 asks for the ratio, with no bound"})
		r.add(Figure{Issue: 22, Section: SectionDecode, Name: fmt.Sprintf("decode %s file → Arrow batches vs memcpy", tc.name),
			Unit: "MB/s of file", Values: dec, Baseline: "memcpy MB/s", Base: mem, RatioOf: "÷ memcpy", Ratios: ratios(dec, mem),
			Target: &Target{On: OnRatio, Op: ">=", Bound: tc.goal, Text: fmt.Sprintf("≥ %g× memcpy, one goroutine", tc.goal)}})
		r.add(Figure{Issue: 22, Section: SectionDecode, Name: fmt.Sprintf("decode %s file → Arrow batches, 2 goroutines", tc.name),
			Unit: "MB/s of file", Values: dec2, Baseline: "1-goroutine MB/s", Base: dec, RatioOf: "2 ÷ 1 goroutine", Ratios: ratios(dec2, dec),
			Target: &Target{On: OnRatio, Op: ">=", Bound: 1.7, Text: "≥ 1.7× on 2 goroutines"},
			Note:   "one goroutine frames the file into chunks of records, two decode them (dataset.Reader.NextChunk, Chunk.Decode), as the pipelines' read step does"})
	}
	return nil
}

// decodeCall is one call of decode for timing: an error, or a row count other than want,
// names the way of decoding.
func decodeCall(way string, want int64, decode func() (int64, error)) func() error {
	return func() error {
		rows, err := decode()
		if err == nil && rows != want {
			err = fmt.Errorf("decoded %d of %d rows", rows, want)
		}
		if err != nil {
			return fmt.Errorf("on %s: %w", way, err)
		}
		return nil
	}
}
