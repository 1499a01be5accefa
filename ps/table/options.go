package table

import (
	"errors"

	"github.com/monolith-go/monolith/ps/filter"
	"github.com/monolith-go/monolith/schemas/hashtablepb"
)

// ErrDimensionMismatch reports a request whose dim_size or value count disagrees with the
// table.
var ErrDimensionMismatch = errors.New("ps/table: dimension mismatch")

// ErrInvalidConfig reports a table configuration the table cannot serve.
var ErrInvalidConfig = errors.New("ps/table: invalid config")

// Options configure a Table.
type Options struct {
	// Name is the table name requests address.
	Name string
	// Config is the Monolith table config: segments, expiry, eviction.
	Config *hashtablepb.EmbeddingHashTableConfig
	// Filter gates the creation of absent fids; nil admits every fid.
	Filter filter.Filter
	// ReadOnlyApply makes ApplyGradients skip absent fids (counted not found) instead of
	// creating them. The zero value is Monolith mode (P1): an admitted apply creates.
	ReadOnlyApply bool
	// Seed seeds the random initializers (each internal shard derives its own stream).
	Seed uint64
	// Now returns wall-clock seconds (default time.Now); tests pin it.
	Now func() int64
}

// ApplyResult counts what an Apply did, per unique fid.
type ApplyResult struct {
	Updated  int // stepped, created ones included
	Created  int // created by this call
	NotFound int // absent and not created (filtered or ReadOnlyApply)
}

// Stats are a table's size and memory.
type Stats struct {
	Name          string
	Size          int64
	Dim           int
	MemoryBytes   int64 // bytes held: entries, index and filter
	RawBytes      int64 // embedding + optimizer state bytes of the live entries
	MaxUpdateTime int64
}
