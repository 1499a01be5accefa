package tfs

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	"github.com/monolith-go/monolith/internal/fixtures"
	"github.com/monolith-go/monolith/io/pbstream"
	"github.com/monolith-go/monolith/schemas/examplepb"
	"github.com/monolith-go/monolith/schemas/parserpb"
	"github.com/monolith-go/monolith/schemas/tfcorepb"
)

// TestInstanceTensor ports tfs_client_test.test_get_instance_proto: 256 random instances
// make a DT_STRING (7) tensor of shape [256]; each instance holds 5 v1 fids per slot 1…6
// with the reference's values.
func TestInstanceTensor(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	insts := make([]*parserpb.Instance, 256)
	for i := range insts {
		inst, err := RandomInstance(rng, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		insts[i] = inst
	}
	tp, err := InstanceTensor(insts)
	if err != nil {
		t.Fatal(err)
	}
	if tp.GetDtype() != 7 || tp.GetDtype() != tfcorepb.DataType_DT_STRING || len(tp.GetTensorShape().GetDim()) != 1 ||
		tp.GetTensorShape().GetDim()[0].GetSize() != 256 || len(tp.GetStringVal()) != 256 {
		t.Fatalf("tensor dtype %v shape %v, %d values", tp.GetDtype(), tp.GetTensorShape(), len(tp.GetStringVal()))
	}
	var back parserpb.Instance
	if err := proto.Unmarshal(tp.GetStringVal()[3], &back); err != nil || !proto.Equal(&back, insts[3]) {
		t.Fatalf("value 3 does not parse back to instance 3: %v", err)
	}
	for _, f := range back.GetFid() {
		slot, v := f>>54, f&(1<<54-1)
		i := slot - 1
		if slot < 1 || slot > 6 || v < i*5+1 || v > i*5+5 {
			t.Fatalf("fid %#x: slot %d value %d outside the reference's ranges", f, slot, v)
		}
	}
	if len(back.GetFid()) != 30 {
		t.Errorf("%d fids, want 30", len(back.GetFid()))
	}
	for _, bad := range []struct{ slots, vocab []int }{{nil, []int{}}, {[]int{1, 2}, []int{5}}, {nil, []int{0}}, {[]int{1 << 10}, []int{5}}} {
		if _, err := RandomInstance(rng, bad.slots, bad.vocab); err == nil {
			t.Errorf("RandomInstance(%v, %v) succeeded", bad.slots, bad.vocab)
		}
	}
}

// TestExampleBatchToInstances ports test_get_example_batch_to_instance_from_pbtxt and
// _from_pb on Monolith's example_batch.pbtxt: one instance per row, labels, LineId, v1 fids
// remapped to v2 with their slot, other values kept; the pb file (LagrangeX framing) gives
// the same instances.
func TestExampleBatchToInstances(t *testing.T) {
	eb := &examplepb.ExampleBatch{}
	if err := prototext.Unmarshal(fixtures.Read(t, "example_batch.pbtxt"), eb); err != nil {
		t.Fatal(err)
	}
	insts, err := ExampleBatchToInstances(eb)
	if err != nil {
		t.Fatal(err)
	}
	if len(insts) != int(eb.GetBatchSize()) || len(insts) == 0 {
		t.Fatalf("%d instances for batch size %d", len(insts), eb.GetBatchSize())
	}
	checked := 0
	for _, nfl := range eb.GetNamedFeatureList() {
		for i, inst := range insts {
			f := nfl.GetFeature()[0]
			if nfl.GetType() != examplepb.FeatureListType_SHARED {
				f = nfl.GetFeature()[i]
			}
			switch nfl.GetName() {
			case "__LABEL__":
				if !slices.Equal(inst.GetLabel(), f.GetFloatList().GetValue()) {
					t.Fatalf("row %d labels %v, want %v", i, inst.GetLabel(), f.GetFloatList().GetValue())
				}
				continue
			case "__LINE_ID__":
				if inst.GetLineId() == nil {
					t.Fatalf("row %d has no LineId", i)
				}
				continue
			}
			var got []uint64
			for _, mf := range inst.GetFeature() {
				if mf.GetName() == nfl.GetName() {
					got = mf.GetFid()
				}
			}
			var want []uint64
			for _, v := range f.GetFidV1List().GetValue() {
				want = append(want, (f.GetFidV1List().GetValue()[0]>>54)<<48|v&(1<<48-1))
			}
			want = append(want, f.GetFidV2List().GetValue()...)
			if len(want) > 0 {
				checked++
				if !slices.Equal(got, want) {
					t.Fatalf("row %d feature %s fids %x, want %x", i, nfl.GetName(), got, want)
				}
			}
		}
	}
	if checked == 0 {
		t.Fatal("the fixture has no fid features to check")
	}
	// The pb route: a LagrangeX-framed record of the same batch.
	payload, err := proto.Marshal(eb)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	w := pbstream.NewWriter(&buf, pbstream.Options{LagrangeX: true})
	if err := w.Write(payload); err != nil || w.Flush() != nil {
		t.Fatal(err)
	}
	rec, err := pbstream.NewReader(&buf, pbstream.Options{LagrangeX: true}).Next()
	if err != nil {
		t.Fatal(err)
	}
	fromPB := &examplepb.ExampleBatch{}
	if err := proto.Unmarshal(rec.Payload, fromPB); err != nil {
		t.Fatal(err)
	}
	again, err := ExampleBatchToInstances(fromPB)
	if err != nil || len(again) != len(insts) || !proto.Equal(again[1], insts[1]) {
		t.Fatalf("pb route differs: %v", err)
	}
	tp, err := InstanceTensor(again)
	if err != nil || tp.GetTensorShape().GetDim()[0].GetSize() != int64(len(again)) {
		t.Fatalf("tensor of the instances: %v", err)
	}
}

// TestExampleBatchToInstancesErrors: a short list and a LineId that does not parse name the
// feature and row.
func TestExampleBatchToInstancesErrors(t *testing.T) {
	short := &examplepb.ExampleBatch{BatchSize: 2, NamedFeatureList: []*examplepb.NamedFeatureList{{
		Name: "f", Feature: []*examplepb.Feature{{Type: &examplepb.Feature_FidV2List{FidV2List: &examplepb.FidList{Value: []uint64{1}}}}}}}}
	if _, err := ExampleBatchToInstances(short); err == nil || !strings.Contains(err.Error(), `"f"`) || !strings.Contains(err.Error(), "row 1") {
		t.Errorf("short list: %v", err)
	}
	badLine := &examplepb.ExampleBatch{BatchSize: 1, NamedFeatureList: []*examplepb.NamedFeatureList{{
		Name: "__LINE_ID__", Feature: []*examplepb.Feature{{Type: &examplepb.Feature_BytesList{BytesList: &examplepb.BytesList{Value: [][]byte{{0xff, 0xff}}}}}}}}}
	if _, err := ExampleBatchToInstances(badLine); err == nil || !strings.Contains(err.Error(), "LineId") {
		t.Errorf("bad LineId: %v", err)
	}
}

// utils_test.test_instance_wrapper_from_json / _from_pbtext / _from_dump: each of
// Monolith's three Instance fixtures reads to a non-empty Instance, and to_tensor_proto(5)
// is a DT_STRING tensor of five copies of its serialization. Writing it back in each form
// and reading it again gives the same Instance.
func TestInstanceFormater(t *testing.T) {
	for _, tc := range []struct{ name, want string }{
		{"inst.json", `fid: 12345 label: 0 label: 1 line_id { actions: 1 }`},
		{"inst.pbtext", `fid: 1 fid: 2 label: 0 label: 1 line_id { actions: 1 } feature { name: "a" fid: 3 }`},
		{"inst.dump", `label: 0 label: 1 line_id { actions: 1 } feature { name: "fc_a" fid: 1 } feature { name: "fc_b" fid: 2 } feature { fid: 3 fid: 4 }`},
	} {
		name := tc.name
		inst, err := InstanceFromFile(fixtures.Path(t, name))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		want := &parserpb.Instance{}
		if err := prototext.Unmarshal([]byte(tc.want), want); err != nil {
			t.Fatal(err)
		}
		if !proto.Equal(inst, want) {
			t.Fatalf("%s: %v, want %v", name, inst, want)
		}
		tp, err := RepeatedInstanceTensor(inst, 5)
		if err != nil {
			t.Fatal(err)
		}
		if tp.GetDtype() != 7 || len(tp.GetTensorShape().GetDim()) != 1 || tp.GetTensorShape().GetDim()[0].GetSize() != 5 || len(tp.GetStringVal()) != 5 {
			t.Fatalf("%s: tensor dtype %v shape %v, %d values", name, tp.GetDtype(), tp.GetTensorShape(), len(tp.GetStringVal()))
		}
		ser, _ := proto.Marshal(inst)
		for i, v := range tp.GetStringVal() {
			if !bytes.Equal(v, ser) {
				t.Fatalf("%s: value %d is not the serialized instance", name, i)
			}
		}
		dir := t.TempDir()
		for _, out := range []string{"out.json", "out.pbtext", "out.dump", "out.pb"} {
			p := filepath.Join(dir, out)
			if err := WriteInstanceFile(p, inst); err != nil {
				t.Fatal(err)
			}
			back := &parserpb.Instance{}
			if out == "out.pb" {
				b, rerr := os.ReadFile(p)
				if rerr != nil {
					t.Fatal(rerr)
				}
				err = proto.Unmarshal(b, back)
			} else {
				back, err = InstanceFromFile(p)
			}
			if err != nil || !proto.Equal(back, inst) {
				t.Errorf("%s → %s round trip: %v\n%v\nwant %v", name, out, err, back, inst)
			}
		}
	}
	if _, err := RepeatedInstanceTensor(&parserpb.Instance{}, -1); err == nil {
		t.Error("negative batch accepted")
	}
	missing := filepath.Join(t.TempDir(), "missing.dump")
	if _, err := InstanceFromFile(missing); err == nil || !strings.Contains(err.Error(), "missing.dump") {
		t.Errorf("missing file: %v", err)
	}
}
