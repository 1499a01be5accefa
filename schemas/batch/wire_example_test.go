package batch

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/monolith-go/monolith/schemas/examplepb"
	"github.com/monolith-go/monolith/schemas/matrixpb"
	"github.com/monolith-go/monolith/schemas/prototest"
)

// The wire paths alone and the message paths, for the external tests of this package.
var (
	DecodeExamplesWire  = examplePaths.wireOnly
	SlowExamples        = examplePaths.slowOnly
	DecodeInstancesWire = instancePaths.wireOnly
	SlowInstances       = instancePaths.slowOnly
)

// rowPaths are the wire path, the whole decoder and the message path of DecodeExamples or
// DecodeInstances, and the conversion of a batch back to messages.
type rowPaths[M proto.Message] struct {
	wire   func(memory.Allocator, [][]byte, []uint32, []Option) (arrow.RecordBatch, bool)
	decode decodeFunc
	slow   func(memory.Allocator, [][]byte, []uint32, []Option) (arrow.RecordBatch, error)
	back   func(arrow.RecordBatch) ([]M, error)
}

var examplePaths = rowPaths[*examplepb.Example]{decodeExamplesWire, DecodeExamples, slowExamples, ToExamples}

// sameDecodes fails the test unless the wire and message paths both failed with the same
// error or both gave equal batches (schema and its metadata included, NaNs equal). It
// releases the batches.
func sameDecodes(t testing.TB, fast arrow.RecordBatch, ferr error, slow arrow.RecordBatch, serr error) {
	t.Helper()
	if ferr != nil || serr != nil {
		if ferr == nil {
			fast.Release()
		}
		if serr == nil {
			slow.Release()
		}
		if ferr == nil || serr == nil || ferr.Error() != serr.Error() {
			t.Fatalf("errors differ:\nwire    %v\nmessage %v", ferr, serr)
		}
		return
	}
	defer fast.Release()
	defer slow.Release()
	if !fast.Schema().Equal(slow.Schema()) || !fast.Schema().Metadata().Equal(slow.Schema().Metadata()) ||
		!array.RecordApproxEqual(fast, slow, array.WithNaNsEqual(true), array.WithAbsTolerance(0)) {
		t.Fatalf("batches differ:\nwire    %v\nmessage %v", fast, slow)
	}
}

func (p rowPaths[M]) wireOnly(mem memory.Allocator, records [][]byte, keys []uint32) (arrow.RecordBatch, bool) {
	return p.wire(mem, records, keys, nil)
}

func (p rowPaths[M]) slowOnly(mem memory.Allocator, records [][]byte, keys []uint32) (arrow.RecordBatch, error) {
	return p.slow(mem, records, keys, nil)
}

// diff decodes records on both paths and compares the results; it reports whether the
// wire path decoded them itself. Valid batches must also convert back to byte-identical
// messages (float bits included).
func (p rowPaths[M]) diff(t testing.TB, records [][]byte, keys []uint32, opts ...Option) (wire bool) {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	if rec, ok := p.wire(mem, records, keys, opts); ok {
		rec.Release()
		wire = true
	}
	fast, ferr := p.decode(mem, records, keys, opts...)
	slow, serr := p.slow(mem, records, keys, opts)
	if ferr == nil && serr == nil {
		fb, ferr2 := p.back(fast)
		sb, serr2 := p.back(slow)
		switch {
		case (ferr2 == nil) != (serr2 == nil):
			t.Errorf("converting back: wire %v, message %v", ferr2, serr2)
		case ferr2 == nil:
			for i := range fb {
				if !bytes.Equal(mustMarshal(t, fb[i]), mustMarshal(t, sb[i])) {
					t.Errorf("row %d converts back differently:\nwire    %v\nmessage %v", i, fb[i], sb[i])
				}
			}
		}
	}
	sameDecodes(t, fast, ferr, slow, serr)
	return wire
}

// same fails the test unless the decoder and the message path give the same batch or the
// same error.
func (p rowPaths[M]) same(t testing.TB, records [][]byte, keys []uint32) {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	fast, ferr := p.decode(mem, records, keys)
	slow, serr := p.slow(mem, records, keys, nil)
	sameDecodes(t, fast, ferr, slow, serr)
}

// decodeCase is one input of TestDecodeExamples or TestDecodeInstances.
type decodeCase struct {
	name    string
	records [][]byte
	keys    []uint32
	opts    []Option
	wire    bool   // the wire path decodes them itself
	err     string // the error contains this
}

