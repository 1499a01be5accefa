package hostcall

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// coreTensors returns the tensors core c records for a case: every value is shifted by
// 100·c so the cores differ.
func coreTensors(c int, spec []Tensor) []Tensor {
	out := make([]Tensor, len(spec))
	for i, t := range spec {
		var d any
		switch x := t.Data.(type) {
		case []float32:
			v := make([]float32, len(x))
			for j := range x {
				v[j] = x[j] + float32(100*c)
			}
			d = v
		case []float64:
			v := make([]float64, len(x))
			for j := range x {
				v[j] = x[j] + float64(100*c)
			}
			d = v
		case []int32:
			v := make([]int32, len(x))
			for j := range x {
				v[j] = x[j] + int32(100*c)
			}
			d = v
		case []int64:
			v := make([]int64, len(x))
			for j := range x {
				v[j] = x[j] + int64(100*c)
			}
			d = v
		case []bool:
			v := make([]bool, len(x))
			for j := range x {
				v[j] = x[j] != (c%2 == 1)
			}
			d = v
		}
		out[i] = Tensor{Name: t.Name, Data: d}
	}
	return out
}

func TestCompressRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name      string
		record    []Tensor // after the global step
		wantTypes []DType
		wantNames []string
	}{
		{"only the global step", nil, []DType{Int64}, []string{"global_step"}},
		{
			"types grouped in order of first appearance",
			[]Tensor{
				{"loss_avg", []float32{0.5, 0.25}},
				{"uid_bucket", []int32{3, 700}},
				{"req_time", []int64{1600000000}},
				{"auc_in", []float32{0.75}},
				{"flags", []bool{true, false, true}},
				{"w", []float64{1.5}},
				{"empty", []float32{}},
			},
			[]DType{Int64, Float32, Int32, Bool, Float64},
			[]string{"global_step", "req_time", "loss_avg", "auc_in", "empty", "uid_bucket", "flags", "w"},
		},
	} {
		for _, cores := range []int{1, 2, 3} {
			var layout Layout
			gathered := []any(nil)
			for c := 0; c < cores; c++ {
				r := NewRecorder(true, 7+int64(c))
				for _, ten := range coreTensors(c, tc.record) {
					if err := r.Record(ten.Name, ten.Data); err != nil {
						t.Fatal(err)
					}
				}
				l, rows, err := Compress(r.Tensors())
				if err != nil {
					t.Fatal(err)
				}
				if c == 0 {
					layout = l
					gathered = rows
				} else {
					if !reflect.DeepEqual(l, layout) {
						t.Fatalf("%s: core %d layout %+v differs", tc.name, c, l)
					}
					for g := range rows {
						gathered[g] = appendData(gathered[g], rows[g])
					}
				}
			}
			if !reflect.DeepEqual(layout.DTypes, tc.wantTypes) || !reflect.DeepEqual(layout.AllNames(), tc.wantNames) {
				t.Fatalf("%s: layout %v %v, want %v %v", tc.name, layout.DTypes, layout.AllNames(), tc.wantTypes, tc.wantNames)
			}
			cols, err := layout.Decompress(gathered, cores)
			if err != nil {
				t.Fatalf("%s, %d cores: %v", tc.name, cores, err)
			}
			step, err := GlobalStep(cols)
			if err != nil || step != 7 {
				t.Errorf("%s: global step %d, %v", tc.name, step, err)
			}
			// Each column is the cores' tensors one after the other.
			byName := map[string][]Tensor{}
			for c := 0; c < cores; c++ {
				all := append([]Tensor{{GlobalStepName, []int64{7 + int64(c)}}}, coreTensors(c, tc.record)...)
				for _, ten := range all {
					byName[ten.Name] = append(byName[ten.Name], ten)
				}
			}
			for i, col := range cols {
				if col.Name != tc.wantNames[i] || col.Cores != cores {
					t.Fatalf("%s: column %d is %s × %d", tc.name, i, col.Name, col.Cores)
				}
				want := emptyOf(dtypeMust(byName[col.Name][0].Data))
				for _, ten := range byName[col.Name] {
					want = appendData(want, ten.Data)
				}
				if !reflect.DeepEqual(col.Data, want) || col.Width*cores != lenOf(want) {
					t.Errorf("%s, %d cores: column %s = %v (width %d), want %v", tc.name, cores, col.Name, col.Data, col.Width, want)
				}
			}
		}
	}
}

