package peers

import (
	"bytes"
	"context"
	"errors"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/monolith-go/monolith/kernels/featcfg"
	"github.com/monolith-go/monolith/kernels/kernelbench"
	"github.com/monolith-go/monolith/kernels/shard"
	"github.com/monolith-go/monolith/schemas/examplepb"
)

// edgeCase covers what the benchmark shapes do not: empty entries (per row, and a shared
// empty one, as for a feature absent from an ExampleBatch), duplicate fids, FIRSTN in
// multi-slice CONCAT and STACK layouts (D1) and with more fids than L, a feature read by
// several (overlapping or identical) slices of one layout, and MEAN on a shared entry.
func edgeCase(t *testing.T) kernelbench.Case {
	t.Helper()
	sc := func(name string, a, b int32) *examplepb.SliceConfig {
		return &examplepb.SliceConfig{FeatureName: name, Start: a, End: b}
	}
	out := func(ot examplepb.OutType, s ...*examplepb.SliceConfig) *examplepb.OutConfig {
		return &examplepb.OutConfig{OutType: ot, SliceConfigs: s}
	}
	fc := &examplepb.FeatureConfigs{
		FeatureConfigs: map[string]*examplepb.FeatureConfig{
			"a": {Table: "t1", SliceDims: []int32{2, 3}},
			"b": {Table: "t1", SliceDims: []int32{4}, PoolingType: examplepb.PoolingType_MEAN},
			"c": {Table: "t1", SliceDims: []int32{4}, PoolingType: examplepb.PoolingType_MEAN},
			"d": {Table: "t2", SliceDims: []int32{2, 2}, PoolingType: examplepb.PoolingType_FIRSTN, MaxSequenceLength: 3},
			"e": {Table: "t2", SliceDims: []int32{2}, PoolingType: examplepb.PoolingType_FIRSTN, MaxSequenceLength: 3},
		},
		OutConfigs: map[string]*examplepb.OutConfig{
			"add":      out(examplepb.OutType_ADDN, sc("a", 0, 2), sc("b", 0, 2), sc("c", 2, 4), sc("a", 3, 5), sc("a", 0, 2)),
			"cat":      out(examplepb.OutType_CONCAT, sc("a", 0, 5), sc("b", 1, 3), sc("a", 1, 2)),
			"seqcat":   out(examplepb.OutType_CONCAT, sc("d", 0, 2), sc("d", 2, 4), sc("e", 0, 2)),
			"seqstack": out(examplepb.OutType_STACK, sc("d", 0, 2), sc("e", 0, 2), sc("d", 2, 4)),
			"stk":      out(examplepb.OutType_STACK, sc("b", 0, 2), sc("a", 0, 2), sc("a", 0, 2)),
			"none":     out(examplepb.OutType_NONE, sc("a", 2, 5), sc("d", 0, 4), sc("c", 0, 4), sc("b", 0, 4)),
		},
	}
	cfg, err := featcfg.New(fc)
	if err != nil {
		t.Fatal(err)
	}
	entries := func(shared bool, es ...[]uint64) shard.FeatureInput {
		fi := shard.FeatureInput{Shared: shared, Offsets: []int32{0}}
		for _, e := range es {
			fi.Values = append(fi.Values, e...)
			fi.Offsets = append(fi.Offsets, int32(len(fi.Values)))
		}
		return fi
	}
	const B = 5
	in := &shard.Input{Rows: B, Features: make([]shard.FeatureInput, len(cfg.Features))}
	set := func(name string, fi shard.FeatureInput) {
		f, ok := cfg.Feature(name)
		if !ok {
			t.Fatalf("no feature %q", name)
		}
		in.Features[f] = fi
	}
	set("a", entries(false, []uint64{1, 2, 1}, nil, []uint64{7}, []uint64{3, 4, 5, 6, 8, 9}, nil))
	set("b", entries(true, []uint64{11, 12, 11}))
	set("c", entries(true, nil))
	set("d", entries(false, []uint64{21, 22, 23, 24, 25}, []uint64{21}, nil, []uint64{26, 26}, []uint64{27, 28, 29}))
	set("e", entries(true, []uint64{31, 32, 33, 34}))
	return kernelbench.Case{Name: "edge", PS: 3, Cfg: cfg, In: in}
}

