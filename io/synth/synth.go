package synth

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"strings"

	"github.com/monolith-go/monolith/io/compress"
	"github.com/monolith-go/monolith/io/pbstream"
	"github.com/monolith-go/monolith/io/recordio"
	"github.com/monolith-go/monolith/schemas/batch"
	"github.com/monolith-go/monolith/schemas/fid"
)

// ErrConfig is wrapped by every error of Config.Validate.
var ErrConfig = errors.New("io/synth: invalid config")

// Naming says how sparse features are named. Every feature has its own slot.
type Naming int

// Namings.
const (
	// NamingAuto is NamingFcSlot for Instances and NamingF otherwise.
	NamingAuto Naming = iota
	// NamingF names a feature "f_<slot>" and the dense feature "f_dense".
	NamingF
	// NamingFcSlot names a feature "fc_slot_<slot>" and the dense feature "fc_dense", the
	// names Monolith gives Instance top-level fids.
	NamingFcSlot
)

// ParseNaming parses "auto", "f" (or "f_slot") and "fc_slot".
func ParseNaming(s string) (Naming, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "auto", "":
		return NamingAuto, nil
	case "f", "f_slot":
		return NamingF, nil
	case "fc_slot", "fc":
		return NamingFcSlot, nil
	}
	return 0, fmt.Errorf("io/synth: unknown naming %q (want auto, f or fc_slot)", s)
}

// String returns the name of n, as ParseNaming accepts it.
func (n Naming) String() string {
	switch n {
	case NamingAuto:
		return "auto"
	case NamingF:
		return "f"
	case NamingFcSlot:
		return "fc_slot"
	}
	return "Naming(" + strconv.Itoa(int(n)) + ")"
}

// Config describes a synthetic data set. Start from DefaultConfig; the zero value is not
// valid. Generate and FeatureConfigs call Validate.
type Config struct {
	// Type is the message type of every record: batch.SourceExampleBatch,
	// batch.SourceExample or batch.SourceInstance.
	Type batch.Source
	// Rows is the total number of rows (samples).
	Rows int64
	// Files is the number of files, at most 2^20 and at most Rows; file i holds rows
	// [i·Rows/Files, (i+1)·Rows/Files).
	Files int
	// BatchRows is the number of rows of one ExampleBatch record (the last record of a file
	// may be shorter). For every type it is also the size of the groups of consecutive rows
	// (a "request") that share the SHARED features, the uid and the chnid; groups never span
	// files.
	BatchRows int
	// Record is the framing, codec and PB-stream header set of the files. Codec Auto means
	// None. With PB.HasSortID the sort id is the LineId user_id of the record's rows (the
	// shape of Monolith's reference files); with PB.LagrangeX the header carries pb_type 1
	// (0 for Instances) and data_source_key 0.
	Record recordio.Options
	// Prefix starts every file name: "<Prefix>-<index>.<pb|tfrecord>[.gz|.zlib|.snappy|.zst]",
	// the index zero-padded to 5 digits. It must not contain a path separator.
	Prefix string
	// Seed makes the data set: the same Config gives byte-identical files. Each file has
	// its own random streams, so the rows also depend on Files (and BatchRows), but not on
	// Type, Record or Parallel.
	Seed uint64

	// Features is the number of individual sparse features (one cell per row).
	Features int
	// Shared is the number of shared sparse features: SHARED lists in an ExampleBatch, the
	// same cell repeated in every row of the group otherwise.
	Shared int
	// FidsMin and FidsMax bound the number of fids in a cell, drawn uniformly in
	// [FidsMin, FidsMax]. FidsMin may be 0 (an explicitly empty cell).
	FidsMin, FidsMax int
	// Vocab is the number of distinct fids of each feature, at most 2^48.
	Vocab uint64
	// Zipf is the exponent s >= 0 of the fid frequencies: the rank-k fid of a feature is
	// drawn with probability proportional to k^-s (0 is uniform).
	Zipf float64
	// FidVersion is 1 (fid_v1_list, 10-bit slots; Instance top-level fids) or 2
	// (fid_v2_list, 15-bit slots; Instance named features).
	FidVersion int
	// FirstSlot is the slot of the first individual feature; the others follow, then the
	// shared features.
	FirstSlot int
	// Naming names the features. Instances with v1 fids need fc_slot names (NamingAuto),
	// since their fids are unnamed and read back as "fc_slot_<slot>".
	Naming Naming
	// Dense is the width of one float_list feature of uniform [0, 1) values; 0 means none.
	Dense int

	// Tasks is the number of labels per row (0: no labels).
	Tasks int
	// PositiveRate is the probability of a positive label for the default RandomLabeler.
	PositiveRate float64
	// Labeler draws the labels; nil means RandomLabeler{PositiveRate}. With Parallel > 1
	// it is called from several goroutines and must be safe for concurrent use.
	Labeler Labeler

	// ReqTimeBase is the LineId req_time of row 0; row i has ReqTimeBase + i (seconds).
	ReqTimeBase int64
	// Users is the number of distinct users (uid and user_id); one user per group.
	Users int
	// Channels is the number of distinct chnid values (0 .. Channels-1); one per group.
	Channels int
	// SampleRate is the LineId sample_rate of every row, in (0, 1].
	SampleRate float32

	// Parallel is the number of files generated at once; 0 means GOMAXPROCS. It does not
	// change the output.
	Parallel int
}

