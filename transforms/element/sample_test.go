package element_test

import (
	"bytes"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/monolith-go/monolith/schemas/batch/batchtest"
	"github.com/monolith-go/monolith/transforms/element"
)

// TestElementEncodersOutsideSamples: called other than by the SDK's size sampler (here
// directly; TestRecordCoderOnPrism and TestShardedCoderOnPrism cover a runner's
// transport), the registered encoders encode as EncodeRecord and EncodeSharded do.
func TestElementEncodersOutsideSamples(t *testing.T) {
	fix := batchtest.FixtureRecord(t, memory.DefaultAllocator)
	want, err := element.EncodeRecord(fix)
	if err != nil {
		t.Fatal(err)
	}
	got, err := element.EncodeRecordElement(fix)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("EncodeRecordElement: %d bytes, %v; EncodeRecord: %d bytes", len(got), err, len(want))
	}
	var s *element.Sharded
	if err := (&shardFn{Config: batchtest.ConfigPath(t)}).ProcessElement(fix, func(x *element.Sharded) { s = x }); err != nil {
		t.Fatal(err)
	}
	want, err = element.EncodeSharded(s)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := element.EncodeShardedElement(s); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("EncodeShardedElement: %d bytes, %v; EncodeSharded: %d bytes", len(got), err, len(want))
	}
	g := element.TableGrads{Table: "t", Fids: []uint64{1, 2}, Offsets: []int32{0, 2, 4}, Grads: []float32{1, 2, 3, 4}}
	want, err = element.EncodeTableGrads(g)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := element.EncodeTableGradsElement(g); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("EncodeTableGradsElement: %d bytes, %v; EncodeTableGrads: %d bytes", len(got), err, len(want))
	}
}
