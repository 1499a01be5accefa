package filter

import (
	"bytes"
	"errors"
	"io"
	"math/bits"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/monolith-go/monolith/io/tfrecord"
	"github.com/monolith-go/monolith/schemas/fid"
	"github.com/monolith-go/monolith/schemas/hashtablepb"
	"github.com/monolith-go/monolith/schemas/pspb"
)

func newSmall(t testing.TB, threshold uint32) *sliding {
	t.Helper()
	return mustNew(t, small(), occurrence(threshold)).(*sliding)
}

func (s *sliding) slides() uint32 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.headIncrement
}

// filler hands out fresh fids (slot 1) to fill sub-filters.
type filler struct{ next uint64 }

func (f *filler) fid() int64 { f.next++; return int64(fid.MakeV2(1, f.next)) }

// slideOnce admits new fids until the ring has slid once more.
func slideOnce(t *testing.T, s *sliding, fl *filler) {
	t.Helper()
	n := s.slides()
	for range 10 * s.g.splitCapacity {
		if s.slides() != n {
			return
		}
		s.Admit(fl.fid(), 1)
	}
	t.Fatalf("no slide after %d new fids", 10*s.g.splitCapacity)
}

// TestSlidingCarry checks the backward search: a count survives a slide, and an Admit
// after the slide continues from it (it is copied into the new head).
func TestSlidingCarry(t *testing.T) {
	s := newSmall(t, 3)
	fl := &filler{}
	a := int64(fid.MakeV2(2, 42))
	for i := range 2 {
		if s.Admit(a, 1) {
			t.Fatalf("occurrence %d admitted", i+1)
		}
	}
	slideOnce(t, s, fl)
	if s.head != 1 {
		t.Fatalf("head = %d after one slide", s.head)
	}
	if got := s.count(a); got != 2 {
		t.Fatalf("count after a slide = %d, want 2 (backward search)", got)
	}
	if s.Admit(a, 1) { // before 2
		t.Fatal("3rd occurrence admitted")
	}
	if !s.Admit(a, 1) { // before 3
		t.Fatal("4th occurrence rejected: the count was not carried across the slide")
	}
	// The carried count now lives in the head, so it survives as long as a is touched.
	for range 2 * s.g.splitNum {
		slideOnce(t, s, fl)
		if s.Admit(a, 1) != true {
			t.Fatal("a fid touched every slide was forgotten")
		}
	}
}

// TestSlidingForget checks that a fid not seen for S'−1 slides is forgotten: its
// sub-filter is cleared when it becomes the one after head.
func TestSlidingForget(t *testing.T) {
	s := newSmall(t, 3)
	fl := &filler{}
	a := int64(fid.MakeV2(2, 42))
	s.Admit(a, 2)
	for k := 1; k <= s.g.splitNum; k++ {
		slideOnce(t, s, fl)
		want := uint32(2)
		if k >= s.g.splitNum-1 {
			want = 0
		}
		if got := s.count(a); got != want {
			t.Fatalf("after %d slides: count = %d, want %d", k, got, want)
		}
	}
	if s.Admit(a, 1) {
		t.Fatal("a forgotten fid was admitted on its first new occurrence")
	}
	if got := s.slides(); got != uint32(s.g.splitNum) || s.head != 0 {
		t.Errorf("slides = %d head = %d", got, s.head)
	}
}

// TestSlidingAgainstMap compares counts with an exact map while the ring slides (a few
// collisions are expected; Monolith's test accepts ~1% at this load).
func TestSlidingAgainstMap(t *testing.T) {
	seed := uint64(20240601)
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	s := mustNew(t, &pspb.FilterConfig{Capacity: 100000, SplitNum: 10}, occurrence(1)).(*sliding)
	exact := map[int64]uint32{}
	for range 50000 { // half the capacity: no fid is forgotten
		f := int64(rng.Uint64N(20000))
		s.Admit(f, 2)
		exact[f] = min(exact[f]+2, countMask)
	}
	var wrong int
	for f, c := range exact {
		if s.count(f) != c {
			wrong++
		}
	}
	if rate := float64(wrong) / float64(len(exact)); rate > 0.02 {
		t.Errorf("%d of %d counts wrong (%.3f)", wrong, len(exact), rate)
	}
	if s.failures.Load() > uint64(len(exact))/1000 {
		t.Errorf("%d probe failures", s.failures.Load())
	}
}