// run checks every case: both paths agree, the wire path decodes the records itself or
// not as the case says, and the decoder gives a batch of a row per record or the error.
func (p rowPaths[M]) run(t *testing.T, cases []decodeCase) {
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if wire := p.diff(t, tc.records, tc.keys, tc.opts...); wire != tc.wire {
				t.Errorf("wire path decoded the records: %v, want %v", wire, tc.wire)
			}
			mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
			defer mem.AssertSize(t, 0)
			rec, err := p.decode(mem, tc.records, tc.keys, tc.opts...)
			if err != nil {
				if tc.err == "" || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %q, want one containing %q", err, tc.err)
				}
				return
			}
			defer rec.Release()
			if tc.err != "" {
				t.Fatalf("no error, want one containing %q", tc.err)
			}
			if rec.NumRows() != int64(len(tc.records)) {
				t.Fatalf("%d rows for %d records", rec.NumRows(), len(tc.records))
			}
		})
	}
}

// lineIDDecodeCases are the records {good, record(b)} for every LineId b of lineIDCases:
// decoded on the wire path when b parses, else failing with parseErr.
func lineIDDecodeCases(t testing.TB, good []byte, record func(testing.TB, []byte) []byte, parseErr string) []decodeCase {
	var cases []decodeCase
	for _, lc := range lineIDCases(t) {
		tc := decodeCase{name: "LineId " + lc.name, records: [][]byte{good, record(t, lc.b)}, wire: lc.ok}
		if !lc.ok {
			tc.err = parseErr
		}
		if strings.Contains(lc.name, "unscannable") {
			tc.wire, tc.err = false, "cannot parse LineId"
		}
		cases = append(cases, tc)
	}
	return cases
}

// allocs checks that the wire path allocates per batch and per column, not per row, on
// the records rows(n) of n rows.
func (p rowPaths[M]) allocs(t *testing.T, rows func(n int) [][]byte) {
	mem := memory.NewGoAllocator()
	allocs := func(n int) float64 {
		records := rows(n)
		return testing.AllocsPerRun(3, func() {
			rec, err := p.decode(mem, records, nil)
			if err != nil {
				t.Fatal(err)
			}
			rec.Release()
		})
	}
	small, large := allocs(64), allocs(1024)
	if perRow := (large - small) / (1024 - 64); perRow > 0.05 {
		t.Errorf("%.0f allocations for 64 rows, %.0f for 1024: %.3f per row", small, large, perRow)
	}
	t.Logf("%.0f allocations for 64 rows, %.0f for 1024", small, large)
}

// recordError checks that the decoder's error for records whose record 2 does not parse is
// a *RecordError naming it, with the parse error the readers report ("parse <what>: ").
func (p rowPaths[M]) recordError(t *testing.T, records [][]byte, what string) {
	_, err := p.decode(memory.NewGoAllocator(), records, nil)
	var re *RecordError
	if !errors.As(err, &re) || re.Record != 2 || !strings.HasPrefix(re.Err.Error(), "parse "+what+": ") {
		t.Fatalf("error %v (%T), want a *RecordError for record 2", err, err)
	}
	if errors.Unwrap(err) != re.Err {
		t.Errorf("RecordError does not unwrap to its parse error")
	}
}

// Feature cells.

// rawField appends one field to a serialized message: a []byte value is length-delimited,
// a uint64 a varint, a uint32 fixed32.
func rawField(b []byte, num protowire.Number, v any) []byte {
	switch v := v.(type) {
	case []byte:
		return protowire.AppendBytes(protowire.AppendTag(b, num, protowire.BytesType), v)
	case uint64:
		return protowire.AppendVarint(protowire.AppendTag(b, num, protowire.VarintType), v)
	case uint32:
		return protowire.AppendFixed32(protowire.AppendTag(b, num, protowire.Fixed32Type), v)
	}
	panic("rawField: unsupported value")
}

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

