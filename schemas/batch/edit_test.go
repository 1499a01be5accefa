package batch

import (
	"encoding/json"
	"math/rand/v2"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/protobuf/proto"

	"github.com/monolith-go/monolith/schemas/matrixpb"
	"github.com/monolith-go/monolith/schemas/prototest"
)

// TestTake: rows come out in the asked order, repeated or dropped, shared columns stay
// shared, for every source.
func TestTake(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 21))
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	for _, mk := range []func() (arrow.RecordBatch, error){
		func() (arrow.RecordBatch, error) { return FromExampleBatch(mem, prototest.ExampleBatch(rng, 6)) },
		func() (arrow.RecordBatch, error) { return FromExamples(mem, prototest.Examples(rng, 6)) },
		func() (arrow.RecordBatch, error) { return FromInstances(mem, prototest.Instances(rng, 6)) },
		func() (arrow.RecordBatch, error) { return FromExampleBatch(mem, fixtureBatch(t)) },
	} {
		rec, err := mk()
		if err != nil {
			t.Fatal(err)
		}
		n := int(rec.NumRows())
		if n == 0 {
			rec.Release()
			continue
		}
		idx := []int{n - 1, 0, 0, n / 2}
		got, err := Take(mem, rec, idx)
		if err != nil {
			t.Fatal(err)
		}
		if !got.Schema().Equal(rec.Schema()) {
			t.Fatalf("schema changed")
		}
		all, err := Rows(rec)
		if err != nil {
			t.Fatal(err)
		}
		some, err := Rows(got)
		if err != nil {
			t.Fatal(err)
		}
		row := func(r Row) string {
			r.BatchSchema, r.BatchRows = nil, 0
			b, _ := json.Marshal(r)
			return string(b)
		}
		for j, r := range idx {
			if row(some[j]) != row(all[r]) {
				t.Fatalf("taken row %d (source row %d) differs:\n got %s\nwant %s", j, r, row(some[j]), row(all[r]))
			}
		}
		got.Release()
		if _, err := Take(mem, rec, []int{n}); err == nil {
			t.Error("out-of-range row accepted")
		}
		empty, err := Take(mem, rec, nil)
		if err != nil || empty.NumRows() != 0 {
			t.Fatalf("empty take: %v", err)
		}
		empty.Release()
		rec.Release()
	}
}

func TestWithLabelsWeightsLineIDs(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	rec, err := FromExampleBatch(mem, fixtureBatch(t))
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	n := int(rec.NumRows())
	offs := make([]int32, n+1)
	var vals []float32
	for r := 0; r < n; r++ {
		vals = append(vals, float32(r), 1)
		offs[r+1] = int32(len(vals))
	}
	lab, err := WithLabels(mem, rec, offs, vals)
	if err != nil {
		t.Fatal(err)
	}
	defer lab.Release()
	d, err := DenseColumn(lab, ColLabel)
	if err != nil || d.Row(7)[0] != 7 || len(d.Row(7)) != 2 {
		t.Fatalf("labels: %v %v", d.Row(7), err)
	}
	eb, err := ToExampleBatch(lab)
	if err != nil {
		t.Fatal(err)
	}
	if eb.NamedFeatureList[78].Name != ListLabel || eb.NamedFeatureList[78].Feature[7].GetFloatList().GetValue()[0] != 7 {
		t.Errorf("__LABEL__ list not rewritten in place")
	}
	w := make([]float32, n)
	w[3] = 2.5
	wr, err := WithInstanceWeights(mem, lab, w)
	if err != nil {
		t.Fatal(err)
	}
	defer wr.Release()
	exs, _ := ToExamples(wr)
	if exs[3].InstanceWeight != 2.5 {
		t.Errorf("instance weight %v", exs[3].InstanceWeight)
	}
	ids := make([][]byte, n)
	for r := range ids {
		ids[r], _ = proto.Marshal(&matrixpb.LineId{ReqTime: proto.Int64(int64(100 + r)), Actions: []int32{int32(r)}})
	}
	ids[5] = nil
	lr, err := WithLineIDs(mem, wr, ids)
	if err != nil {
		t.Fatal(err)
	}
	defer lr.Release()
	exs, _ = ToExamples(lr)
	if exs[4].LineId.GetReqTime() != 104 || exs[5].LineId != nil {
		t.Errorf("line ids: %v %v", exs[4].LineId, exs[5].LineId)
	}
	rt := lr.Column(lr.Schema().FieldIndices(LineIDColumn("req_time"))[0])
	if v := rt.(interface{ Value(int) int64 }).Value(9); v != 109 {
		t.Errorf("decoded req_time %d, want 109", v)
	}
	if b, _ := LineIDBytes(lr, 5); b != nil {
		t.Errorf("row 5 LineId should be absent")
	}
}

func TestRawFids(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	eb := fixtureBatch(t)
	rec, err := FromExampleBatch(mem, eb)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	i := rec.Schema().FieldIndices("f_user_id")[0]
	got, err := RawFids(rec, i, 0, nil)
	if err != nil || len(got) != 1 || got[0] != 0x007b24080526e4a7 {
		t.Errorf("RawFids = %x, %v; want the original v1 fid 7b24080526e4a7", got, err)
	}
}
