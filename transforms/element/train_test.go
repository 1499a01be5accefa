package element_test

import (
	"bytes"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/monolith-go/monolith/transforms/element"
)

func TestTrainStateRoundTrip(t *testing.T) {
	for _, ts := range []*element.TrainState{
		{},
		{ID: "run:1:abc:7", Rows: 3, Loss: 1.25},
		{
			ID:         "x",
			Emb:        [][]float32{{1, 2}, {}, {float32(math.NaN()), -0}},
			Params:     [][]float32{{0.5}},
			ParamGrads: [][]float32{{-0.5}},
			Grads: []element.TableGrads{
				{Table: "t", Shard: 1, Fids: []uint64{9}, Offsets: []int32{0, 2}, Grads: []float32{1, 2}},
				{Table: "u", Fids: []uint64{1, 2}, Offsets: []int32{0, 1, 2}, Grads: []float32{3, 4}, Counts: []int32{2, 1}},
			},
			Rows: 2, Loss: math.Inf(1),
			Preds: []float32{0.25, 0.75}, Labels: []float32{0, 1},
		},
	} {
		b, err := element.EncodeTrainState(ts)
		if err != nil {
			t.Fatal(err)
		}
		got, err := element.DecodeTrainState(b)
		if err != nil {
			t.Fatal(err)
		}
		again, err := element.EncodeTrainState(got)
		if err != nil || !bytes.Equal(again, b) {
			t.Fatalf("re-encoding differs (%v)", err)
		}
		if got.ID != ts.ID || got.Rows != ts.Rows || math.Float64bits(got.Loss) != math.Float64bits(ts.Loss) || len(got.Emb) != len(ts.Emb) || len(got.Grads) != len(ts.Grads) ||
			!slices.Equal(got.Preds, ts.Preds) || !slices.Equal(got.Labels, ts.Labels) {
			t.Fatalf("decoded %+v, want %+v", got, ts)
		}
		// As part of a Sharded element.
		sb, err := element.EncodeSharded(&element.Sharded{Train: ts})
		if err != nil {
			t.Fatal(err)
		}
		s, err := element.DecodeSharded(sb)
		if err != nil || s.Train == nil || s.Train.ID != ts.ID {
			t.Fatalf("Sharded with a TrainState: %+v, %v", s, err)
		}
	}
	// A Sharded without training state keeps the old encoding, and decodes with Train nil.
	sb, _ := element.EncodeSharded(&element.Sharded{})
	if s, err := element.DecodeSharded(sb); err != nil || s.Train != nil || len(sb) != 3 {
		t.Fatalf("empty Sharded: %x → %+v, %v", sb, s, err)
	}
	// Every truncation is an error, never a panic.
	full, _ := element.EncodeTrainState(&element.TrainState{ID: "abc", Emb: [][]float32{{1, 2, 3}}, Grads: []element.TableGrads{{Table: "t", Fids: []uint64{1}, Offsets: []int32{0, 1}, Grads: []float32{1}}}, Rows: 1})
	for n := range len(full) {
		if _, err := element.DecodeTrainState(full[:n]); !errors.Is(err, element.ErrCorrupt) {
			t.Fatalf("truncated to %d bytes: %v", n, err)
		}
	}
	if _, err := element.DecodeTrainState(append(full, 0)); !errors.Is(err, element.ErrCorrupt) {
		t.Fatal("a trailing byte was accepted")
	}
	// One score list (Preds without Labels) is corrupt: a valid encoding has 0 or 2.
	one, _ := element.EncodeTrainState(&element.TrainState{ID: "a", Emb: [][]float32{{1}}})
	one = bytes.Replace(one, []byte{1, 1, 0, 0, 0x80, 0x3f, 0, 0, 0}, []byte{1, 1, 0, 0, 0x80, 0x3f, 0, 0, 1, 0}, 1)
	if _, err := element.DecodeTrainState(one); err == nil || !strings.Contains(err.Error(), "1 score lists") {
		t.Fatalf("one score list: %v", err)
	}
}

func FuzzDecodeTrainState(f *testing.F) {
	b, _ := element.EncodeTrainState(&element.TrainState{ID: "a", Emb: [][]float32{{1}}, Params: [][]float32{{2}}, Rows: 1, Loss: 0.5,
		Grads: []element.TableGrads{{Table: "t", Fids: []uint64{1}, Offsets: []int32{0, 1}, Grads: []float32{1}}}})
	f.Add(b)
	f.Fuzz(func(t *testing.T, b []byte) {
		ts, err := element.DecodeTrainState(b)
		if err != nil {
			return
		}
		again, err := element.EncodeTrainState(ts)
		if err != nil {
			t.Fatal(err)
		}
		ts2, err := element.DecodeTrainState(again)
		if err != nil {
			t.Fatal(err)
		}
		if third, _ := element.EncodeTrainState(ts2); !bytes.Equal(third, again) {
			t.Fatal("re-encoding is not stable")
		}
	})
}
