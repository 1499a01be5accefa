package filter

import (
	"errors"
	"fmt"
	"io"
	"math"

	"google.golang.org/protobuf/proto"

	"github.com/monolith-go/monolith/io/tfrecord"
	"github.com/monolith-go/monolith/schemas/hashtablepb"
)

// dumpChunk is the largest number of cells in one HashFilterSplitDataDump (Monolith's
// kMaxNumPerTfRecord).
const dumpChunk = 10000

// splitState is one sub-filter's state outside the filter (a snapshot or a parsed dump).
type splitState struct {
	cells       []uint32
	numElements uint64
	failures    uint64
}

// ringState is a sliding filter's state outside the filter.
type ringState struct {
	head          int
	headIncrement uint32
	failures      uint64
	splits        []splitState
}

// snapshot copies the state under the write lock, so that no Admit is half done.
func (s *sliding) snapshot() ringState {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := ringState{head: s.head, headIncrement: s.headIncrement, failures: s.failures.Load(), splits: make([]splitState, len(s.filters))}
	for i := range s.filters {
		f := &s.filters[i]
		cells := make([]uint32, len(f.cells))
		for j := range f.cells {
			cells[j] = f.cells[j].Load()
		}
		st.splits[i] = splitState{cells: cells, numElements: f.numElements.Load(), failures: f.failures.Load()}
	}
	return st
}

// Save implements Filter. It copies the cells under the filter's write lock (Admit waits
// for the copy only), then writes, for each sub-filter in ring order, one
// HashFilterSplitMetaDump and the HashFilterSplitDataDumps of all its cells in offset
// order, at most 10000 cells each. It flushes w.
func (s *sliding) Save(w *tfrecord.Writer) error {
	st := s.snapshot()
	ring := &hashtablepb.SlidingHashFilterMetaDump{
		SplitNum:        proto.Uint32(uint32(s.g.splitNum)),
		MaxForwardStep:  proto.Uint32(maxForwardStep),
		MaxBackwardStep: proto.Uint32(uint32(s.g.splitNum - maxForwardStep)),
		MaxStep:         proto.Uint32(maxStep),
		Head:            proto.Uint32(uint32(st.head)),
		HeadIncrement:   proto.Uint32(st.headIncrement),
		FailureCount:    proto.Uint64(st.failures),
	}
	var buf []byte
	write := func(m proto.Message) error {
		var err error
		if buf, err = (proto.MarshalOptions{}).MarshalAppend(buf[:0], m); err != nil {
			return fmt.Errorf("ps/filter: save: %w", err)
		}
		return w.Write(buf)
	}
	for _, sp := range st.splits {
		meta := &hashtablepb.HashFilterSplitMetaDump{
			FailureCount:          proto.Uint64(sp.failures),
			TotalSize:             proto.Uint64(s.g.totalSize),
			NumElements:           proto.Uint64(sp.numElements),
			FillRate:              proto.Float64(fillRate),
			SlidingHashFilterMeta: ring,
		}
		if err := write(meta); err != nil {
			return err
		}
		for off := 0; off < len(sp.cells); off += dumpChunk {
			end := min(off+dumpChunk, len(sp.cells))
			if err := write(&hashtablepb.HashFilterSplitDataDump{Offset: proto.Uint32(uint32(off)), Data: sp.cells[off:end]}); err != nil {
				return err
			}
		}
	}
	return w.Flush()
}

// dumpReader reads the records of a dump, numbering them for errors.
type dumpReader struct {
	r   *tfrecord.Reader
	idx int64 // index of the record last read
}

// next parses the next record into m; io.ErrUnexpectedEOF when the stream has ended.
func (d *dumpReader) next(m proto.Message, what string) error {
	b, err := d.r.Next()
	d.idx = d.r.Index()
	if errors.Is(err, io.EOF) {
		return &DumpError{Record: d.idx, Kind: ErrCorruptDump, Err: fmt.Errorf("stream ends where a %s was expected: %w", what, io.ErrUnexpectedEOF)}
	}
	if err != nil {
		return &DumpError{Record: d.idx, Kind: ErrCorruptDump, Err: err}
	}
	if err := proto.Unmarshal(b, m); err != nil {
		return &DumpError{Record: d.idx, Kind: ErrCorruptDump, Err: fmt.Errorf("parse %s: %w", what, err)}
	}
	return nil
}

func (d *dumpReader) fail(kind error, field string, format string, args ...any) error {
	return &DumpError{Record: d.idx, Field: field, Kind: kind, Err: fmt.Errorf(format, args...)}
}

