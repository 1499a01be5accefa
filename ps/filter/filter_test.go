package filter

import (
	"bytes"
	"errors"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/monolith-go/monolith/io/tfrecord"
	"github.com/monolith-go/monolith/schemas/fid"
	"github.com/monolith-go/monolith/schemas/hashtablepb"
	"github.com/monolith-go/monolith/schemas/pspb"
)

// occurrence builds a threshold config: def for every slot, then slot/threshold pairs.
func occurrence(def uint32, pairs ...uint32) *hashtablepb.SlotOccurrenceThresholdConfig {
	c := &hashtablepb.SlotOccurrenceThresholdConfig{DefaultOccurrenceThreshold: proto.Uint32(def)}
	for i := 0; i+1 < len(pairs); i += 2 {
		c.SlotOccurrenceThresholds = append(c.SlotOccurrenceThresholds, &hashtablepb.SlotOccurrenceThresholdConfig_SlotOccurrenceThreshold{
			Slot: proto.Uint32(pairs[i]), OccurrenceThreshold: proto.Uint32(pairs[i+1]),
		})
	}
	return c
}

// small is the smallest sliding geometry: capacity 300, 5 sub-filters of 75 fids.
func small() *pspb.FilterConfig {
	return &pspb.FilterConfig{Type: pspb.FilterConfig_SLIDING_HASH, Capacity: 300, SplitNum: 5}
}

func mustNew(t testing.TB, cfg *pspb.FilterConfig, th *hashtablepb.SlotOccurrenceThresholdConfig) Filter {
	t.Helper()
	f, err := New(cfg, th)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return f
}

func TestNewConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  *pspb.FilterConfig
		th   *hashtablepb.SlotOccurrenceThresholdConfig
		kind string // "" when New must fail
		msg  string // substring of the error
	}{
		{"nil everything", nil, nil, KindNone, ""},
		{"nil thresholds", &pspb.FilterConfig{}, nil, KindNone, ""},
		{"all zero sliding", &pspb.FilterConfig{}, occurrence(0, 3, 0), KindNone, ""},
		{"all zero probabilistic", &pspb.FilterConfig{Type: pspb.FilterConfig_PROBABILISTIC}, occurrence(0), KindNone, ""},
		{"default sliding", nil, occurrence(1), KindSlidingHash, ""},
		{"one slot", &pspb.FilterConfig{}, occurrence(0, 7, 2), KindSlidingHash, ""},
		{"probabilistic", &pspb.FilterConfig{Type: pspb.FilterConfig_PROBABILISTIC}, occurrence(3), KindProbabilistic, ""},
		{"none", &pspb.FilterConfig{Type: pspb.FilterConfig_NONE}, occurrence(3), KindNone, ""},
		{"max threshold", small(), occurrence(MaxThreshold), KindSlidingHash, ""},
		{"last slot", small(), occurrence(0, NumSlots-1, 1), KindSlidingHash, ""},
		{"default above max", small(), occurrence(MaxThreshold + 1), "", "default_occurrence_threshold 65536"},
		{"slot above max", small(), occurrence(1, 12, 70000), "", "slot 12: occurrence_threshold 70000"},
		{"slot above max with none type", &pspb.FilterConfig{Type: pspb.FilterConfig_NONE}, occurrence(0, 12, 70000), "", "slot 12"},
		{"slot out of range", small(), occurrence(1, NumSlots, 1), "", "slot 32768 out of range"},
		{"unknown type", &pspb.FilterConfig{Type: 9}, occurrence(1), "", "unknown filter type 9"},
		{"capacity too large", &pspb.FilterConfig{Capacity: MaxCapacity + 1}, occurrence(1), "", "capacity"},
		{"split_num too large", &pspb.FilterConfig{SplitNum: MaxSplitNum + 1}, occurrence(1), "", "split_num"},
		{"sub-filters too small", &pspb.FilterConfig{Capacity: 300, SplitNum: 200}, occurrence(1), "", "too small"},
		{"bad geometry even without thresholds", &pspb.FilterConfig{Capacity: MaxCapacity + 1}, nil, "", "capacity"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := New(tc.cfg, tc.th)
			if tc.kind == "" {
				if err == nil || !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.msg) {
					t.Fatalf("New: err = %v, want ErrInvalidConfig mentioning %q", err, tc.msg)
				}
				return
			}
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			if f.Kind() != tc.kind {
				t.Errorf("Kind = %q, want %q", f.Kind(), tc.kind)
			}
		})
	}
}

