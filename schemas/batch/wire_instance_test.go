package batch

import (
	"bytes"
	"math"
	"math/rand/v2"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/monolith-go/monolith/internal/fixtures"
	"github.com/monolith-go/monolith/io/treedump"
	"github.com/monolith-go/monolith/schemas/matrixpb"
	"github.com/monolith-go/monolith/schemas/parserpb"
	"github.com/monolith-go/monolith/schemas/prototest"
)

var instancePaths = rowPaths[*parserpb.Instance]{decodeInstancesWire, DecodeInstances, slowInstances, ToInstances}

// Instance Feature builders.

func fidFeat(name string, v ...uint64) *matrixpb.Feature {
	return &matrixpb.Feature{Name: proto.String(name), Fid: v}
}

func floatFeat(name string, v ...float32) *matrixpb.Feature {
	return &matrixpb.Feature{Name: proto.String(name), FloatValue: v}
}

func int64Feat(name string, v ...int64) *matrixpb.Feature {
	return &matrixpb.Feature{Name: proto.String(name), Int64Value: v}
}

// kindsInstances covers what the wire path decodes and what it hands to messages: slot fids
// with v1 signature bits, in canonical order, out of order and scattered; value lists, empty
// or absent; named fid, float and int64 features, unset and empty ones, features missing
// from rows, all-null columns; bytes and list-of-list features (message columns);
// unmodelled fields (dense, label_tag, next_fid); labels, weights and keys present or not;
// LineIds (absent, empty, full).
func kindsInstances() []*parserpb.Instance {
	nan := float32(math.NaN())
	s := func(slot, low uint64) uint64 { return slot<<54 | low }
	return []*parserpb.Instance{
		{Fid: []uint64{s(1, 5), s(1, 0x3f<<48|6), s(2, 7), s(1023, 8)}, Value: []float32{1.5, nan, float32(math.Inf(-1))},
			Label: []float32{1, 0, nan}, InstanceWeight: proto.Float32(0.5), DataSourceKey: proto.Uint32(4),
			LineId: &matrixpb.LineId{Uid: proto.Uint64(1), ReqTime: proto.Int64(-3), Actions: []int32{1, -2}, Rank: proto.Int32(-1),
				SampleRate: proto.Float32(0.5), SpecialStrategies: []int32{4, 5}, IsDraw: proto.Bool(true), UserId: proto.String("u")},
			Feature: []*matrixpb.Feature{
				fidFeat("fc_v2", 1, 1<<63|2),
				floatFeat("fc_f", 1.5, nan, float32(math.Copysign(0, -1))),
				int64Feat("fc_i", -1, 1<<40, 0, math.MinInt64),
				{Name: proto.String("fc_unset")},
				{Name: proto.String("fc_bytes"), BytesValue: [][]byte{[]byte("a"), {}}},
				{Name: proto.String("fc_seq"), FidList: []*matrixpb.Fixed64List{{Value: []uint64{1}}, {}}},
				{Name: proto.String("fc_fl"), FloatList: []*matrixpb.FloatList{{Value: []float32{1}}}},
				{Name: proto.String("fc_il"), Int64List: []*matrixpb.Int64List{{Value: []int64{-1}}}},
				{Name: proto.String("fc_bl"), BytesList: []*matrixpb.BytesList{{Value: [][]byte{[]byte("y")}}}},
				fidFeat(""),
				fidFeat(ListLabel, 3),
			}},
		// Out of order (slot 2 before slot 1), with a new slot; fewer features.
		{Fid: []uint64{s(2, 1), s(1, 2), s(1, 3), s(700, 4)}, Label: []float32{},
			LineId: &matrixpb.LineId{}, InstanceWeight: proto.Float32(float32(math.Inf(1))),
			Feature: []*matrixpb.Feature{
				{Name: proto.String("fc_i")},
				floatFeat("fc_f"),
				fidFeat("late", 9),
				{Name: proto.String("fc_bytes")},
			}},
		{}, // every feature absent, no label, no LineId
		// Scattered: slot 1's fids are not adjacent.
		{Fid: []uint64{s(1, 1), s(2, 2), s(1, 3), s(2, 4), s(3, 5)}, Value: []float32{2}, DataSourceKey: proto.Uint32(math.MaxUint32),
			Dense: []float32{1, 2}, LabelTag: []*parserpb.LabelTag{{Key: proto.Int32(1), Val: proto.Float32(2)}}, NextFid: []uint64{7},
			Feature: []*matrixpb.Feature{fidFeat("fc_v2"), int64Feat("fc_i", 5)}},
		// Canonical again, with an unmodelled field alone.
		{Fid: []uint64{s(1, 9), s(2, 8)}, NextFid: []uint64{1}},
	}
}