// kindsExamples covers what the wire path decodes and what it hands to Feature messages:
// every common kind with v1 signature bits, mixed v1/v2 cells, empty lists, unset cells,
// NamedFeatures without a Feature, features missing from rows, all-null columns, ids and
// sorted ids, the reserved names as ordinary features, other kinds, labels, weights,
// LineIds (absent, empty, with unknown fields) and data source keys.
func kindsExamples() []*examplepb.Example {
	nan := float32(math.NaN())
	return []*examplepb.Example{
		{NamedFeature: []*examplepb.NamedFeature{
			{Name: "v1", Id: 3, Feature: prototest.FidV1(1<<60|5, 7, 1023<<54|0x3f<<48|9)},
			{Name: "v2", Feature: prototest.FidV2(1, 2)},
			{Name: "f", Feature: prototest.Floats(1.5, nan, float32(math.Inf(-1)), float32(math.Copysign(0, -1)))},
			{Name: "i", Feature: prototest.Int64s(-1, 1<<40, 0, math.MinInt64)},
			{Name: "empty", Feature: prototest.FidV2()},
			{Name: "unset", Feature: &examplepb.Feature{}},
			{Name: "nofeat"},
			{Name: "mixed", Feature: prototest.FidV1(3 | 1<<50)},
			{Name: "bytes", Feature: prototest.Bytes("a", "b")},
			{Name: "one_bytes", Feature: prototest.Bytes("x")},
			{Name: "dbl", Feature: &examplepb.Feature{Type: &examplepb.Feature_DoubleList{DoubleList: &examplepb.DoubleList{Value: []float64{1, math.NaN()}}}}},
			{Name: "seq", Feature: &examplepb.Feature{Type: &examplepb.Feature_FidV2Lists{FidV2Lists: &examplepb.FidLists{List: []*examplepb.FidList{{Value: []uint64{1}}, {}}}}}},
			{Name: "scalar", Feature: &examplepb.Feature{Type: &examplepb.Feature_Int64Value{Int64Value: -7}}},
			{Name: "sorted", Id: 1, SortedId: 9, Feature: prototest.FidV2(4)},
			{Name: "neg_id", Id: -5, Feature: prototest.Floats()},
			{Name: "", Feature: prototest.Int64s(1)},
			{Name: ListLabel, Feature: prototest.Floats(1)},
			{Name: ListLineID, Feature: prototest.Bytes(string(prototest.LineID(rand.New(rand.NewPCG(1, 1)))))},
			{Name: ListInstanceWeight, Feature: prototest.Floats(0.25)},
		}, Label: []float32{1, 0, nan}, InstanceWeight: 0.5, DataSourceKey: 4,
			LineId: &matrixpb.LineId{Uid: proto.Uint64(1), ReqTime: proto.Int64(-3), Actions: []int32{1, -2}, Rank: proto.Int32(-1),
				SampleRate: proto.Float32(0.5), SpecialStrategies: []int32{4, 5}, IsDraw: proto.Bool(true), UserId: proto.String("u")}},
		{NamedFeature: []*examplepb.NamedFeature{
			{Name: "late", Feature: prototest.Int64s(3)},
			{Name: "f", Feature: prototest.Floats()},
			{Name: "mixed", Feature: prototest.FidV2(4)},
			{Name: "v1", Id: 3},
			{Name: "unset", Feature: &examplepb.Feature{}},
			{Name: "i", Feature: &examplepb.Feature{}},
			{Name: "bytes", Feature: prototest.Bytes()},
			{Name: "nofeat"},
		}, LineId: &matrixpb.LineId{}, InstanceWeight: float32(math.Inf(1))},
		{}, // every feature absent, no label, no LineId
		{NamedFeature: []*examplepb.NamedFeature{{Name: "v2", Feature: prototest.FidV2(1 << 62)}, {Name: "v1", Id: 3, Feature: prototest.FidV1()}},
			Label: []float32{}, DataSourceKey: math.MaxUint32},
	}
}

// lineIDExample returns an Example record with one feature and the given LineId bytes.
func lineIDExample(t testing.TB, lineID []byte) []byte {
	b := mustMarshal(t, &examplepb.Example{NamedFeature: []*examplepb.NamedFeature{{Name: "a", Feature: prototest.FidV2(1)}}, Label: []float32{1}})
	return rawField(b, exLineID, lineID)
}