// Restore implements Filter. It reads the whole stream Save wrote and validates every record
// before it replaces the state, so a rejected dump leaves the filter unchanged. A dump of
// another geometry (capacity or split_num) is an ErrIncompatibleDump.
func (s *sliding) Restore(r *tfrecord.Reader) error {
	d := &dumpReader{r: r, idx: -1}
	var st ringState
	var ring *hashtablepb.SlidingHashFilterMetaDump
	for i := range s.g.splitNum {
		sp, rm, err := s.readSplit(d, i, ring)
		if err != nil {
			return err
		}
		if ring == nil {
			ring = rm
			st.head, st.headIncrement, st.failures = int(rm.GetHead()), rm.GetHeadIncrement(), rm.GetFailureCount()
		}
		st.splits = append(st.splits, sp)
	}
	if _, err := r.Next(); !errors.Is(err, io.EOF) {
		d.idx = r.Index()
		if err != nil {
			return &DumpError{Record: d.idx, Kind: ErrCorruptDump, Err: err}
		}
		return d.fail(ErrCorruptDump, "", "unexpected record after the last of %d sub-filters", s.g.splitNum)
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	s.head, s.headIncrement = st.head, st.headIncrement
	s.failures.Store(st.failures)
	for i, sp := range st.splits {
		f := &s.filters[i]
		for j, c := range sp.cells {
			f.cells[j].Store(c)
		}
		f.numElements.Store(sp.numElements)
		f.failures.Store(sp.failures)
	}
	return nil
}

// readSplit reads and validates sub-filter i: its meta record, then its data records.
// first is the ring meta of sub-filter 0 (nil for i == 0), which every later one must repeat.
func (s *sliding) readSplit(d *dumpReader, i int, first *hashtablepb.SlidingHashFilterMetaDump) (splitState, *hashtablepb.SlidingHashFilterMetaDump, error) {
	meta := &hashtablepb.HashFilterSplitMetaDump{}
	if err := d.next(meta, fmt.Sprintf("HashFilterSplitMetaDump of sub-filter %d", i)); err != nil {
		return splitState{}, nil, err
	}
	metaIdx := d.idx
	rm := meta.GetSlidingHashFilterMeta()
	if rm == nil {
		return splitState{}, nil, d.fail(ErrCorruptDump, "sliding_hash_filter_meta", "missing")
	}
	n := uint64(s.g.splitNum)
	for _, c := range []struct {
		field     string
		got, want uint64
	}{
		{"sliding_hash_filter_meta.max_forward_step", uint64(rm.GetMaxForwardStep()), maxForwardStep},
		{"sliding_hash_filter_meta.max_step", uint64(rm.GetMaxStep()), maxStep},
		{"sliding_hash_filter_meta.max_backward_step", uint64(rm.GetMaxBackwardStep()), uint64(rm.GetSplitNum()) - maxForwardStep},
	} {
		if c.got != c.want {
			return splitState{}, nil, d.fail(ErrCorruptDump, c.field, "got %d, want %d", c.got, c.want)
		}
	}
	if rm.GetSplitNum() < MinSplitNum {
		return splitState{}, nil, d.fail(ErrCorruptDump, "sliding_hash_filter_meta.split_num", "got %d, want at least %d", rm.GetSplitNum(), MinSplitNum)
	}
	if uint64(rm.GetSplitNum()) != n {
		return splitState{}, nil, d.fail(ErrIncompatibleDump, "sliding_hash_filter_meta.split_num", "got %d, this filter has %d sub-filters", rm.GetSplitNum(), n)
	}
	if uint64(rm.GetHead()) >= n {
		return splitState{}, nil, d.fail(ErrCorruptDump, "sliding_hash_filter_meta.head", "got %d, want < %d", rm.GetHead(), n)
	}
	if hi := uint64(rm.GetHeadIncrement()); hi < n && uint64(rm.GetHead()) != hi {
		return splitState{}, nil, d.fail(ErrCorruptDump, "sliding_hash_filter_meta.head", "got %d, but head_increment %d means head %d", rm.GetHead(), hi, hi)
	}
	if first != nil && !proto.Equal(rm, first) {
		return splitState{}, nil, d.fail(ErrCorruptDump, "sliding_hash_filter_meta", "differs from sub-filter 0's: %v vs %v", rm, first)
	}
	if fr := meta.GetFillRate(); fr != fillRate {
		return splitState{}, nil, d.fail(ErrCorruptDump, "fill_rate", "got %v, want %v", fr, fillRate)
	}
	if ts := meta.GetTotalSize(); ts != s.g.totalSize {
		kind := ErrIncompatibleDump
		if ts == 0 || ts > math.MaxUint32 {
			kind = ErrCorruptDump
		}
		return splitState{}, nil, d.fail(kind, "total_size", "got %d, this filter has %d", ts, s.g.totalSize)
	}
	if ne := meta.GetNumElements(); ne > s.g.splitCapacity {
		return splitState{}, nil, d.fail(ErrCorruptDump, "num_elements", "got %d, above the sub-filter capacity %d", ne, s.g.splitCapacity)
	}

	sp := splitState{cells: make([]uint32, s.g.cells), numElements: meta.GetNumElements(), failures: meta.GetFailureCount()}
	var nonEmpty uint64
	data := &hashtablepb.HashFilterSplitDataDump{}
	for off := 0; off < len(sp.cells); off += dumpChunk {
		end := min(off+dumpChunk, len(sp.cells))
		if err := d.next(data, fmt.Sprintf("HashFilterSplitDataDump of sub-filter %d at offset %d", i, off)); err != nil {
			return splitState{}, nil, err
		}
		if data.Offset == nil || data.GetOffset() != uint32(off) {
			return splitState{}, nil, d.fail(ErrCorruptDump, "offset", "got %d (set: %t), want %d", data.GetOffset(), data.Offset != nil, off)
		}
		if len(data.GetData()) != end-off {
			return splitState{}, nil, d.fail(ErrCorruptDump, "data", "%d cells at offset %d, want %d", len(data.GetData()), off, end-off)
		}
		for j, c := range data.GetData() {
			if c != 0 && c&countMask == 0 {
				return splitState{}, nil, d.fail(ErrCorruptDump, "data", "cell %d holds signature %#x with count 0", off+j, c>>countBits)
			}
			if c != 0 {
				nonEmpty++
			}
		}
		copy(sp.cells[off:], data.GetData())
	}
	if want := min(nonEmpty, s.g.splitCapacity); sp.numElements != want {
		d.idx = metaIdx
		return splitState{}, nil, d.fail(ErrCorruptDump, "num_elements", "got %d, but sub-filter %d has %d non-empty cells, which means %d", sp.numElements, i, nonEmpty, want)
	}
	return sp, rm, nil
}