// instanceRecord returns an Instance record with a few fields and the given LineId bytes.
func instanceRecord(t testing.TB, lineID []byte) []byte {
	b := mustMarshal(t, &parserpb.Instance{Fid: []uint64{1<<54 | 1}, Label: []float32{1}, Feature: []*matrixpb.Feature{fidFeat("a", 1)}})
	return rawField(b, inLineID, lineID)
}

// instanceFixtures returns the golden Instances (inst.pbtext, inst.json, inst.dump) and the
// golden ExampleBatch converted to Instances, read in place.
func instanceFixtures(t testing.TB) map[string][]*parserpb.Instance {
	txt, js, dump := &parserpb.Instance{}, &parserpb.Instance{}, &parserpb.Instance{}
	if err := prototext.Unmarshal(fixtures.Read(t, "inst.pbtext"), txt); err != nil {
		t.Fatal(err)
	}
	if err := protojson.Unmarshal(fixtures.Read(t, "inst.json"), js); err != nil {
		t.Fatal(err)
	}
	if err := treedump.Unmarshal("inst.dump", fixtures.Read(t, "inst.dump"), dump); err != nil {
		t.Fatal(err)
	}
	eb := fixtureRows(t, ToInstances)
	return map[string][]*parserpb.Instance{
		"inst.pbtext": {txt}, "inst.json": {js}, "inst.dump": {dump},
		"all three": {txt, js, dump}, "example_batch.pbtxt": eb,
	}
}

