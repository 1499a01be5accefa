package pqfile

import (
	"bytes"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// validFile is a Parquet file of one int64 column holding 0..rows-1, written by pqarrow.
func validFile(t *testing.T, rows int) []byte {
	t.Helper()
	sc := arrow.NewSchema([]arrow.Field{{Name: "x", Type: arrow.PrimitiveTypes.Int64}}, nil)
	b := array.NewInt64Builder(memory.DefaultAllocator)
	defer b.Release()
	for i := range rows {
		b.Append(int64(i))
	}
	col := b.NewArray()
	defer col.Release()
	rec := array.NewRecordBatch(sc, []arrow.Array{col}, int64(rows))
	defer rec.Release()
	var buf bytes.Buffer
	w, err := pqarrow.NewFileWriter(sc, &buf, nil, pqarrow.DefaultWriterProps())
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// closeCounter is a source that counts the calls of its Close method.
type closeCounter struct {
	*bytes.Reader
	closed int
}

func (c *closeCounter) Close() error {
	c.closed++
	return nil
}

func TestOpen(t *testing.T) {
	valid := validFile(t, 100)
	badMagic := append([]byte(nil), valid...)
	copy(badMagic[len(badMagic)-4:], "PAR0")
	metaFlipped := append([]byte(nil), valid...)
	for i := len(metaFlipped) - 40; i < len(metaFlipped)-8; i++ {
		metaFlipped[i] ^= 0xff // inside the Thrift footer
	}
	for _, tc := range []struct {
		name string
		data []byte
		rows int64 // -1: Open must fail
	}{
		{"valid", valid, 100},
		{"empty", nil, -1},
		{"garbage", bytes.Repeat([]byte("not parquet "), 100), -1},
		{"magic only", []byte("PAR1PAR1"), -1},
		{"truncated", valid[:len(valid)/2], -1},
		{"bad magic", badMagic, -1},
		{"damaged metadata", metaFlipped, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
			src := &closeCounter{Reader: bytes.NewReader(tc.data)}
			f, err := Open(src, mem, 16)
			if tc.rows < 0 {
				if err == nil || f != nil {
					t.Fatalf("Open = %v, %v; want an error and no File", f, err)
				}
				t.Logf("%v", err)
			} else {
				if err != nil {
					t.Fatal(err)
				}
				if got := f.Parquet.NumRows(); got != tc.rows {
					t.Errorf("NumRows = %d, want %d", got, tc.rows)
				}
				tbl, err := f.Arrow.ReadTable(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				if tbl.NumRows() != tc.rows {
					t.Errorf("read %d rows, want %d", tbl.NumRows(), tc.rows)
				}
				tbl.Release()
			}
			for i := range 2 {
				if err := f.Close(); err != nil {
					t.Errorf("Close #%d = %v", i+1, err)
				}
			}
			if src.closed != 0 {
				t.Errorf("the source was closed %d times; it belongs to the caller", src.closed)
			}
			mem.AssertSize(t, 0)
		})
	}
}

func TestCloseNil(t *testing.T) {
	var f *File
	if err := f.Close(); err != nil {
		t.Errorf("Close of a nil File = %v", err)
	}
}