func TestGeometry(t *testing.T) {
	for _, tc := range []struct {
		capacity   uint64
		split      uint32
		wantCap    uint64
		wantSplits int
		wantSplit  uint64
		wantTotal  uint64
	}{
		{0, 0, DefaultCapacity, 7, DefaultCapacity / 6, DefaultCapacity / 6 * 12 / 10},
		{1, 1, 300, 5, 75, 90},     // raised to the minimums, as Monolith
		{300, 100, 300, 100, 3, 3}, // Monolith's "2 elements per sub-filter" test geometry
		{1000000, 10, 1000000, 10, 111111, 133333},
	} {
		g, err := newGeometry(tc.capacity, tc.split)
		if err != nil {
			t.Fatal(err)
		}
		if g.capacity != tc.wantCap || g.splitNum != tc.wantSplits || g.splitCapacity != tc.wantSplit || g.totalSize != tc.wantTotal || g.cells != int(tc.wantTotal)+maxStep {
			t.Errorf("newGeometry(%d, %d) = %+v", tc.capacity, tc.split, g)
		}
	}
}

// TestThresholdsPerSlot checks the dense slot table: overrides, the default, threshold 0.
func TestThresholdsPerSlot(t *testing.T) {
	f := mustNew(t, small(), occurrence(2, 5, 0, 6, 4, 6, 1)) // slot 6 repeated: last wins
	for _, tc := range []struct {
		slot uint64
		want int // occurrences rejected before the first admission
	}{{0, 2}, {5, 0}, {6, 1}, {32767, 2}} {
		id := int64(fid.MakeV2(tc.slot, 12345))
		for i := range tc.want + 2 {
			if got := f.Admit(id, 1); got != (i >= tc.want) {
				t.Errorf("slot %d occurrence %d: Admit = %t, want %t", tc.slot, i+1, got, i >= tc.want)
			}
		}
	}
}