// TestDecodeInstances compares the wire and message paths on the golden fixtures, the
// repository's Instance generators, hand-made edge cases and inputs that must fall back to
// the message path or fail.
func TestDecodeInstances(t *testing.T) {
	mk := func(ins ...*parserpb.Instance) [][]byte { return marshalAll(t, ins) }
	rng := rand.New(rand.NewPCG(21, 22))
	good := mustMarshal(t, &parserpb.Instance{Fid: []uint64{1 << 54}, Feature: []*matrixpb.Feature{fidFeat("a", 1)}})
	feat := func(fields ...[]byte) []byte { return rawField(nil, inFeature, cat(fields...)) }
	name := func(s string) []byte { return rawField(nil, mfName, []byte(s)) }
	fids := func(v ...uint64) []byte {
		var b []byte
		for _, f := range v {
			b = protowire.AppendFixed64(b, f)
		}
		return b
	}
	floats := func(v ...float32) []byte {
		var b []byte
		for _, f := range v {
			b = protowire.AppendFixed32(b, math.Float32bits(f))
		}
		return b
	}
	fx := instanceFixtures(t)

	cases := []decodeCase{
		{"one row", mk(kindsInstances()[0]), nil, nil, true, ""},
		{"kinds", mk(kindsInstances()...), nil, nil, true, ""},
		{"kinds without LineId fields", mk(kindsInstances()...), nil, []Option{WithoutLineIDFields()}, true, ""},
		{"kinds with keys", mk(kindsInstances()...), []uint32{9, 0, math.MaxUint32, 1, 2}, nil, true, ""},
		{"prototest 1 row", mk(prototest.Instances(rng, 1)...), nil, nil, true, ""},
		{"prototest 7 rows", mk(prototest.Instances(rng, 7)...), nil, nil, true, ""},
		{"prototest 64 rows", mk(prototest.Instances(rng, 64)...), nil, nil, true, ""},
		{"prototest 64 rows, keys", mk(prototest.Instances(rng, 64)...), make([]uint32, 64), nil, true, ""},
		{"synthetic", mk(syntheticInstances(2, 50)...), nil, nil, true, ""},
		{"golden inst.pbtext", mk(fx["inst.pbtext"]...), nil, nil, true, ""},
		{"golden inst.json", mk(fx["inst.json"]...), nil, nil, true, ""},
		{"golden inst.dump", mk(fx["inst.dump"]...), nil, nil, true, ""},
		{"golden Instances together", mk(fx["all three"]...), nil, nil, true, ""},
		{"golden ExampleBatch as Instances", mk(fx["example_batch.pbtxt"]...), nil, nil, true, ""},
		{"empty records", [][]byte{nil, {}, nil}, nil, nil, true, ""},
		{"empty Feature", [][]byte{feat(), feat(name("x"))}, nil, nil, true, ""},
		{"empty packed fields", [][]byte{cat(rawField(nil, inFid, []byte{}), rawField(nil, inValue, []byte{}), rawField(nil, inLabel, []byte{}),
			feat(name("a"), rawField(nil, mfFid, []byte{}), rawField(nil, mfFloatValue, floats(1)), rawField(nil, mfInt64Value, []byte{})))}, nil, nil, true, ""},
		{"repeated scalars, last wins", [][]byte{cat(feat(name("a"), name("b"), rawField(nil, mfFid, fids(1))),
			rawField(nil, inDataSourceKey, uint64(1)), rawField(nil, inDataSourceKey, uint64(1<<33|2)),
			rawField(nil, inInstanceWeight, uint32(1)), rawField(nil, inInstanceWeight, uint32(0x3f800000)))}, nil, nil, true, ""},
		{"fields in any order", [][]byte{cat(rawField(nil, inDataSourceKey, uint64(7)), feat(rawField(nil, mfFid, fids(3)), name("z")),
			rawField(nil, inLineID, []byte{}), rawField(nil, inLabel, floats(1)), rawField(nil, inValue, floats(2)), rawField(nil, inFid, fids(5<<54, 4<<54)))},
			nil, nil, true, ""},
		{"invalid UTF-8 name (proto2 keeps it)", [][]byte{good, feat(name("\xff"), rawField(nil, mfFid, fids(1)))}, nil, nil, true, ""},
		{"unknown Instance fields", [][]byte{good, cat(good, rawField(nil, 50, uint64(1)), rawField(nil, 60, []byte("x")))}, nil, nil, true, ""},
		{"unknown group", [][]byte{cat(good, []byte{0x93, 0x03, 0x08, 0x01, 0x94, 0x03})}, nil, nil, true, ""},
		{"known field as another wire type (unknown)", [][]byte{cat(good, rawField(nil, 7, uint64(1)), rawField(nil, 8, uint64(1)))}, nil, nil, true, ""},
		{"empty dense (nothing unmodelled)", [][]byte{cat(good, rawField(nil, 6, []byte{}))}, nil, nil, true, ""},
		{"unpacked dense", [][]byte{cat(good, rawField(nil, 6, uint32(0x3f800000)))}, nil, nil, true, ""},
		{"two Features with values", [][]byte{feat(name("a"), rawField(nil, mfFid, fids(1))), feat(name("a"), rawField(nil, mfFid, fids(1)), rawField(nil, mfFid, fids(2)))}, nil, nil, true, ""},
		{"unset and bytes cells", mk(&parserpb.Instance{Feature: []*matrixpb.Feature{{Name: proto.String("b")}}},
			&parserpb.Instance{Feature: []*matrixpb.Feature{{Name: proto.String("b"), BytesValue: [][]byte{[]byte("x")}}}}), nil, nil, true, ""},
		{"unpacked fid cell beside packed ones", [][]byte{feat(name("a"), rawField(nil, mfFid, fids(1))),
			feat(name("a"), protowire.AppendFixed64(protowire.AppendTag(nil, mfFid, protowire.Fixed64Type), 2))}, nil, nil, true, ""},

		// Fall back to the message path, with a result.
		{"fid unpacked", [][]byte{good, cat(good, protowire.AppendFixed64(protowire.AppendTag(nil, inFid, protowire.Fixed64Type), 3<<54))}, nil, nil, false, ""},
		{"fid twice", [][]byte{cat(rawField(nil, inFid, fids(1<<54)), rawField(nil, inFid, fids(2<<54)))}, nil, nil, false, ""},
		{"value twice", [][]byte{cat(rawField(nil, inValue, floats(1)), rawField(nil, inValue, floats(2)))}, nil, nil, false, ""},
		{"label twice", [][]byte{cat(good, rawField(nil, inLabel, floats(1)), rawField(nil, inLabel, floats(0)))}, nil, nil, false, ""},
		{"label unpacked", [][]byte{cat(good, rawField(nil, inLabel, uint32(0x3f800000)))}, nil, nil, false, ""},
		{"two LineIds merge", [][]byte{cat(good, rawField(nil, inLineID, []byte{0x18, 1}), rawField(nil, inLineID, []byte{0x10 | 1, 0, 0, 0, 0, 0, 0, 0, 1}))}, nil, nil, false, ""},
		{"weight as varint (unknown)", [][]byte{cat(good, rawField(nil, inInstanceWeight, uint64(1)))}, nil, nil, false, ""},
		{"feature as varint (unknown)", [][]byte{cat(good, rawField(nil, inFeature, uint64(1)))}, nil, nil, false, ""},

		// Errors.
		{"duplicate feature", [][]byte{good, cat(good, feat(name("a")))}, nil, nil, false, `feature "a" appears twice`},
		{"named feature then value", mk(&parserpb.Instance{Feature: []*matrixpb.Feature{fidFeat("value", 1)}}, &parserpb.Instance{Value: []float32{1}}),
			nil, nil, false, `"value" collides`},
		{"value then named feature", mk(&parserpb.Instance{Value: []float32{1}}, &parserpb.Instance{Feature: []*matrixpb.Feature{floatFeat("value", 1)}}),
			nil, nil, false, `feature "value" appears twice or collides`},
		{"value and named feature in one row", mk(&parserpb.Instance{Value: []float32{1}, Feature: []*matrixpb.Feature{floatFeat("value", 1)}}),
			nil, nil, false, `feature "value" appears twice or collides`},
		{"named feature then slot", mk(&parserpb.Instance{Feature: []*matrixpb.Feature{fidFeat("fc_slot_3", 1)}}, &parserpb.Instance{Fid: []uint64{3 << 54}}),
			nil, nil, false, "share a name (D5)"},
		{"slot then named feature", mk(&parserpb.Instance{Fid: []uint64{3 << 54}}, &parserpb.Instance{Feature: []*matrixpb.Feature{fidFeat("fc_slot_3", 1)}}),
			nil, nil, false, "collides with a slot"},
		{"two value fields", mk(&parserpb.Instance{Feature: []*matrixpb.Feature{{Name: proto.String("a"), Fid: []uint64{1}, FloatValue: []float32{1}}}}),
			nil, nil, false, "sets 2 value fields"},
		{"kinds clash", mk(&parserpb.Instance{Feature: []*matrixpb.Feature{fidFeat("a", 1)}}, &parserpb.Instance{Feature: []*matrixpb.Feature{floatFeat("a", 1)}}),
			nil, nil, false, "cannot share a column"},
		{"kinds clash, message column", mk(&parserpb.Instance{Feature: []*matrixpb.Feature{fidFeat("a", 1)}},
			&parserpb.Instance{Feature: []*matrixpb.Feature{{Name: proto.String("a"), BytesValue: [][]byte{{1}}}}}), nil, nil, false, "cannot share a column"},
		{"unknown field in Feature", [][]byte{feat(name("a"), rawField(nil, 99, uint64(1)))}, nil, nil, false, "unknown fields"},
		{"unknown field in a list of Feature", [][]byte{feat(name("a"), rawField(nil, 6, rawField(nil, 5, uint64(1))))}, nil, nil, false, "unknown fields"},
		{"column named like a canonical one", mk(&parserpb.Instance{Feature: []*matrixpb.Feature{fidFeat(ColLabel, 1)}}), nil, nil, false, "two columns"},
		{"unscannable LineId", [][]byte{instanceRecord(t, rawField(nil, LineIDNumActions, uint32(1)))}, nil, nil, false, "cannot parse LineId"},
		{"truncated record 2", [][]byte{good, good, good[:len(good)-1], {0xff}}, nil, nil, false, "record 2: parse Instance"},
		{"fids not whole", [][]byte{good, rawField(nil, inFid, []byte{1, 2, 3})}, nil, nil, false, "record 1: parse Instance"},
		{"value not whole floats", [][]byte{rawField(nil, inValue, []byte{1, 2, 3})}, nil, nil, false, "record 0: parse Instance"},
		{"label not whole floats", [][]byte{cat(good, rawField(nil, inLabel, []byte{1, 2, 3}))}, nil, nil, false, "record 0: parse Instance"},
		{"bad Feature", [][]byte{good, feat(name("a"), rawField(nil, mfFid, []byte{1}))}, nil, nil, false, "record 1: parse Instance"},
		{"bad int64 in Feature", [][]byte{good, feat(name("a"), rawField(nil, mfInt64Value, []byte{0x80}))}, nil, nil, false, "record 1: parse Instance"},
		{"bad label_tag", [][]byte{good, cat(good, rawField(nil, 7, []byte{0x08}))}, nil, nil, false, "record 1: parse Instance"},
		{"field number too large", [][]byte{cat(good, rawField(nil, protowire.MaxValidNumber+1, uint64(1)))}, nil, nil, false, "record 0: parse Instance"},
		{"end group", [][]byte{cat(good, []byte{0x94, 0x03})}, nil, nil, false, "record 0: parse Instance"},
		{"no records", nil, nil, nil, false, ""},
	}
	instancePaths.run(t, append(cases, lineIDDecodeCases(t, good, instanceRecord, "record 1: parse Instance")...))
}