// DefaultConfig returns a small valid data set: 10000 ExampleBatch rows of 256-row batches
// in one uncompressed PB-stream file with sort ids, 16 individual and 4 shared v1 features
// with 1 to 3 fids drawn from 100000 per feature with Zipf exponent 1.1, one task with a
// 10% positive rate.
func DefaultConfig() Config {
	return Config{
		Type:         batch.SourceExampleBatch,
		Rows:         10000,
		Files:        1,
		BatchRows:    256,
		Record:       recordio.Options{Framing: recordio.PBStream, Codec: compress.None, PB: pbstream.Options{HasSortID: true}},
		Prefix:       "part",
		Seed:         1,
		Features:     16,
		Shared:       4,
		FidsMin:      1,
		FidsMax:      3,
		Vocab:        100000,
		Zipf:         1.1,
		FidVersion:   1,
		FirstSlot:    1,
		Tasks:        1,
		PositiveRate: 0.1,
		ReqTimeBase:  1617120000,
		Users:        100000,
		Channels:     4,
		SampleRate:   1,
	}
}

// maxRecordSize is the largest record Validate accepts (protobuf's 2 GiB limit).
const maxRecordSize = 1<<31 - 1

// maxFiles bounds Files (Generate keeps a small record per file).
const maxFiles = 1 << 20

// maxRows bounds Rows so that row indexes and req_time stay far from overflow.
const maxRows = 1 << 48

