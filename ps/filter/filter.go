package filter

import (
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/monolith-go/monolith/io/tfrecord"
	"github.com/monolith-go/monolith/schemas/fid"
	"github.com/monolith-go/monolith/schemas/hashtablepb"
	"github.com/monolith-go/monolith/schemas/pspb"
)

// Filter decides whether a write may create a fid that is not yet in its table. Tables
// consult it only for absent fids; lookups never do. Implementations are safe for
// concurrent use.
type Filter interface {
	// Admit records count occurrences of fid and reports whether the write may create it.
	Admit(fid int64, count uint32) bool
	// Kind names the filter ("sliding_hash", "probabilistic", "none").
	Kind() string
	// Save writes the filter's state as TFRecord records (a HashFilterSplitMetaDump, then
	// HashFilterSplitDataDumps); stateless filters write nothing.
	Save(w *tfrecord.Writer) error
	// Restore replaces the state with what Save wrote, validating every record.
	Restore(r *tfrecord.Reader) error
	// MemoryBytes is the memory the filter holds.
	MemoryBytes() int64
}

// Kinds returned by Filter.Kind.
const (
	KindSlidingHash   = "sliding_hash"
	KindProbabilistic = "probabilistic"
	KindNone          = "none"
)

// Limits and defaults of the configuration.
const (
	// MaxThreshold is the largest occurrence threshold a filter supports (P4): counters are
	// 16 bits wide and saturate at this value.
	MaxThreshold = math.MaxUint16
	// NumSlots is the number of v2 slots; thresholds form a dense table of this size.
	NumSlots = fid.MaxSlotV2 + 1
	// DefaultCapacity is the sliding filter's capacity when FilterConfig.capacity is 0.
	DefaultCapacity = 1 << 20
	// MinCapacity is the smallest capacity; smaller ones are raised to it (as Monolith).
	MinCapacity = 300
	// MaxCapacity is the largest capacity (every sub-filter's cell offsets must fit the
	// dump's uint32 offset field).
	MaxCapacity = 1 << 33
	// DefaultSplitNum is the number of sub-filters when FilterConfig.split_num is 0.
	DefaultSplitNum = 7
	// MinSplitNum is the smallest number of sub-filters; smaller split_num values are
	// raised to it (as Monolith).
	MinSplitNum = 5
)

var (
	// ErrInvalidConfig means a FilterConfig or SlotOccurrenceThresholdConfig is unusable.
	ErrInvalidConfig = errors.New("ps/filter: invalid configuration")
	// ErrCorruptDump means a dump record is unreadable or inconsistent.
	ErrCorruptDump = errors.New("ps/filter: corrupt dump")
	// ErrIncompatibleDump means a well-formed dump was written by a filter of another
	// geometry (capacity or split_num) than the one restoring it.
	ErrIncompatibleDump = errors.New("ps/filter: dump of another filter geometry")
)

// DumpError describes a dump record Restore rejected. errors.Is reports ErrCorruptDump or
// ErrIncompatibleDump (Kind) and, for unreadable records, the io/tfrecord cause.
type DumpError struct {
	Record int64  // 0-based index of the record in the stream
	Field  string // offending field, e.g. "sliding_hash_filter_meta.split_num"; may be empty
	Kind   error  // ErrCorruptDump or ErrIncompatibleDump
	Err    error  // the detail
}

// Error names the record, the field and the problem.
func (e *DumpError) Error() string {
	msg := fmt.Sprintf("%v: record %d", e.Kind, e.Record)
	if e.Field != "" {
		msg += ": " + e.Field
	}
	return msg + ": " + e.Err.Error()
}

// Unwrap returns the kind and the detail.
func (e *DumpError) Unwrap() []error { return []error{e.Kind, e.Err} }

