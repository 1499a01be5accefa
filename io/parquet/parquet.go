package parquet

import (
	"errors"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/compress"
)

const (
	// BatchColumn is the utf8 column whose value on the first row of each batch is the
	// batch marker JSON {"rows": n, "schema": base64 of batch.EncodeSchema}. Frozen.
	BatchColumn = "__batch__"
	// MetaEmptyBatches is the file key-value metadata key listing the batches without rows
	// as JSON [{"at": rows before the batch, "schema": base64 of batch.EncodeSchema}, ...]. Frozen.
	MetaEmptyBatches = "monolith.empty_batches"
)

// marker is the JSON of BatchColumn. Schema is base64 in JSON (encoding/json []byte).
type marker struct {
	Rows   int64  `json:"rows"`
	Schema []byte `json:"schema"`
}

// emptyBatch is one entry of MetaEmptyBatches.
type emptyBatch struct {
	At     int64  `json:"at"`
	Schema []byte `json:"schema"`
}

// ErrFormat means the file is not a Parquet file of batches, or breaks the layout.
var ErrFormat = errors.New("io/parquet: malformed file")

const errPrefix = "io/parquet: "

// Option configures a Writer.
type Option func(*config)

type config struct {
	compression compress.Compression
	mem         memory.Allocator
	maxRowGroup int64
}

// WithCompression sets the page compression (default compress.Codecs.Zstd, which DuckDB,
// Spark 3 and pyarrow read; compress.Codecs.Snappy is the most widely supported).
func WithCompression(c compress.Compression) Option { return func(cf *config) { cf.compression = c } }

// WithAllocator sets the allocator for the Writer's temporary arrays (default
// memory.DefaultAllocator).
func WithAllocator(mem memory.Allocator) Option { return func(cf *config) { cf.mem = mem } }

// WithMaxRowGroupRows caps the rows of a row group (default: Parquet's 64Mi); a larger
// batch is split over several row groups.
func WithMaxRowGroupRows(n int64) Option { return func(cf *config) { cf.maxRowGroup = n } }