// Validate reports the first problem of c, wrapping ErrConfig.
func (c Config) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrConfig, fmt.Sprintf(format, args...))
	}
	switch c.Type {
	case batch.SourceExampleBatch, batch.SourceExample, batch.SourceInstance:
	default:
		return bad("message type %v (want examplebatch, example or instance)", c.Type)
	}
	switch {
	case c.Rows <= 0 || c.Rows > maxRows:
		return bad("rows %d must be in [1, 2^48]", c.Rows)
	case c.Files <= 0 || c.Files > maxFiles:
		return bad("files %d must be in [1, %d]", c.Files, maxFiles)
	case int64(c.Files) > c.Rows:
		return bad("%d files for %d rows: every file needs a row", c.Files, c.Rows)
	case c.BatchRows <= 0 || c.BatchRows > math.MaxInt32:
		return bad("batch rows %d must be in [1, 2^31)", c.BatchRows)
	case c.Prefix == "" || strings.ContainsAny(c.Prefix, `/\`):
		return bad("file prefix %q must be a non-empty name without a path separator", c.Prefix)
	case c.Features < 0 || c.Shared < 0:
		return bad("feature counts %d and %d must not be negative", c.Features, c.Shared)
	case c.Features+c.Shared == 0:
		return bad("no sparse features (set features or shared)")
	case c.FidsMin < 0 || c.FidsMax < c.FidsMin || c.FidsMax == 0:
		return bad("fids per cell [%d, %d] must satisfy 0 <= min <= max, max >= 1", c.FidsMin, c.FidsMax)
	case c.Vocab == 0 || c.Vocab > maxVocab:
		return bad("vocabulary %d must be in [1, 2^48]", c.Vocab)
	case !(c.Zipf >= 0) || math.IsInf(c.Zipf, 0):
		return bad("zipf exponent %v must be finite and >= 0", c.Zipf)
	case c.FidVersion != 1 && c.FidVersion != 2:
		return bad("fid version %d (want 1 or 2)", c.FidVersion)
	case c.Naming < NamingAuto || c.Naming > NamingFcSlot:
		return bad("naming %v", c.Naming)
	case c.Dense < 0:
		return bad("dense width %d must not be negative", c.Dense)
	case c.Tasks < 0:
		return bad("tasks %d must not be negative", c.Tasks)
	case !(c.PositiveRate >= 0 && c.PositiveRate <= 1):
		return bad("positive rate %v must be in [0, 1]", c.PositiveRate)
	case c.Users <= 0:
		return bad("users %d must be positive", c.Users)
	case c.Channels <= 0:
		return bad("channels %d must be positive", c.Channels)
	case !(c.SampleRate > 0 && c.SampleRate <= 1):
		return bad("sample rate %v must be in (0, 1]", c.SampleRate)
	case c.Parallel < 0:
		return bad("parallel %d must not be negative", c.Parallel)
	case c.ReqTimeBase < 0 || c.ReqTimeBase > math.MaxInt64-maxRows:
		return bad("req_time base %d out of range", c.ReqTimeBase)
	}
	maxSlot := fid.MaxSlotV1
	if c.FidVersion == 2 {
		maxSlot = fid.MaxSlotV2
	}
	if last := c.FirstSlot + c.Features + c.Shared - 1; c.FirstSlot < 0 || last > maxSlot {
		return bad("slots %d..%d do not fit v%d fids (0..%d)", c.FirstSlot, last, c.FidVersion, maxSlot)
	}
	if c.Type == batch.SourceInstance && c.FidVersion == 1 && c.Naming == NamingF {
		return bad("Instance v1 fids are unnamed top-level fids read back as fc_slot_<slot>; use naming fc_slot (or auto)")
	}
	if err := c.Record.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if n := c.maxRecordSize(); n > maxRecordSize {
		return bad("a record could reach %.0f bytes, above protobuf's 2 GiB limit; lower batch rows, features or fids", n)
	}
	return nil
}

// naming resolves NamingAuto.
func (c Config) naming() Naming {
	if c.Naming != NamingAuto {
		return c.Naming
	}
	if c.Type == batch.SourceInstance {
		return NamingFcSlot
	}
	return NamingF
}

// SparseFeature describes one generated sparse feature.
type SparseFeature struct {
	// Name is the feature's name, which is also its column name when read back with
	// io/dataset (for Instance v1 fids too).
	Name string
	// Slot is the slot of its fids (and the list or named-feature id).
	Slot int
	// Shared is set for a shared feature.
	Shared bool
}

// SparseFeatures returns the sparse features of c: the individual ones, then the shared
// ones, in slot order. It assumes c is valid.
func (c Config) SparseFeatures() []SparseFeature {
	prefix := "f_"
	if c.naming() == NamingFcSlot {
		prefix = "fc_slot_"
	}
	out := make([]SparseFeature, c.Features+c.Shared)
	for i := range out {
		slot := c.FirstSlot + i
		out[i] = SparseFeature{Name: prefix + strconv.Itoa(slot), Slot: slot, Shared: i >= c.Features}
	}
	return out
}

// DenseName returns the name of the dense feature, or "" when c has none.
func (c Config) DenseName() string {
	switch {
	case c.Dense == 0:
		return ""
	case c.naming() == NamingFcSlot:
		return "fc_dense"
	}
	return "f_dense"
}

// codec resolves Auto to None.
func (c Config) codec() compress.Codec {
	if c.Record.Codec == compress.Auto {
		return compress.None
	}
	return c.Record.Codec
}

// FileName returns the name (without directory) of file i.
func (c Config) FileName(i int) string {
	ext := ".pb"
	if c.Record.Framing == recordio.TFRecord {
		ext = ".tfrecord"
	}
	return fmt.Sprintf("%s-%05d%s%s", c.Prefix, i, ext, c.codec().Ext())
}

// fileRows returns the first row and the row count of file i.
func (c Config) fileRows(i int) (first, n int64) {
	at := func(i int) int64 { // floor(i·Rows/Files) without overflow
		hi, lo := bits.Mul64(uint64(i), uint64(c.Rows))
		q, _ := bits.Div64(hi, lo, uint64(c.Files))
		return int64(q)
	}
	return at(i), at(i+1) - at(i)
}