// lineIDCases are serialized LineIds and whether they are in canonical encoding; ok is
// false when they do not parse.
func lineIDCases(t testing.TB) []struct {
	name      string
	b         []byte
	canonical bool
	ok        bool
} {
	m := func(l *matrixpb.LineId) []byte { return mustMarshal(t, l) }
	unknown := rawField(nil, 300, []byte("x"))
	return []struct {
		name      string
		b         []byte
		canonical bool
		ok        bool
	}{
		{"empty", nil, true, true},
		{"full", m(&matrixpb.LineId{Uid: proto.Uint64(1), ReqTime: proto.Int64(2), ItemId: proto.Uint64(3), Actions: []int32{1, -1},
			Chnid: proto.Int64(-4), PreActions: []int32{7}, SampleRate: proto.Float32(0.25), SpecialStrategies: []int32{-3, 8},
			DeviceType: proto.String("d"), Cid: proto.String("c"), UserId: proto.String("u"), IsDraw: proto.Bool(false),
			Rank: proto.Int32(math.MinInt32), DataSourceName: proto.String("s")}), true, true},
		{"zero values kept", m(&matrixpb.LineId{ReqTime: proto.Int64(0), IsDraw: proto.Bool(false), SampleRate: proto.Float32(0)}), true, true},
		{"prototest", prototest.LineID(rand.New(rand.NewPCG(2, 3))), true, true},
		{"unknown last", cat(m(&matrixpb.LineId{ReqTime: proto.Int64(2)}), unknown), true, true},
		{"unknown group", cat(m(&matrixpb.LineId{ReqTime: proto.Int64(2)}), []byte{0x93, 0x03, 0x08, 0x01, 0x94, 0x03}), true, true},
		{"invalid UTF-8 (proto2 keeps it)", m(&matrixpb.LineId{UserId: proto.String("\xff\xfe")}), true, true},
		{"NaN payload", rawField(nil, LineIDNumSampleRate, uint32(0x7fc00001)), true, true},
		{"unknown first", cat(unknown, m(&matrixpb.LineId{ReqTime: proto.Int64(2)})), false, true},
		{"out of order", cat(m(&matrixpb.LineId{ReqTime: proto.Int64(2)}), m(&matrixpb.LineId{Uid: proto.Uint64(1)})), false, true},
		{"twice", cat(m(&matrixpb.LineId{ReqTime: proto.Int64(2)}), m(&matrixpb.LineId{ReqTime: proto.Int64(3)})), false, true},
		{"long varint", []byte{0x18, 0x81, 0x00}, false, true},
		{"long tag", []byte{0x98, 0x00, 0x01}, false, true},
		{"long length", []byte{0xca, 0x02, 0x81, 0x00, 'u'}, false, true},
		{"rank in 5 bytes", rawField(nil, LineIDNumRank, uint64(math.MaxUint32)), false, true},
		{"bool 2", rawField(nil, LineIDNumIsDraw, uint64(2)), false, true},
		{"actions unpacked", rawField(nil, LineIDNumActions, uint64(1)), false, true},
		{"actions empty", rawField(nil, LineIDNumActions, []byte{}), false, true},
		{"actions long element", rawField(nil, LineIDNumActions, []byte{0x81, 0x00}), false, true},
		{"strategies packed", rawField(nil, LineIDNumSpecialStrategies, []byte{1, 2}), false, true},
		{"strategies split", cat(rawField(nil, LineIDNumSpecialStrategies, uint64(1)), rawField(nil, LineIDNumDeviceType, []byte("d")),
			rawField(nil, LineIDNumSpecialStrategies, uint64(2))), false, true},
		{"uid as varint (unknown)", rawField(nil, LineIDNumUID, uint64(1)), false, true},
		{"actions as fixed32 (unknown, unscannable)", rawField(nil, LineIDNumActions, uint32(1)), false, true},
		{"truncated", []byte{0x18}, false, false},
		{"field number too large", rawField(nil, protowire.MaxValidNumber+1, uint64(1)), false, false},
		{"end group", []byte{0x94, 0x03}, false, false},
	}
}

func TestCanonicalLineID(t *testing.T) {
	var m matrixpb.LineId
	for _, tc := range lineIDCases(t) {
		if got := canonicalLineID(tc.b); got != tc.canonical {
			t.Errorf("%s: canonicalLineID = %v, want %v", tc.name, got, tc.canonical)
		}
		b, err := reencodeLineID(&m, tc.b)
		if (err == nil) != tc.ok {
			t.Errorf("%s: re-encoding error %v, want ok=%v", tc.name, err, tc.ok)
		}
		if tc.canonical && !bytes.Equal(b, tc.b) {
			t.Errorf("%s: canonical but re-encodes differently:\n got %x\nwant %x", tc.name, b, tc.b)
		}
	}
	rng := rand.New(rand.NewPCG(4, 5))
	for range 200 {
		if b := prototest.LineID(rng); !canonicalLineID(b) {
			t.Fatalf("prototest.LineID %x is not canonical", b)
		}
	}
}