// TestProbeFailureAdmits pins the reference behaviour: when no forward cell is usable the
// count reads as saturated, which admits.
func TestProbeFailureAdmits(t *testing.T) {
	s := newSmall(t, 1000)
	a := int64(fid.MakeV2(2, 42))
	h := s.hash(a)
	for _, j := range []int{s.head, s.next(s.head)} {
		for i := range maxStep {
			s.filters[j].cells[h.pos+uint64(i)].Store((h.sig^1)<<countBits | 1)
		}
	}
	if !s.Admit(a, 1) {
		t.Error("probe failure rejected")
	}
	if s.failures.Load() != 1 || s.filters[s.head].failures.Load() != 1 {
		t.Errorf("failures = %d, head failures = %d", s.failures.Load(), s.filters[s.head].failures.Load())
	}
}

// workload drives a filter through a deterministic sequence and records its decisions.
func workload(f Filter, seed uint64, n int) []bool {
	rng := rand.New(rand.NewPCG(seed, 1))
	out := make([]bool, n)
	for i := range out {
		out[i] = f.Admit(int64(fid.MakeV2(rng.Uint64N(3), rng.Uint64N(400))), uint32(1+rng.IntN(3)))
	}
	return out
}

func save(t testing.TB, f Filter) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := f.Save(tfrecord.NewWriter(&buf)); err != nil {
		t.Fatalf("Save: %v", err)
	}
	return buf.Bytes()
}

func TestSaveRestoreRoundTrip(t *testing.T) {
	for _, cfg := range []*pspb.FilterConfig{small(), {Capacity: 50000, SplitNum: 3}} {
		a := mustNew(t, cfg, occurrence(4))
		workload(a, 1, 3000) // slides several times at the small geometry
		dump := save(t, a)

		b := mustNew(t, cfg, occurrence(4))
		workload(b, 99, 500) // state to be replaced
		if err := b.Restore(tfrecord.NewReader(bytes.NewReader(dump))); err != nil {
			t.Fatalf("Restore: %v", err)
		}
		if !bytes.Equal(save(t, b), dump) {
			t.Fatal("a restored filter saves a different dump")
		}
		if da, db := workload(a, 2, 3000), workload(b, 2, 3000); !slices.Equal(da, db) {
			t.Fatal("a restored filter decides differently")
		}
		// The record count: per sub-filter one meta and ceil(cells/10000) data records.
		s := a.(*sliding)
		recs := readRecords(t, dump)
		if want := s.g.splitNum * (1 + (s.g.cells+dumpChunk-1)/dumpChunk); len(recs) != want {
			t.Errorf("%d records, want %d", len(recs), want)
		}
	}
}

func TestRestoreGeometryMismatch(t *testing.T) {
	dump := save(t, newSmall(t, 2))
	for _, cfg := range []*pspb.FilterConfig{
		{Capacity: 600, SplitNum: 5},
		{Capacity: 300, SplitNum: 6},
	} {
		f := mustNew(t, cfg, occurrence(2))
		err := f.Restore(tfrecord.NewReader(bytes.NewReader(dump)))
		var de *DumpError
		if !errors.Is(err, ErrIncompatibleDump) || !errors.As(err, &de) || de.Record != 0 {
			t.Errorf("capacity %d split %d: Restore = %v, want ErrIncompatibleDump at record 0", cfg.Capacity, cfg.SplitNum, err)
		}
	}
}

func readRecords(t testing.TB, dump []byte) [][]byte {
	t.Helper()
	r := tfrecord.NewReader(bytes.NewReader(dump))
	var recs [][]byte
	for {
		b, err := r.Next()
		if errors.Is(err, io.EOF) {
			return recs
		}
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, bytes.Clone(b))
	}
}