// TestReferenceSGD is Monolith's hash-table test with a filter (§5.2): threshold 3, ids
// [0, 0, 1] per step, SGD learning rate 0.1, gradient −1, a fid created on its first
// admitted write and never filtered again. The table is simulated here.
//
// Per occurrence (Monolith without dedup: Admit(fid, 1) for each id of the request) the
// embeddings after steps 1–4 are id0 = 0, 0.1, 0.3, 0.5 and id1 = 0, 0, 0, 0.1: id0 is
// admitted by its 4th occurrence (the second of step 2) and id1 by its 4th (step 4).
//
// Per unique fid (this PS sums duplicates first, P2: Admit(fid, c) once per request with
// the summed gradient) the same occurrences admit at the same steps, because a request
// is judged like its c occurrences in a row (before+c > T): id0 (c = 2) is admitted on
// step 2 and then steps by 0.2 per request: 0, 0.2, 0.4, 0.6; id1 (c = 1) as before.
// Monolith's own dedup path (before >= T) would admit id0 only on step 3 (0, 0, 0.2, 0.4).
func TestReferenceSGD(t *testing.T) {
	const lr = 0.1
	ids := []int64{0, 0, 1}
	check := func(t *testing.T, step int, table map[int64]float64, want0, want1 []float64) {
		t.Helper()
		if g0, g1 := table[0], table[1]; !near(g0, want0[step]) || !near(g1, want1[step]) {
			t.Errorf("after step %d: id0 = %.2f, id1 = %.2f, want %.2f, %.2f", step+1, g0, g1, want0[step], want1[step])
		}
	}
	for _, cfg := range []*pspb.FilterConfig{small(), {}} {
		t.Run("per occurrence/capacity "+capName(cfg.GetCapacity()), func(t *testing.T) {
			f := mustNew(t, cfg, occurrence(3))
			table := map[int64]float64{}
			for step := range 4 {
				for _, id := range ids {
					if _, ok := table[id]; ok || f.Admit(id, 1) {
						table[id] += lr // gradient −1
					}
				}
				check(t, step, table, []float64{0, 0.1, 0.3, 0.5}, []float64{0, 0, 0, 0.1})
			}
		})
		t.Run("per unique fid/capacity "+capName(cfg.GetCapacity()), func(t *testing.T) {
			f := mustNew(t, cfg, occurrence(3))
			table := map[int64]float64{}
			for step := range 4 {
				for _, u := range []struct {
					id    int64
					count uint32
				}{{0, 2}, {1, 1}} {
					if _, ok := table[u.id]; ok || f.Admit(u.id, u.count) {
						table[u.id] += lr * float64(u.count) // summed gradient −count
					}
				}
				check(t, step, table, []float64{0, 0.2, 0.4, 0.6}, []float64{0, 0, 0, 0.1})
			}
		})
	}
	// The two batched rules side by side for id0 (counts before: 0, 2, 4, 6).
	for i, before := range []uint32{0, 2, 4, 6} {
		ours, monolithDedup := admits(before, 2, 3), before >= 3
		if ours != (i >= 1) || monolithDedup != (i >= 2) {
			t.Errorf("step %d: admits = %t, Monolith dedup rule = %t", i+1, ours, monolithDedup)
		}
	}
}

func near(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }

func capName(v uint64) string {
	if v == 0 {
		return "default"
	}
	return strconv.FormatUint(v, 10)
}

// TestThresholdExact pins P4: with threshold T the first T occurrences are rejected and
// the (T+1)-th admits, for T beyond Monolith's 4-bit limit, up to 65535.
func TestThresholdExact(t *testing.T) {
	for _, T := range []uint32{1, 3, 15, 16, 100, 65535} {
		t.Run(strconv.Itoa(int(T)), func(t *testing.T) {
			f := mustNew(t, small(), occurrence(T))
			id := int64(fid.MakeV2(3, 77))
			for i := uint32(1); i <= T; i++ {
				if f.Admit(id, 1) {
					t.Fatalf("occurrence %d admitted, want rejected up to %d", i, T)
				}
			}
			if !f.Admit(id, 1) {
				t.Fatalf("occurrence %d rejected", T+1)
			}
			if !f.Admit(id, 1) {
				t.Fatalf("occurrence %d rejected after saturation", T+2)
			}
			if got := f.(*sliding).count(id); got != min(T+2, countMask) {
				t.Errorf("count = %d, want %d", got, min(T+2, countMask))
			}
		})
	}
}

// TestBatchedCount checks that a count c is added at once and judged by before+c > T.
func TestBatchedCount(t *testing.T) {
	f := mustNew(t, small(), occurrence(100))
	id := int64(fid.MakeV2(9, 1))
	for _, tc := range []struct {
		count uint32
		want  bool
	}{{60, false}, {40, false}, {1, true}} { // before 0, 60, 100
		if got := f.Admit(id, tc.count); got != tc.want {
			t.Errorf("Admit(%d) = %t, want %t", tc.count, got, tc.want)
		}
	}
	id2 := int64(fid.MakeV2(9, 2))
	if !f.Admit(id2, 101) {
		t.Error("a first request with count T+1 is rejected")
	}
	id3 := int64(fid.MakeV2(9, 3))
	if f.Admit(id3, 0) { // counts as 1
		t.Error("count 0 admitted with threshold 100")
	}
	if got := f.(*sliding).count(id3); got != 1 {
		t.Errorf("count 0 counted %d, want 1", got)
	}
	id4 := int64(fid.MakeV2(9, 4))
	if !f.Admit(id4, 1<<31) || f.(*sliding).count(id4) != countMask {
		t.Errorf("a huge count does not saturate: %d", f.(*sliding).count(id4))
	}
}

