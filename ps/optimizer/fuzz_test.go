package optimizer

import (
	"math"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/monolith-go/monolith/schemas/hashtablepb"
)

// FuzzRestore feeds arbitrary bytes, unmarshalled as a SingleOptimizerDump, to the Restore
// of every rule. Restore must never panic; when it accepts a dump, Dump must give back a
// dump that restores the same state bit for bit, and Step must run on it.
func FuzzRestore(f *testing.F) {
	kinds := allKinds()
	opts := make([]Optimizer, len(kinds))
	for i, k := range kinds {
		opts[i] = mustNew(f, k.cfg, k.dim)
		e := newEntry(opts[i], 0.1, 0.2, 0.3)
		opts[i].Step(e.w, []float32{1, -1, 2}[:k.dim], e.state, 0.1, 3)
		if d := opts[i].Dump(e.state); d != nil {
			b, err := proto.Marshal(d)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b)
		}
	}
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		var d hashtablepb.SingleOptimizerDump
		if proto.Unmarshal(data, &d) != nil {
			return
		}
		for i, o := range opts {
			state := make([]float32, o.StateLen())
			if err := o.Restore(state, &d); err != nil {
				continue
			}
			again := make([]float32, o.StateLen())
			if err := o.Restore(again, o.Dump(state)); err != nil {
				t.Fatalf("%s: Restore(Dump(restored state)) = %v", kinds[i].name, err)
			}
			for j := range state {
				if math.Float32bits(state[j]) != math.Float32bits(again[j]) {
					t.Fatalf("%s: state %v came back as %v", kinds[i].name, state, again)
				}
			}
			w := make([]float32, o.Dim())
			g := make([]float32, o.Dim())
			o.Step(w, g, state, 0.01, 1)
		}
	})
}