// TestDecodeExamples compares the wire and message paths on the repository's Example
// generators, the golden fixture read as Examples, hand-made edge cases and inputs that
// must fall back to the message path or fail.
func TestDecodeExamples(t *testing.T) {
	mk := func(exs ...*examplepb.Example) [][]byte { return marshalAll(t, exs) }
	rng := rand.New(rand.NewPCG(11, 12))
	fixture := mk(fixtureRows(t, ToExamples)...)
	good := mustMarshal(t, &examplepb.Example{NamedFeature: []*examplepb.NamedFeature{{Name: "a", Feature: prototest.FidV2(1)}}})
	nf := func(fields ...[]byte) []byte { return rawField(nil, exNamedFeature, cat(fields...)) }
	name := func(s string) []byte { return rawField(nil, nfName, []byte(s)) }
	feat := func(f *examplepb.Feature) []byte { return rawField(nil, nfFeature, mustMarshal(t, f)) }

	cases := []decodeCase{
		{"one row", mk(kindsExamples()[0]), nil, nil, true, ""},
		{"kinds", mk(kindsExamples()...), nil, nil, true, ""},
		{"kinds without LineId fields", mk(kindsExamples()...), nil, []Option{WithoutLineIDFields()}, true, ""},
		{"kinds with keys", mk(kindsExamples()...), []uint32{9, 0, math.MaxUint32, 1}, nil, true, ""},
		{"prototest 1 row", mk(prototest.Examples(rng, 1)...), nil, nil, true, ""},
		{"prototest 7 rows, no raw", mk(withoutRaw(prototest.Examples(rng, 7))...), nil, nil, true, ""},
		{"prototest 64 rows, no raw", mk(withoutRaw(prototest.Examples(rng, 64))...), nil, nil, true, ""},
		{"prototest 64 rows, no raw, keys", mk(withoutRaw(prototest.Examples(rng, 64))...), make([]uint32, 64), nil, true, ""},
		{"synthetic", mk(syntheticExamples(2, 50)...), nil, nil, true, ""},
		{"golden fixture as Examples", fixture, nil, nil, true, ""},
		{"empty records", [][]byte{nil, {}, nil}, nil, nil, true, ""},
		{"empty NamedFeature", [][]byte{nf(), nf(name("x"))}, nil, nil, true, ""},
		{"repeated scalars, last wins", [][]byte{cat(nf(name("a"), rawField(nil, nfID, uint64(1)), name("b"), rawField(nil, nfID, uint64(2)), feat(prototest.FidV2(1))),
			rawField(nil, exDataSourceKey, uint64(1)), rawField(nil, exDataSourceKey, uint64(1<<33|2)),
			rawField(nil, exInstanceWeight, uint32(1)), rawField(nil, exInstanceWeight, uint32(0x3f800000)))}, nil, nil, true, ""},
		{"fields in any order", [][]byte{cat(rawField(nil, exLabel, []byte{0, 0, 0x80, 0x3f}), rawField(nil, exLineID, []byte{}),
			nf(feat(prototest.Floats(2)), rawField(nil, nfSortedID, uint64(3)), name("z")), good)}, nil, nil, true, ""},

		// Fall back to the message path, with a result.
		{"prototest 7 rows (raw feature)", mk(prototest.Examples(rng, 7)...), nil, nil, false, ""},
		{"raw feature", [][]byte{good, mustMarshal(t, &examplepb.Example{NamedRawFeature: []*examplepb.NamedRawFeature{{Name: "r"}}})}, nil, nil, false, ""},
		{"unknown Example field", [][]byte{good, cat(good, rawField(nil, 50, uint64(1)))}, nil, nil, false, ""},
		{"two Features merge", [][]byte{nf(name("a"), feat(prototest.FidV2(1)), feat(prototest.FidV2(2)))}, nil, nil, false, ""},
		{"two LineIds merge", [][]byte{cat(good, rawField(nil, exLineID, []byte{0x18, 1}), rawField(nil, exLineID, []byte{0x10 | 1, 0, 0, 0, 0, 0, 0, 0, 1}))}, nil, nil, false, ""},
		{"label unpacked", [][]byte{cat(good, rawField(nil, exLabel, uint32(0x3f800000)))}, nil, nil, false, ""},
		{"label twice", [][]byte{cat(good, rawField(nil, exLabel, []byte{0, 0, 0x80, 0x3f}), rawField(nil, exLabel, []byte{0, 0, 0, 0}))}, nil, nil, false, ""},
		{"label as varint (unknown)", [][]byte{cat(good, rawField(nil, exLabel, uint64(1)))}, nil, nil, false, ""},
		{"feature as varint (unknown)", [][]byte{cat(good, rawField(nil, exNamedFeature, uint64(1)))}, nil, nil, false, ""},

		// Errors.
		{"duplicate feature", [][]byte{good, cat(good, good)}, nil, nil, false, `feature "a" appears twice`},
		{"ids differ", mk(&examplepb.Example{NamedFeature: []*examplepb.NamedFeature{{Name: "a", Id: 1}}},
			&examplepb.Example{NamedFeature: []*examplepb.NamedFeature{{Name: "a", Id: 2}}}), nil, nil, false, "differ from earlier rows"},
		{"sorted ids differ", mk(&examplepb.Example{NamedFeature: []*examplepb.NamedFeature{{Name: "a", SortedId: 1}}},
			&examplepb.Example{NamedFeature: []*examplepb.NamedFeature{{Name: "a"}}}), nil, nil, false, "differ from earlier rows"},
		{"kinds clash", mk(&examplepb.Example{NamedFeature: []*examplepb.NamedFeature{{Name: "a", Feature: prototest.FidV2(1)}}},
			&examplepb.Example{NamedFeature: []*examplepb.NamedFeature{{Name: "a", Feature: prototest.Floats(1)}}}), nil, nil, false, "cannot share a column"},
		{"kinds clash, second column", mk(&examplepb.Example{NamedFeature: []*examplepb.NamedFeature{{Name: "b", Feature: prototest.Int64s(1)}, {Name: "a", Feature: prototest.FidV2(1)}}},
			&examplepb.Example{NamedFeature: []*examplepb.NamedFeature{{Name: "a", Feature: prototest.Floats(1)}, {Name: "b", Feature: prototest.Floats(1)}}}), nil, nil, false, `feature "a"`},
		{"bytes and fids clash", mk(&examplepb.Example{NamedFeature: []*examplepb.NamedFeature{{Name: "a", Feature: prototest.Bytes("x")}}},
			&examplepb.Example{NamedFeature: []*examplepb.NamedFeature{{Name: "a", Feature: prototest.FidV2(1)}}}), nil, nil, false, "cannot share a column"},
		{"unknown field in Feature", [][]byte{nf(name("a"), rawField(nil, nfFeature, rawField(mustMarshal(t, prototest.FidV2(1)), 99, uint64(1))))}, nil, nil, false, "unknown fields"},
		{"unknown field in NamedFeature", [][]byte{nf(name("a"), rawField(nil, 9, uint64(1)))}, nil, nil, false, "unknown fields"},
		{"column named like a canonical one", mk(&examplepb.Example{NamedFeature: []*examplepb.NamedFeature{{Name: ColLabel}}}), nil, nil, false, "two columns"},
		{"unscannable LineId", [][]byte{lineIDExample(t, rawField(nil, LineIDNumActions, uint32(1)))}, nil, nil, false, "cannot parse LineId"},
		{"truncated record 2", [][]byte{good, good, good[:len(good)-1], {0xff}}, nil, nil, false, "record 2: parse Example"},
		{"invalid UTF-8 name", [][]byte{good, nf(name("\xff"))}, nil, nil, false, "record 1: parse Example"},
		// The wire path checks a lone name only when it starts a column; every other
		// occurrence is checked where it stands.
		{"invalid UTF-8 name, then a known one", [][]byte{good, nf(name("\xff"), name("a"))}, nil, nil, false, "record 1: parse Example"},
		{"a known name, then an invalid one", [][]byte{good, nf(name("a"), name("\xff"))}, nil, nil, false, "record 1: parse Example"},
		{"invalid UTF-8 between known names", [][]byte{good, nf(name("a"), name("\xff"), name("a"))}, nil, nil, false, "record 1: parse Example"},
		{"label not whole floats", [][]byte{cat(good, rawField(nil, exLabel, []byte{1, 2, 3}))}, nil, nil, false, "record 0: parse Example"},
		{"bad Feature", [][]byte{good, nf(name("a"), rawField(nil, nfFeature, []byte{0x0a, 0x05}))}, nil, nil, false, "record 1: parse Example"},
		{"no records", nil, nil, nil, false, ""},
	}
	examplePaths.run(t, append(cases, lineIDDecodeCases(t, good, lineIDExample, "record 1: parse Example")...))
}