func writeRecords(t testing.TB, recs [][]byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := tfrecord.NewWriter(&buf)
	for _, r := range recs {
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestRestoreRejectsCorruptDumps(t *testing.T) {
	src := newSmall(t, 3)
	workload(src, 5, 200)
	recs := readRecords(t, save(t, src))
	perSplit := 1 + (src.g.cells+dumpChunk-1)/dumpChunk // 2 at this geometry
	if perSplit != 2 {
		t.Fatalf("%d records per sub-filter", perSplit)
	}
	meta := func(i int, edit func(*hashtablepb.HashFilterSplitMetaDump)) func([][]byte) [][]byte {
		return func(rs [][]byte) [][]byte {
			m := &hashtablepb.HashFilterSplitMetaDump{}
			if err := proto.Unmarshal(rs[i], m); err != nil {
				t.Fatal(err)
			}
			edit(m)
			rs[i], _ = proto.Marshal(m)
			return rs
		}
	}
	data := func(i int, edit func(*hashtablepb.HashFilterSplitDataDump)) func([][]byte) [][]byte {
		return func(rs [][]byte) [][]byte {
			d := &hashtablepb.HashFilterSplitDataDump{}
			if err := proto.Unmarshal(rs[i], d); err != nil {
				t.Fatal(err)
			}
			edit(d)
			rs[i], _ = proto.Marshal(d)
			return rs
		}
	}
	// Record 3 is sub-filter 1's data; find a sub-filter with an occupied cell for the
	// count-0 case.
	occupied := -1
	for i := 1; i < len(recs); i += 2 {
		d := &hashtablepb.HashFilterSplitDataDump{}
		_ = proto.Unmarshal(recs[i], d)
		if slices.ContainsFunc(d.Data, func(c uint32) bool { return c != 0 }) {
			occupied = i
			break
		}
	}
	if occupied < 0 {
		t.Fatal("no occupied cell")
	}
	for _, tc := range []struct {
		name   string
		edit   func([][]byte) [][]byte
		record int64
		field  string
		kind   error
	}{
		{"empty stream", func([][]byte) [][]byte { return nil }, 0, "", ErrCorruptDump},
		{"garbage meta", func(rs [][]byte) [][]byte { rs[0] = []byte{0xff, 0xff, 0xff}; return rs }, 0, "", ErrCorruptDump},
		{"missing ring meta", meta(0, func(m *hashtablepb.HashFilterSplitMetaDump) { m.SlidingHashFilterMeta = nil }), 0, "sliding_hash_filter_meta", ErrCorruptDump},
		{"split_num", meta(2, func(m *hashtablepb.HashFilterSplitMetaDump) {
			m.SlidingHashFilterMeta.SplitNum = proto.Uint32(6)
			m.SlidingHashFilterMeta.MaxBackwardStep = proto.Uint32(4)
		}), 2, "sliding_hash_filter_meta.split_num", ErrIncompatibleDump},
		{"split_num below minimum", meta(0, func(m *hashtablepb.HashFilterSplitMetaDump) {
			m.SlidingHashFilterMeta.SplitNum = proto.Uint32(3)
			m.SlidingHashFilterMeta.MaxBackwardStep = proto.Uint32(1)
		}), 0, "sliding_hash_filter_meta.split_num", ErrCorruptDump},
		{"max_forward_step", meta(0, func(m *hashtablepb.HashFilterSplitMetaDump) { m.SlidingHashFilterMeta.MaxForwardStep = proto.Uint32(3) }), 0, "sliding_hash_filter_meta.max_forward_step", ErrCorruptDump},
		{"max_backward_step", meta(4, func(m *hashtablepb.HashFilterSplitMetaDump) {
			m.SlidingHashFilterMeta.MaxBackwardStep = proto.Uint32(5)
		}), 4, "sliding_hash_filter_meta.max_backward_step", ErrCorruptDump},
		{"max_step", meta(0, func(m *hashtablepb.HashFilterSplitMetaDump) { m.SlidingHashFilterMeta.MaxStep = proto.Uint32(64) }), 0, "sliding_hash_filter_meta.max_step", ErrCorruptDump},
		{"head out of range", meta(0, func(m *hashtablepb.HashFilterSplitMetaDump) {
			m.SlidingHashFilterMeta.Head = proto.Uint32(5)
			m.SlidingHashFilterMeta.HeadIncrement = proto.Uint32(100)
		}), 0, "sliding_hash_filter_meta.head", ErrCorruptDump},
		{"head against head_increment", meta(0, func(m *hashtablepb.HashFilterSplitMetaDump) {
			m.SlidingHashFilterMeta.Head = proto.Uint32(2)
			m.SlidingHashFilterMeta.HeadIncrement = proto.Uint32(1)
		}), 0, "sliding_hash_filter_meta.head", ErrCorruptDump},
		{"ring meta differs", meta(6, func(m *hashtablepb.HashFilterSplitMetaDump) { m.SlidingHashFilterMeta.FailureCount = proto.Uint64(7) }), 6, "sliding_hash_filter_meta", ErrCorruptDump},
		{"fill_rate", meta(0, func(m *hashtablepb.HashFilterSplitMetaDump) { m.FillRate = proto.Float64(1.5) }), 0, "fill_rate", ErrCorruptDump},
		{"total_size", meta(8, func(m *hashtablepb.HashFilterSplitMetaDump) { m.TotalSize = proto.Uint64(91) }), 8, "total_size", ErrIncompatibleDump},
		{"total_size zero", meta(0, func(m *hashtablepb.HashFilterSplitMetaDump) { m.TotalSize = nil }), 0, "total_size", ErrCorruptDump},
		{"num_elements above capacity", meta(0, func(m *hashtablepb.HashFilterSplitMetaDump) { m.NumElements = proto.Uint64(76) }), 0, "num_elements", ErrCorruptDump},
		{"num_elements against cells", meta(occupied-1, func(m *hashtablepb.HashFilterSplitMetaDump) { m.NumElements = proto.Uint64(m.GetNumElements() + 1) }), int64(occupied - 1), "num_elements", ErrCorruptDump},
		{"missing offset", data(1, func(d *hashtablepb.HashFilterSplitDataDump) { d.Offset = nil }), 1, "offset", ErrCorruptDump},
		{"wrong offset", data(3, func(d *hashtablepb.HashFilterSplitDataDump) { d.Offset = proto.Uint32(1) }), 3, "offset", ErrCorruptDump},
		{"short data", data(5, func(d *hashtablepb.HashFilterSplitDataDump) { d.Data = d.Data[1:] }), 5, "data", ErrCorruptDump},
		{"long data", data(5, func(d *hashtablepb.HashFilterSplitDataDump) { d.Data = append(d.Data, 0) }), 5, "data", ErrCorruptDump},
		{"count 0 cell", data(occupied, func(d *hashtablepb.HashFilterSplitDataDump) {
			i := slices.IndexFunc(d.Data, func(c uint32) bool { return c != 0 })
			d.Data[i] &^= countMask
		}), int64(occupied), "data", ErrCorruptDump},
		{"meta where data is due", func(rs [][]byte) [][]byte { rs[1] = rs[0]; return rs }, 1, "*", ErrCorruptDump},
		{"truncated stream", func(rs [][]byte) [][]byte { return rs[:len(rs)-1] }, int64(len(recs) - 1), "", ErrCorruptDump},
		{"trailing record", func(rs [][]byte) [][]byte { return append(rs, rs[0]) }, int64(len(recs)), "", ErrCorruptDump},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dst := newSmall(t, 3)
			workload(dst, 8, 100)
			before := save(t, dst)
			rs := tc.edit(slices.Clone(recs))
			err := dst.Restore(tfrecord.NewReader(bytes.NewReader(writeRecords(t, rs))))
			var de *DumpError
			if !errors.As(err, &de) || !errors.Is(err, tc.kind) {
				t.Fatalf("Restore = %v, want a *DumpError of %v", err, tc.kind)
			}
			if de.Record != tc.record || (de.Field != tc.field && tc.field != "*") {
				t.Errorf("error at record %d field %q, want record %d field %q: %v", de.Record, de.Field, tc.record, tc.field, err)
			}
			t.Log(err)
			if !bytes.Equal(save(t, dst), before) {
				t.Error("a rejected Restore changed the filter")
			}
		})
	}
}