func dtypeMust(d any) DType {
	dt, _, _ := dtypeOf(d)
	return dt
}

func TestRecorder(t *testing.T) {
	r := NewRecorder(true, 1)
	for _, tc := range []struct {
		name string
		data any
		err  string
	}{
		{"a", float32(2), ""},
		{"b", []int32{1}, ""},
		{"a", []float32{1}, `tensor "a" recorded twice`},
		{"global_step", int64(3), "recorded twice"},
		{"c", 3, "unsupported tensor type int"},
		{"d", []string{"x"}, "unsupported tensor type []string"},
		{"e", [][]float32{{1}}, "unsupported"},
	} {
		err := r.Record(tc.name, tc.data)
		if tc.err == "" {
			if err != nil {
				t.Errorf("Record(%s): %v", tc.name, err)
			}
			continue
		}
		if !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("Record(%s) = %v, want %q", tc.name, err, tc.err)
		}
	}
	if got := r.Tensors(); len(got) != 3 || !reflect.DeepEqual(got[1].Data, []float32{2}) {
		t.Errorf("Tensors = %v", got)
	}
	off := NewRecorder(false, 1)
	if err := off.Record("a", []float32{1}); err != nil || len(off.Tensors()) != 1 {
		t.Errorf("disabled recorder recorded: %v %v", err, off.Tensors())
	}
}

func TestDecompressErrors(t *testing.T) {
	layout, rows, err := Compress([]Tensor{{GlobalStepName, []int64{1}}, {"x", []float32{1, 2}}})
	if err != nil {
		t.Fatal(err)
	}
	noStep, noStepRows, _ := Compress([]Tensor{{"x", []float32{1}}})
	for _, tc := range []struct {
		name     string
		l        Layout
		gathered []any
		cores    int
		err      string
	}{
		{"ok", layout, rows, 1, ""},
		{"too few tensors", layout, rows[:1], 1, "1 compressed tensors, the layout has 2"},
		{"wrong type", layout, []any{rows[0], []float64{1, 2}}, 1, "is float64, the layout says float32"},
		{"wrong length", layout, []any{rows[0], []float32{1, 2, 3}}, 1, "has 3 values, want 1 cores × 2"},
		{"cores", layout, rows, 2, "has 1 values, want 2 cores × 1"},
		{"zero cores", layout, rows, 0, "0 cores"},
		{"global step not first", noStep, noStepRows, 1, `must be global_step, got "x"`},
		{"unsupported", layout, []any{rows[0], "x"}, 1, "unsupported"},
	} {
		_, err := tc.l.Decompress(tc.gathered, tc.cores)
		if tc.err == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			continue
		}
		if !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.err)
		}
	}
	if _, _, err := Compress([]Tensor{{"x", 1}}); !errors.Is(err, ErrInput) {
		t.Errorf("Compress of an int: %v", err)
	}
	if _, err := GlobalStep([]Column{{Name: GlobalStepName, Data: []int32{1}}}); !errors.Is(err, ErrInput) {
		t.Errorf("GlobalStep of int32: %v", err)
	}
}

// FuzzDecompress feeds arbitrary sizes and gathered lengths: errors are fine, panics are
// not, and a successful split returns every value once.
func FuzzDecompress(f *testing.F) {
	f.Add(uint8(1), uint8(2), uint8(0), uint8(1), 6, 2)
	f.Add(uint8(0), uint8(0), uint8(0), uint8(0), 0, 1)
	f.Fuzz(func(t *testing.T, a, b, c, d uint8, n, cores int) {
		if n < 0 || n > 1<<12 || cores > 64 {
			return
		}
		l := Layout{DTypes: []DType{Int64, Float32}, Names: [][]string{{GlobalStepName}, {"x", "y", "z"}},
			Sizes: [][]int{{int(a % 4)}, {int(b % 4), int(c % 4), int(d % 4)}}}
		cols, err := l.Decompress([]any{make([]int64, n), make([]float32, n)}, cores)
		if err != nil {
			return
		}
		total := 0
		for _, col := range cols {
			total += lenOf(col.Data)
			if lenOf(col.Data) != col.Cores*col.Width {
				t.Fatalf("column %s: %d values for %d × %d", col.Name, lenOf(col.Data), col.Cores, col.Width)
			}
		}
		if total != 2*n {
			t.Fatalf("%d values out of %d", total, 2*n)
		}
	})
}
