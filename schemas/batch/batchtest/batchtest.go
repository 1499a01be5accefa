// Package batchtest holds test helpers shared by the packages that store or move batches:
// the golden fixture as a batch and its byte-exact check, exact batch comparison, and random
// batches of every source. Tests only.
package batchtest

import (
	"crypto/sha256"
	"encoding/hex"
	"math"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	"github.com/monolith-go/monolith/internal/fixtures"
	"github.com/monolith-go/monolith/schemas/batch"
	"github.com/monolith-go/monolith/schemas/examplepb"
	"github.com/monolith-go/monolith/schemas/prototest"
)

// The golden ExampleBatch re-serializes to FixtureSize bytes with sha256 FixtureSHA (io.md §6.1).
const (
	FixtureSize = 34292
	FixtureSHA  = "a575b4b061e32d96503a48e44a77a414328b7f603db672b2633f806138d8c204"
)

// FixtureRecord converts the golden ExampleBatch into a batch.
func FixtureRecord(t testing.TB, mem memory.Allocator) arrow.RecordBatch {
	t.Helper()
	eb := &examplepb.ExampleBatch{}
	if err := prototext.Unmarshal(fixtures.Read(t, "example_batch.pbtxt"), eb); err != nil {
		t.Fatal(err)
	}
	rec, err := batch.FromExampleBatch(mem, eb)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// CheckFixture checks that rec converts back to the golden ExampleBatch bytes.
func CheckFixture(t testing.TB, rec arrow.RecordBatch) {
	t.Helper()
	eb, err := batch.ToExampleBatch(rec)
	if err != nil {
		t.Fatal(err)
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(eb)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	if len(b) != FixtureSize || hex.EncodeToString(sum[:]) != FixtureSHA {
		t.Fatalf("fixture re-marshals to %d bytes sha256 %x, want %d / %s", len(b), sum, FixtureSize, FixtureSHA)
	}
}

// SameBatch fails the test unless got equals want exactly (NaNs equal), schema included.
func SameBatch(t testing.TB, i int, got, want arrow.RecordBatch) {
	t.Helper()
	if !got.Schema().Equal(want.Schema()) {
		t.Fatalf("batch %d: schema differs:\n got %v\nwant %v", i, got.Schema(), want.Schema())
	}
	if !array.RecordApproxEqual(got, want, array.WithNaNsEqual(true), array.WithAbsTolerance(0)) {
		t.Fatalf("batch %d differs:\n got %v\nwant %v", i, got, want)
	}
}

// RandBatch returns a random batch of up to maxRows rows from a random source.
func RandBatch(t testing.TB, mem memory.Allocator, rng *rand.Rand, maxRows int) arrow.RecordBatch {
	t.Helper()
	rows := rng.IntN(maxRows + 1)
	var rec arrow.RecordBatch
	var err error
	switch rng.IntN(3) {
	case 0:
		rec, err = batch.FromExampleBatch(mem, prototest.ExampleBatch(rng, rows))
	case 1:
		rec, err = batch.FromExamples(mem, prototest.Examples(rng, rows))
	default:
		rec, err = batch.FromInstances(mem, prototest.Instances(rng, rows))
	}
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// ReleaseAll releases records.
func ReleaseAll(recs []arrow.RecordBatch) {
	for _, r := range recs {
		r.Release()
	}
}

// MixedBatches returns batches of every source, a zero-row batch, NaN and infinities, the
// fixture and a batch whose one column is SHARED here and INDIVIDUAL elsewhere.
func MixedBatches(t testing.TB, mem memory.Allocator, rng *rand.Rand) []arrow.RecordBatch {
	t.Helper()
	mk := func(rec arrow.RecordBatch, err error) arrow.RecordBatch {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return rec
	}
	special := &examplepb.ExampleBatch{BatchSize: 2, NamedFeatureList: []*examplepb.NamedFeatureList{
		{Name: "x", Feature: []*examplepb.Feature{
			{Type: &examplepb.Feature_FloatList{FloatList: &examplepb.FloatList{Value: []float32{float32(math.NaN()), float32(math.Inf(-1)), 1.5}}}},
			{Type: &examplepb.Feature_FloatList{FloatList: &examplepb.FloatList{Value: []float32{float32(math.Inf(1))}}}}}},
		{Name: "y", Feature: []*examplepb.Feature{
			{Type: &examplepb.Feature_DoubleValue{DoubleValue: math.Inf(1)}},
			{Type: &examplepb.Feature_DoubleValue{DoubleValue: -math.MaxFloat64}}}},
		{Name: "u", Type: examplepb.FeatureListType_SHARED, Feature: []*examplepb.Feature{
			{Type: &examplepb.Feature_FidV2List{FidV2List: &examplepb.FidList{Value: []uint64{1, 2}}}}}},
	}}
	individual := &examplepb.ExampleBatch{BatchSize: 2, NamedFeatureList: []*examplepb.NamedFeatureList{
		{Name: "u", Feature: []*examplepb.Feature{
			{Type: &examplepb.Feature_FidV2List{FidV2List: &examplepb.FidList{Value: []uint64{3}}}}, {}}},
		{Name: "only_here", Feature: []*examplepb.Feature{{}, {}}},
	}}
	return []arrow.RecordBatch{
		mk(batch.FromExampleBatch(mem, prototest.ExampleBatch(rng, 5))),
		mk(batch.FromExampleBatch(mem, &examplepb.ExampleBatch{DataSourceKey: 3})),
		mk(batch.FromExamples(mem, prototest.Examples(rng, 7))),
		mk(batch.FromExampleBatch(mem, special)),
		mk(batch.FromExampleBatch(mem, individual)),
		mk(batch.FromInstances(mem, prototest.Instances(rng, 6))),
		mk(batch.FromExamples(mem, nil)),
		FixtureRecord(t, mem),
		mk(batch.FromExampleBatch(mem, prototest.ExampleBatch(rng, 1))),
	}
}

// SmallExampleBatch returns a batch with a few columns of different kinds, one SHARED.
func SmallExampleBatch(rows int) *examplepb.ExampleBatch {
	eb := &examplepb.ExampleBatch{BatchSize: int32(rows), DataSourceKey: 5}
	fids := &examplepb.NamedFeatureList{Name: "fids"}
	floats := &examplepb.NamedFeatureList{Name: "floats", Id: 2}
	label := &examplepb.NamedFeatureList{Name: batch.ListLabel}
	shared := &examplepb.NamedFeatureList{Name: "shared", Type: examplepb.FeatureListType_SHARED, Feature: []*examplepb.Feature{
		{Type: &examplepb.Feature_BytesList{BytesList: &examplepb.BytesList{Value: [][]byte{[]byte("s")}}}}}}
	for r := range rows {
		fids.Feature = append(fids.Feature, &examplepb.Feature{Type: &examplepb.Feature_FidV2List{FidV2List: &examplepb.FidList{Value: []uint64{uint64(r) << 40, 7}}}})
		floats.Feature = append(floats.Feature, &examplepb.Feature{Type: &examplepb.Feature_FloatList{FloatList: &examplepb.FloatList{Value: []float32{float32(r), -1.5}}}})
		label.Feature = append(label.Feature, &examplepb.Feature{Type: &examplepb.Feature_FloatList{FloatList: &examplepb.FloatList{Value: []float32{1}}}})
	}
	if rows > 0 {
		eb.NamedFeatureList = []*examplepb.NamedFeatureList{fids, shared, floats, label}
	}
	return eb
}

// ConfigPath returns the absolute path of the committed FeatureConfigs for the fixture,
// testdata/example_batch.feature_configs.pbtxt.
func ConfigPath(t testing.TB) string {
	t.Helper()
	root, err := fixtures.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(root, "testdata", "example_batch.feature_configs.pbtxt")
}