// TestDecodeExamplesKeys: keys replace every record's data_source_key (the readers' header
// override), on the wire path as on the message path.
func TestDecodeExamplesKeys(t *testing.T) {
	examplePaths.keys(t, marshalAll(t, kindsExamples()), []uint32{4, 0, 0, math.MaxUint32}, nil)
}

// keys checks that keys replace the data_source_key of every record on the wire path, and
// that without them row r keeps its own key, own[r], or is null when null[r]; and that the
// decoder rejects too few keys.
func (p rowPaths[M]) keys(t *testing.T, records [][]byte, own []uint32, null []bool) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	keys := make([]uint32, len(records))
	for i := range keys {
		keys[i] = math.MaxUint32 - uint32(i)
	}
	for _, keys := range [][]uint32{nil, keys} {
		rec, ok := p.wire(mem, records, keys, nil)
		if !ok {
			t.Fatal("the wire path did not decode the records")
		}
		col, ok := rec.Column(rec.Schema().FieldIndices(ColDataSourceKey)[0]).(*array.Uint32)
		if !ok {
			t.Fatalf("%s is %s", ColDataSourceKey, rec.Column(rec.Schema().FieldIndices(ColDataSourceKey)[0]).DataType())
		}
		want, wantNull := own, null
		if keys != nil {
			want, wantNull = keys, nil
		}
		for r, k := range want {
			isNull := wantNull != nil && wantNull[r]
			if col.IsNull(r) != isNull || !isNull && col.Value(r) != k {
				t.Errorf("keys %v: row %d data_source_key %d (null %v), want %d (null %v)", keys, r, col.Value(r), col.IsNull(r), k, isNull)
			}
		}
		rec.Release()
	}
	if _, err := p.decode(mem, records, keys[:1]); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("1 data source keys for %d records", len(records))) {
		t.Errorf("short keys: %v", err)
	}
}

