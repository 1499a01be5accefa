package benchmarks

import (
	"context"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"

	"github.com/monolith-go/monolith/schemas/batch"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestDecoder: one Decoder, on 1, 2 and 3 goroutines, yields every row of each record
// type, file after file, and a file that does not decode is an error on any number of
// goroutines.
func TestDecoder(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	for _, typ := range []batch.Source{batch.SourceExampleBatch, batch.SourceExample, batch.SourceInstance} {
		path := filepath.Join(dir, typ.String()+".pb")
		if _, err := WriteDecodeInput(path, typ, 3); err != nil {
			t.Fatal(err)
		}
		want := int64(3 * DefaultShape.Rows)
		d := NewDecoder()
		if rows, err := d.File(ctx, path, typ); err != nil || rows != want {
			t.Fatalf("%v: Decoder.File: %d rows, %v; want %d", typ, rows, err, want)
		}
		for _, w := range []int{1, 2, 3} {
			if rows, err := d.FileParallel(ctx, path, typ, w); err != nil || rows != want {
				t.Errorf("%v on %d goroutines: %d rows, %v; want %d", typ, w, rows, err, want)
			}
		}
		other := batch.SourceExample
		if typ == batch.SourceExample {
			other = batch.SourceInstance
		}
		if _, err := d.FileParallel(ctx, path, other, 2); err == nil {
			t.Errorf("%v read as %v: no error", typ, other)
		}
	}
}