// New builds the filter cfg describes, with the per-slot thresholds of thresholds. A nil cfg
// is the zero FilterConfig (a sliding filter with default geometry). When no threshold is
// greater than 0 (including a nil thresholds) every write is admitted, so New returns the
// none filter whatever cfg.type is; cfg is validated all the same.
func New(cfg *pspb.FilterConfig, thresholds *hashtablepb.SlotOccurrenceThresholdConfig) (Filter, error) {
	var build func(*slotThresholds) Filter
	switch cfg.GetType() {
	case pspb.FilterConfig_SLIDING_HASH:
		g, err := newGeometry(cfg.GetCapacity(), cfg.GetSplitNum())
		if err != nil {
			return nil, err
		}
		build = func(th *slotThresholds) Filter { return newSliding(g, th) }
	case pspb.FilterConfig_PROBABILISTIC:
		build = func(th *slotThresholds) Filter { return newProbabilistic(th, cfg.GetEqualProbability(), cfg.GetSeed()) }
	case pspb.FilterConfig_NONE:
		build = func(*slotThresholds) Filter { return None() }
	default:
		return nil, fmt.Errorf("%w: unknown filter type %d", ErrInvalidConfig, cfg.GetType())
	}
	th, active, err := newThresholds(thresholds)
	if err != nil {
		return nil, err
	}
	if !active {
		return None(), nil
	}
	return build(th), nil
}

// slotThresholds is the dense per-slot threshold table (§1, §5.1).
type slotThresholds [NumSlots]uint16

// of returns the threshold of f's v2 slot.
func (t *slotThresholds) of(f int64) uint32 { return uint32(t[fid.SlotV2(uint64(f))]) }

// memoryBytes is the size of the table.
func (t *slotThresholds) memoryBytes() int64 { return int64(len(t)) * 2 }

// newThresholds fills the dense table: default everywhere, then each configured slot in
// order (a repeated slot keeps its last value). any reports a threshold > 0.
func newThresholds(cfg *hashtablepb.SlotOccurrenceThresholdConfig) (*slotThresholds, bool, error) {
	th := new(slotThresholds)
	def := cfg.GetDefaultOccurrenceThreshold()
	if def > MaxThreshold {
		return nil, false, fmt.Errorf("%w: default_occurrence_threshold %d exceeds the maximum %d", ErrInvalidConfig, def, MaxThreshold)
	}
	for i := range th {
		th[i] = uint16(def)
	}
	for i, s := range cfg.GetSlotOccurrenceThresholds() {
		slot, v := s.GetSlot(), s.GetOccurrenceThreshold()
		if slot >= NumSlots {
			return nil, false, fmt.Errorf("%w: slot_occurrence_thresholds[%d]: slot %d out of range [0, %d)", ErrInvalidConfig, i, slot, NumSlots)
		}
		if v > MaxThreshold {
			return nil, false, fmt.Errorf("%w: slot %d: occurrence_threshold %d exceeds the maximum %d", ErrInvalidConfig, slot, v, MaxThreshold)
		}
		th[slot] = uint16(v)
	}
	for _, v := range th {
		if v > 0 {
			return th, true, nil
		}
	}
	return th, false, nil
}

// admits is the admission rule shared by counting filters: a request carrying count
// occurrences whose fid had been seen before times is admitted iff its last occurrence
// would be, i.e. iff before+count > threshold (see "Batched counts" in the package doc).
func admits(before, count, threshold uint32) bool {
	return uint64(before)+uint64(count) > uint64(threshold)
}

// none admits everything.
type none struct{}

// None returns the filter that admits every write. It is stateless.
func None() Filter { return none{} }

func (none) Admit(int64, uint32) bool         { return true }
func (none) Kind() string                     { return KindNone }
func (none) Save(*tfrecord.Writer) error      { return nil }
func (none) Restore(r *tfrecord.Reader) error { return drain(r) }
func (none) MemoryBytes() int64               { return 0 }

// drain is the Restore of stateless filters: records are read (so framing errors are
// reported) and ignored.
func drain(r *tfrecord.Reader) error {
	for {
		_, err := r.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return &DumpError{Record: r.Index(), Kind: ErrCorruptDump, Err: err}
		}
	}
}