func TestFindPython(t *testing.T) {
	py, err := FindPython(context.Background())
	if err != nil {
		t.Fatalf("the NumPy peer needs Python with NumPy: %v", err)
	}
	t.Logf("python: %s", py)
}

func TestLayout(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name string
		c    func(t *testing.T) kernelbench.Case
	}{
		{"edge", edgeCase},
		{"s61", func(*testing.T) kernelbench.Case { return kernelbench.Scenario61(1) }},
		{"large", func(*testing.T) kernelbench.Case { return kernelbench.Large(1) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := Layout(ctx, t.TempDir(), tc.c(t), 1)
			if err != nil {
				t.Fatal(err)
			}
			if res.Compared == 0 || len(res.ForwardSec) != 1 || len(res.BackwardSec) != 1 || res.NumPyVersion == "" {
				t.Fatalf("incomplete result %+v", res)
			}
			t.Logf("%s, NumPy %s: forward %.2f ms, backward %.2f ms; %d floats agree, max |diff| %.3g",
				res.Python, res.NumPyVersion, res.ForwardSec[0]*1e3, res.BackwardSec[0]*1e3, res.Compared, res.MaxDiff)
		})
	}
}

func TestLayoutDetectsCorruption(t *testing.T) {
	tests := []struct {
		file string // the peer output to corrupt (element 3)
		want string // in the error
	}{
		{"out_0.npy", `forward output 0 (layout "add", tensor 0) at index [1 1]`},
		{"out_5.npy", `forward output 5 (layout "none", tensor 3) at index [0 3]`},
		{"out_7.npy", `forward output 7 (layout "seqstack", tensor 0) at index [0 0 1 1]`},
		{"out_8.npy", `forward output 8 (layout "stk", tensor 0) at index [0 1 1]`},
		{"emb_grad_0.npy", `embedding gradient 0 (table "t1", ps 0) at index [3]`},
		{"emb_grad_4.npy", `embedding gradient 4 (table "t2", ps 1) at index [3]`},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			tamper := func(dir string) error {
				path := filepath.Join(dir, tc.file)
				shape, data, err := loadNPY[float32](path)
				if err != nil {
					return err
				}
				data[3] += 0.5
				return saveNPY(path, shape, data)
			}
			_, err := runLayout(context.Background(), t.TempDir(), edgeCase(t), 1, tamper)
			if !errors.Is(err, ErrMismatch) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want ErrMismatch naming %s", err, tc.want)
			}
		})
	}
}

func TestCompare(t *testing.T) {
	nan := float32(math.NaN())
	tests := []struct {
		name      string
		got, want []float32
		shape     []int
		err       string // "" for agreement
	}{
		{"equal", []float32{1, -2, 0}, []float32{1, -2, 0}, []int{3}, ""},
		{"absolute below 1", []float32{0.500009}, []float32{0.5}, []int{1}, ""},
		{"relative above 1", []float32{1000.009}, []float32{1000}, []int{1}, ""},
		{"absolute too far", []float32{1, 0.50002}, []float32{1, 0.5}, []int{1, 2}, "at index [0 1]: numpy 0.50002, go 0.5"},
		{"relative too far", []float32{1000.02}, []float32{1000}, []int{1}, "at index [0]: numpy 1000.02, go 1000"},
		{"nan", []float32{0, 0, 0, nan}, []float32{0, 0, 0, 0}, []int{2, 2}, "at index [1 1]: numpy NaN, go 0"},
		{"length", []float32{1}, []float32{1, 2}, []int{2}, "1 floats, want 2"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := compare("tensor x", tc.shape, tc.got, tc.want)
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("unexpected error %v", err)
			case tc.err != "" && (!errors.Is(err, ErrMismatch) || !strings.Contains(err.Error(), "tensor x") || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("error %v, want ErrMismatch naming tensor x and %q", err, tc.err)
			}
		})
	}
}

