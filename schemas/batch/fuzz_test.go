package batch

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/protobuf/proto"

	"github.com/monolith-go/monolith/schemas/examplepb"
	"github.com/monolith-go/monolith/schemas/prototest"
)

// FuzzExampleBatch: any ExampleBatch either converts and comes back byte-identical, or is
// rejected with an error; it never panics and never leaks Arrow memory.
func FuzzExampleBatch(f *testing.F) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, rows := range []int{1, 3} {
		b, _ := marshalDet.Marshal(prototest.ExampleBatch(rng, rows))
		f.Add(b)
	}
	f.Add([]byte{0x18, 0x02, 0x0a, 0x05, 0x0a, 0x01, 'a', 0x18, 0x01})
	f.Fuzz(func(t *testing.T, data []byte) {
		eb := &examplepb.ExampleBatch{}
		if proto.Unmarshal(data, eb) != nil {
			return
		}
		mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
		defer mem.AssertSize(t, 0)
		rec, err := FromExampleBatch(mem, eb)
		if err != nil {
			return
		}
		defer rec.Release()
		back, err := ToExampleBatch(rec)
		if err != nil {
			t.Fatalf("converted batch does not convert back: %v", err)
		}
		want, _ := marshalDet.Marshal(eb)
		got, _ := marshalDet.Marshal(back)
		if !bytes.Equal(got, want) {
			t.Fatalf("round trip differs:\n got %x\nwant %x", got, want)
		}
		// The other directions must not panic either.
		if rec.NumRows() <= 4096 {
			_, _ = ToExamples(rec)
			_, _ = ToInstances(rec)
		}
	})
}

// FuzzDecodeExampleBatch: the wire decoder gives exactly what the message path gives, for
// valid and invalid input alike.
func FuzzDecodeExampleBatch(f *testing.F) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, rows := range []int{1, 2, 5} {
		b, _ := marshalDet.Marshal(prototest.ExampleBatch(rng, rows))
		f.Add(b)
	}
	fid := &examplepb.Feature{Type: &examplepb.Feature_FidV1List{FidV1List: &examplepb.FidList{Value: []uint64{1 << 60, 3}}}}
	flt := &examplepb.Feature{Type: &examplepb.Feature_FloatList{FloatList: &examplepb.FloatList{Value: []float32{1, 2}}}}
	i64 := &examplepb.Feature{Type: &examplepb.Feature_Int64List{Int64List: &examplepb.Int64List{Value: []int64{-1, 5}}}}
	b, _ := marshalDet.Marshal(&examplepb.ExampleBatch{BatchSize: 2, DataSourceKey: 7, NamedFeatureList: []*examplepb.NamedFeatureList{
		{Name: "a", Id: 3, Feature: []*examplepb.Feature{fid, {}}}, {Name: "b", Feature: []*examplepb.Feature{flt, flt}},
		{Name: "c", Feature: []*examplepb.Feature{i64, i64}}, {Name: "s", Type: examplepb.FeatureListType_SHARED, Feature: []*examplepb.Feature{fid}}}})
	f.Add(b)
	f.Fuzz(func(t *testing.T, data []byte) {
		mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
		defer mem.AssertSize(t, 0)
		fast, ferr := DecodeExampleBatch(mem, data)
		slow, serr := slowExampleBatch(mem, data, nil)
		sameDecodes(t, fast, ferr, slow, serr)
	})
}

// FuzzFromRows: rows decoded from arbitrary JSON either rebuild a batch or fail with an
// error; never a panic or leaked memory. (DecodeSchema is reached through the first row.)
func FuzzFromRows(f *testing.F) {
	mem := memory.NewGoAllocator()
	rng := rand.New(rand.NewPCG(5, 6))
	for _, mk := range []func() (arrow.RecordBatch, error){
		func() (arrow.RecordBatch, error) { return FromExampleBatch(mem, prototest.ExampleBatch(rng, 2)) },
		func() (arrow.RecordBatch, error) { return FromExamples(mem, prototest.Examples(rng, 3)) },
		func() (arrow.RecordBatch, error) { return FromInstances(mem, prototest.Instances(rng, 3)) },
	} {
		rec, err := mk()
		if err != nil {
			f.Fatal(err)
		}
		rows, err := Rows(rec)
		rec.Release()
		if err != nil {
			f.Fatal(err)
		}
		b, _ := json.Marshal(rows)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var rows []Row
		if json.Unmarshal(data, &rows) != nil {
			return
		}
		if len(rows) > 0 && rows[0].BatchRows > 1000 {
			return // an honest writer's row count; big claims only cost time here
		}
		mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
		defer mem.AssertSize(t, 0)
		rec, err := FromRows(mem, rows)
		if err != nil {
			return
		}
		defer rec.Release()
		// A rebuilt batch must be readable.
		if _, err := readColumns(rec); err != nil {
			t.Fatalf("FromRows built an unreadable batch: %v", err)
		}
	})
}

// FuzzParseWireCell: parseWireCell's fast path for one-byte tags and lengths gives the
// same cell as parseWireCellAny, which decodes any encoding, for any bytes.
func FuzzParseWireCell(f *testing.F) {
	for _, tc := range wireCellCases() {
		f.Add(tc.b)
	}
	f.Fuzz(func(t *testing.T, b []byte) { sameWireCell(t, b) })
}