// TestDecodeInstancesCorrupt: truncated and altered records fail (or decode) the same way on
// both paths: every prefix of a record, and every byte of it (every fourth with -short)
// replaced by a few values, each after a good record (so that errors name record 1).
func TestDecodeInstancesCorrupt(t *testing.T) {
	fx := instanceFixtures(t)
	sets := map[string][][]byte{
		"kinds":       marshalAll(t, kindsInstances()),
		"prototest":   marshalAll(t, prototest.Instances(rand.New(rand.NewPCG(23, 24)), 3)),
		"inst.pbtext": marshalAll(t, fx["inst.pbtext"]),
		"inst.dump":   marshalAll(t, fx["inst.dump"]),
		"fixture":     marshalAll(t, fx["example_batch.pbtxt"][:1]),
	}
	for name, records := range sets {
		t.Run(name, func(t *testing.T) {
			for r, rec := range records {
				prev := records[(r+len(records)-1)%len(records)]
				for cut := range len(rec) {
					instancePaths.same(t, [][]byte{prev, rec[:cut]}, nil)
				}
				step := 1
				if testing.Short() {
					step = 4
				}
				for i := 0; i < len(rec); i += step {
					for _, v := range []byte{0x00, 0xff, rec[i] ^ 0x04} {
						c := bytes.Clone(rec)
						c[i] = v
						instancePaths.same(t, [][]byte{prev, c}, nil)
					}
				}
			}
		})
	}
}