// roundTrip writes data as a .npy of shape and reads it back.
func roundTrip[T element](t *testing.T, shape []int, data []T) {
	t.Helper()
	var buf bytes.Buffer
	if err := writeNPY(&buf, shape, data[:len(data)/2], data[len(data)/2:]); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	hlen := int(b[8]) | int(b[9])<<8
	if (10+hlen)%64 != 0 || b[10+hlen-1] != '\n' || !bytes.Contains(b, []byte("'descr': '"+descr[T]()+"'")) {
		t.Fatalf("header %q", b[:10+hlen])
	}
	gotShape, got, err := readNPY[T](&buf, int64(buf.Len()))
	if err != nil {
		t.Fatal(err)
	}
	if !equalInts(gotShape, shape) || len(got) != len(data) {
		t.Fatalf("read shape %v (%d elements), wrote %v (%d)", gotShape, len(got), shape, len(data))
	}
	for i := range data {
		if got[i] != data[i] {
			t.Fatalf("element %d: read %v, wrote %v", i, got[i], data[i])
		}
	}
}

func TestNPYRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"f4 2x3", func(t *testing.T) { roundTrip(t, []int{2, 3}, []float32{1, -2.5, 3e-9, float32(math.Inf(1)), 0, 7}) }},
		{"f4 empty", func(t *testing.T) { roundTrip(t, []int{0, 4}, []float32{}) }},
		{"f4 scalar", func(t *testing.T) { roundTrip(t, []int{}, []float32{42}) }},
		{"f8 1", func(t *testing.T) { roundTrip(t, []int{1}, []float64{math.Pi}) }},
		{"u8", func(t *testing.T) { roundTrip(t, []int{3}, []uint64{0, 1<<63 | 5, math.MaxUint64}) }},
		{"u4", func(t *testing.T) { roundTrip(t, []int{2}, []uint32{1 << 31, 3}) }},
		{"i4 2x1x2", func(t *testing.T) { roundTrip(t, []int{2, 1, 2}, []int32{-1, 0, math.MaxInt32, math.MinInt32}) }},
		{"i8", func(t *testing.T) { roundTrip(t, []int{2}, []int64{-1 << 40, 9}) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, tc.run)
	}
}

func TestNPYRejects(t *testing.T) {
	var f4 bytes.Buffer
	if err := writeNPY(&f4, []int{2}, []float32{1, 2}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		file []byte
		want string
	}{
		{"wrong dtype", f4.Bytes(), "dtype '<f4', want '<u8'"},
		{"fortran order", bytes.Replace(f4.Bytes(), []byte("False"), []byte("True "), 1), "fortran_order"},
		{"not npy", []byte("PK\x03\x04 not an npy file"), "not a .npy file"},
		{"truncated", f4.Bytes()[:len(f4.Bytes())-3], "data of shape [2]"},
		{"huge shape", bytes.Replace(f4.Bytes(), []byte("(2,)"), []byte("(9999999999999,)"), 1), "more than the"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			if tc.name != "wrong dtype" && tc.name != "not npy" {
				_, _, err = readNPY[float32](bytes.NewReader(tc.file), int64(len(tc.file)))
			} else {
				_, _, err = readNPY[uint64](bytes.NewReader(tc.file), int64(len(tc.file)))
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
}

// FuzzReadNPY: any input is read or rejected with an error, never a panic, and what is
// read has as many elements as its shape says.
func FuzzReadNPY(f *testing.F) {
	var b bytes.Buffer
	if err := writeNPY(&b, []int{2, 2}, []float32{1, 2, 3, 4}); err != nil {
		f.Fatal(err)
	}
	f.Add(b.Bytes())
	f.Add([]byte("\x93NUMPY\x02\x00\x10\x00\x00\x00{'shape': (1,)}"))
	f.Fuzz(func(t *testing.T, in []byte) {
		shape, data, err := readNPY[float32](bytes.NewReader(in), int64(len(in)))
		if err != nil {
			return
		}
		n := 1
		for _, d := range shape {
			n *= d
		}
		if n != len(data) {
			t.Fatalf("shape %v, %d elements", shape, len(data))
		}
	})
}