// TestDecodeExamplesRecordError: a record that does not parse is a *RecordError naming it,
// with the parse error the readers report.
func TestDecodeExamplesRecordError(t *testing.T) {
	good := mustMarshal(t, &examplepb.Example{Label: []float32{1}})
	examplePaths.recordError(t, [][]byte{good, good, {0x0a, 0x09}}, "Example")
}

// TestDecodeExamplesAllocs: the wire path allocates per batch and per column, not per row.
func TestDecodeExamplesAllocs(t *testing.T) {
	examplePaths.allocs(t, func(n int) [][]byte { return marshalAll(t, syntheticExamples(3, n)) })
}

// splitRecords cuts fuzz input into records, each framed by a varint length; an invalid
// length makes the rest one record.
func splitRecords(data []byte) [][]byte {
	var records [][]byte
	for len(data) > 0 {
		l, n := protowire.ConsumeVarint(data)
		if n < 0 || l > uint64(len(data)-n) {
			return append(records, data)
		}
		records = append(records, data[n:n+int(l)])
		data = data[n+int(l):]
	}
	return records
}

func joinRecords(records [][]byte) []byte {
	var b []byte
	for _, r := range records {
		b = protowire.AppendBytes(b, r)
	}
	return b
}

// FuzzDecodeExamples: the Example wire decoder gives exactly what the message path gives,
// for valid and invalid input alike, with and without the data source key override.
func FuzzDecodeExamples(f *testing.F) {
	rng := rand.New(rand.NewPCG(13, 14))
	for _, rows := range []int{1, 3} {
		f.Add(joinRecords(marshalAll(f, prototest.Examples(rng, rows))), rows == 1)
	}
	f.Add(joinRecords(marshalAll(f, withoutRaw(prototest.Examples(rng, 4)))), false)
	f.Add(joinRecords(marshalAll(f, kindsExamples())), false)
	f.Add(joinRecords(marshalAll(f, kindsExamples()[:2])), true)
	f.Add(joinRecords(marshalAll(f, syntheticExamples(4, 2))), false)
	for _, lc := range lineIDCases(f) {
		f.Add(joinRecords([][]byte{lineIDExample(f, lc.b)}), false)
	}
	f.Add([]byte{}, false)
	examplePaths.fuzz(f)
}