// TestDecodeInstancesKeys: keys replace every record's data_source_key (the readers' header
// override), on the wire path as on the message path; without them an absent key is null.
func TestDecodeInstancesKeys(t *testing.T) {
	instancePaths.keys(t, marshalAll(t, kindsInstances()), []uint32{4, 0, 0, math.MaxUint32, 0}, []bool{false, true, true, false, true})
}

// TestDecodeInstancesRecordError: a record that does not parse is a *RecordError naming it,
// with the parse error the readers report.
func TestDecodeInstancesRecordError(t *testing.T) {
	good := mustMarshal(t, &parserpb.Instance{Label: []float32{1}})
	instancePaths.recordError(t, [][]byte{good, good, {0x4a, 0x09}}, "Instance")
}

// TestDecodeInstancesAllocs: the wire path allocates per batch and per column, not per row.
func TestDecodeInstancesAllocs(t *testing.T) {
	instancePaths.allocs(t, func(n int) [][]byte { return marshalAll(t, syntheticInstances(3, n)) })
}

// FuzzDecodeInstances: the Instance wire decoder gives exactly what the message path gives,
// for valid and invalid input alike, with and without the data source key override.
func FuzzDecodeInstances(f *testing.F) {
	rng := rand.New(rand.NewPCG(25, 26))
	for _, rows := range []int{1, 3} {
		f.Add(joinRecords(marshalAll(f, prototest.Instances(rng, rows))), rows == 1)
	}
	f.Add(joinRecords(marshalAll(f, kindsInstances())), false)
	f.Add(joinRecords(marshalAll(f, kindsInstances()[:2])), true)
	f.Add(joinRecords(marshalAll(f, syntheticInstances(4, 2))), false)
	for name, ins := range instanceFixtures(f) {
		if name != "example_batch.pbtxt" {
			f.Add(joinRecords(marshalAll(f, ins)), false)
		}
	}
	for _, lc := range lineIDCases(f) {
		f.Add(joinRecords([][]byte{instanceRecord(f, lc.b)}), false)
	}
	f.Add([]byte{}, false)
	instancePaths.fuzz(f)
}