// TestRestoreByteFlips flips every byte of a small dump: Restore must fail (the TFRecord
// checksums catch every flip), never panic, and leave the filter unchanged.
func TestRestoreByteFlips(t *testing.T) {
	src := newSmall(t, 3)
	workload(src, 5, 200)
	dump := save(t, src)
	dst := newSmall(t, 3)
	before := save(t, dst)
	for i := range dump {
		bad := bytes.Clone(dump)
		bad[i] ^= 0x5a
		if err := dst.Restore(tfrecord.NewReader(bytes.NewReader(bad))); err == nil {
			t.Fatalf("flip at byte %d accepted", i)
		}
	}
	if !bytes.Equal(save(t, dst), before) {
		t.Error("rejected Restores changed the filter")
	}
}

// TestConcurrentAdmit runs Admit, Save and Restore from many goroutines (run with -race).
// Counts of one fid are exact under contention: with threshold T exactly T of its
// occurrences are rejected.
func TestConcurrentAdmit(t *testing.T) {
	const workers, per, T = 8, 500, 1000
	f := mustNew(t, &pspb.FilterConfig{Capacity: 3000, SplitNum: 5}, occurrence(T)).(*sliding)
	hot := int64(fid.MakeV2(7, 7))
	dump := save(t, f)
	var rejected [workers]int
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 2))
			for i := range per {
				if !f.Admit(hot, 1) {
					rejected[w]++
				}
				// Churn: fresh fids make the ring slide while others admit.
				f.Admit(int64(fid.MakeV2(1, rng.Uint64())), 1)
				f.Admit(int64(fid.MakeV2(2, uint64(i%50))), 2)
			}
		})
	}
	wg.Go(func() {
		for range 5 {
			var buf bytes.Buffer
			if err := f.Save(tfrecord.NewWriter(&buf)); err != nil {
				t.Error(err)
			}
			_ = f.MemoryBytes()
		}
	})
	wg.Wait()
	if f.slides() == 0 {
		t.Error("the ring never slid")
	}
	// The hot fid may have been carried across slides but never lost: it was touched far
	// more often than the ring turns. Its rejections are exactly T.
	var total int
	for _, r := range rejected {
		total += r
	}
	if total != T {
		t.Errorf("hot fid rejected %d times, want %d", total, T)
	}

	// Restore while admitting.
	g := mustNew(t, &pspb.FilterConfig{Capacity: 3000, SplitNum: 5}, occurrence(T))
	wg.Go(func() {
		for range 3 {
			if err := g.Restore(tfrecord.NewReader(bytes.NewReader(dump))); err != nil {
				t.Error(err)
			}
		}
	})
	for w := range 4 {
		wg.Go(func() { workload(g, uint64(w), 2000) })
	}
	wg.Wait()
}