// fuzz runs the fuzz target of DecodeExamples or DecodeInstances: the decoder and the
// message path agree on the records of the input (see splitRecords), with keys overriding
// the messages' own when the second argument says so.
func (p rowPaths[M]) fuzz(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte, override bool) {
		records := splitRecords(data)
		var keys []uint32
		if override {
			keys = make([]uint32, len(records))
			for i := range keys {
				keys[i] = uint32(i)*0x9e3779b9 + 1
			}
		}
		p.same(t, records, keys)
	})
}

// wireCellCase is a serialized Feature cell, its kind, and whether it decodes (KindUnset
// with ok false for a cell the wire path refuses).
type wireCellCase struct {
	name string
	b    []byte
	kind Kind
	ok   bool
}

// wireCellCases are serialized Feature cells around parseWireCell's fast path.
func wireCellCases() []wireCellCase {
	fids := []byte{1, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0}
	cell := func(k Kind, data []byte) []byte {
		return rawField(nil, protowire.Number(k), rawField(nil, 1, data))
	}
	long := make([]byte, 8*20) // 160 bytes: two-byte lengths
	return []wireCellCase{
		{"unset", nil, KindUnset, true},
		{"fid v1", cell(KindFidV1List, fids), KindFidV1List, true},
		{"fid v2", cell(KindFidV2List, fids), KindFidV2List, true},
		{"floats", cell(KindFloatList, fids[:12]), KindFloatList, true},
		{"int64", cell(KindInt64List, []byte{1, 0x80, 1}), KindInt64List, true},
		{"bytes", cell(KindBytesList, []byte("id")), KindBytesList, true},
		{"two-byte lengths", cell(KindFidV1List, long), KindFidV1List, true},
		{"empty list", rawField(nil, protowire.Number(KindFidV1List), []byte{}), KindFidV1List, true},
		{"fids of 7 bytes", cell(KindFidV1List, fids[:7]), KindUnset, false},
		{"floats of 6 bytes", cell(KindFloatList, fids[:6]), KindUnset, false},
		{"int64 cut in a varint", cell(KindInt64List, []byte{0x80}), KindUnset, false},
		{"field 0", []byte{0x02, 0x02, 0x0A, 0x00}, KindUnset, false},
		{"varint wire type", []byte{0x08, 0x02, 0x0A, 0x00}, KindUnset, false},
		{"other field of the list", append([]byte{0x0A, 0x04, 0x12, 0x02}, fids[:2]...), KindUnset, false},
		{"outer length too long", append([]byte{0x0A, 0x05, 0x0A, 0x02}, fids[:2]...), KindUnset, false},
		{"inner length too short", append([]byte{0x0A, 0x04, 0x0A, 0x01}, fids[:2]...), KindUnset, false},
		{"second field after the list", append(cell(KindFidV1List, fids[:8]), 0x10, 0x01), KindUnset, false},
		{"non-minimal outer length", append([]byte{0x0A, 0x8A, 0x00, 0x0A, 0x08}, fids[:8]...), KindFidV1List, true},
	}
}

// TestParseWireCell: the cells above decode to their kind and values, or are refused, on
// the fast path and the general one alike.
func TestParseWireCell(t *testing.T) {
	for _, tc := range wireCellCases() {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := sameWireCell(t, tc.b)
			if ok != tc.ok || (ok && got.kind != tc.kind) {
				t.Fatalf("parseWireCell(%x) = %v %v, want %v %v", tc.b, got.kind, ok, tc.kind, tc.ok)
			}
		})
	}
}

// sameWireCell returns parseWireCell's result for b after checking that parseWireCellAny
// gives the same.
func sameWireCell(t *testing.T, b []byte) (wireCell, bool) {
	t.Helper()
	got, ok := parseWireCell(b)
	want, wok := parseWireCellAny(b)
	if ok != wok || got.kind != want.kind || !bytes.Equal(got.data, want.data) {
		t.Fatalf("parseWireCell(%x) = %v %v %x, parseWireCellAny = %v %v %x", b, ok, got.kind, got.data, wok, want.kind, want.data)
	}
	return got, ok
}