// TestZeroThresholdNotCounted mirrors Monolith's SkipZeroThresholdFeatures: a slot with
// threshold 0 always admits and leaves no trace.
func TestZeroThresholdNotCounted(t *testing.T) {
	f := mustNew(t, small(), occurrence(1, 4, 0)).(*sliding)
	for i := range int64(5) {
		if !f.Admit(int64(fid.MakeV2(4, uint64(i))), 1) {
			t.Fatal("threshold 0 rejected")
		}
		if f.Admit(int64(fid.MakeV2(1, uint64(i))), 1) {
			t.Fatal("threshold 1 admitted a first occurrence")
		}
	}
	var n uint64
	for i := range f.filters {
		n += f.filters[i].numElements.Load()
	}
	if n != 5 {
		t.Errorf("elements = %d, want 5", n)
	}
}

func TestStateless(t *testing.T) {
	// A sliding dump to feed the stateless filters.
	sl := mustNew(t, small(), occurrence(2))
	sl.Admit(1, 1)
	var dump bytes.Buffer
	w := tfrecord.NewWriter(&dump)
	if err := sl.Save(w); err != nil {
		t.Fatal(err)
	}
	for _, f := range []Filter{
		None(),
		mustNew(t, &pspb.FilterConfig{Type: pspb.FilterConfig_PROBABILISTIC}, occurrence(2)),
		mustNew(t, &pspb.FilterConfig{Type: pspb.FilterConfig_NONE}, occurrence(2)),
	} {
		t.Run(f.Kind(), func(t *testing.T) {
			var buf bytes.Buffer
			w := tfrecord.NewWriter(&buf)
			if err := f.Save(w); err != nil {
				t.Fatal(err)
			}
			if err := w.Flush(); err != nil {
				t.Fatal(err)
			}
			if buf.Len() != 0 {
				t.Errorf("Save wrote %d bytes", buf.Len())
			}
			if err := f.Restore(tfrecord.NewReader(&buf)); err != nil {
				t.Errorf("Restore(empty) = %v", err)
			}
			if err := f.Restore(tfrecord.NewReader(bytes.NewReader(dump.Bytes()))); err != nil {
				t.Errorf("Restore(sliding dump) = %v", err)
			}
			bad := bytes.Clone(dump.Bytes())
			bad[20] ^= 1
			if err := f.Restore(tfrecord.NewReader(bytes.NewReader(bad))); !errors.Is(err, ErrCorruptDump) || !errors.Is(err, tfrecord.ErrChecksum) {
				t.Errorf("Restore(corrupt) = %v, want ErrCorruptDump and ErrChecksum", err)
			}
			if f.Kind() == KindNone {
				if f.MemoryBytes() != 0 {
					t.Errorf("MemoryBytes = %d", f.MemoryBytes())
				}
				for i := range int64(100) {
					if !f.Admit(i<<40, 1) {
						t.Fatal("none rejected")
					}
				}
			} else if f.MemoryBytes() < NumSlots*2 {
				t.Errorf("MemoryBytes = %d, less than the threshold table", f.MemoryBytes())
			}
		})
	}
}

func TestMemoryBytes(t *testing.T) {
	f := mustNew(t, &pspb.FilterConfig{}, occurrence(1))
	g, _ := newGeometry(0, 0)
	cells := int64(g.splitNum) * int64(g.cells) * 4
	if m := f.MemoryBytes(); m < cells || m > cells+NumSlots*2+1<<12 {
		t.Errorf("MemoryBytes = %d, want about %d", m, cells+NumSlots*2)
	}
}