// count returns f's current count without adding (Monolith's get).
func (s *sliding) count(f int64) uint32 {
	h := s.hash(f)
	s.mu.RLock()
	defer s.mu.RUnlock()
	switch fwd, _, cell, _ := s.forward(h); {
	case fwd == nil:
		return countMask
	case cell != 0:
		return cell & countMask
	default:
		return s.backward(h)
	}
}

// TestHashesFrozen pins the sliding filter's fid hash and the probabilistic filter's draws:
// dumps record cell positions and signatures, and seeded admissions must reproduce.
func TestHashesFrozen(t *testing.T) {
	s := newSmall(t, 2)
	for _, tc := range []struct {
		f int64
		h uint64 // the first splitmix64 output seeded with f
	}{{0, 0xe220a8397b1dcdaf}, {1, 0x910a2dec89025cc1}, {-1, 0xe4d971771b652c20}, {1 << 40, 0x1fdd7128f310c389}} {
		pos, _ := bits.Mul64(tc.h, s.g.totalSize)
		if got, want := s.hash(tc.f), (hashed{pos: pos, sig: uint32(tc.h & countMask)}); got != want {
			t.Errorf("hash(%d) = %+v, want %+v", tc.f, got, want)
		}
	}
	p := newProbabilistic(nil, false, 7)
	for i, want := range []uint32{0x63cbe1e4, 0x044c3cd7, 0xe6984080} {
		if got := p.u32(); got != want {
			t.Errorf("draw %d = %#x, want %#x", i, got, want)
		}
	}
}
