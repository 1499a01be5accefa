package treedump_test

import (
	"bytes"
	"encoding/hex"
	"errors"
	"math"
	"os"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	"github.com/monolith-go/monolith/internal/fixtures"
	"github.com/monolith-go/monolith/io/treedump"
	"github.com/monolith-go/monolith/schemas/examplepb"
	"github.com/monolith-go/monolith/schemas/matrixpb"
	"github.com/monolith-go/monolith/schemas/parserpb"
)

// io.md §6.4: the serialized Instance that inst.dump decodes to.
const instDumpGolden = "1a08000000000000803f 2a03320101 4a10 0a0466635f61 12080100000000000000 " +
	"4a10 0a0466635f62 12080200000000000000 4a12 1210 0300000000000000 0400000000000000"

func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func marshal(t *testing.T, m proto.Message) []byte {
	t.Helper()
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func parse(t *testing.T, text string) (*parserpb.Instance, error) {
	t.Helper()
	return treedump.ParseInstance(strings.NewReader(text), "test.dump")
}

func TestInstDumpGolden(t *testing.T) {
	f, err := os.Open(fixtures.Path(t, "inst.dump"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	inst, err := treedump.ParseInstance(f, "inst.dump")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := marshal(t, inst), unhex(t, instDumpGolden); !bytes.Equal(got, want) {
		t.Errorf("inst.dump serializes to\n%x\nwant\n%x\n(decoded: %v)", got, want, inst)
	}
	if feats := inst.GetFeature(); len(feats) != 3 || feats[2].Name != nil {
		t.Errorf("features = %v; want 3, the third without a name", feats)
	}

	// Encoding writes the fixture back, with the quote the fixture lost on `label":`.
	enc, err := treedump.Encode(inst)
	if err != nil {
		t.Fatal(err)
	}
	want := bytes.Replace(fixtures.Read(t, "inst.dump"), []byte("\nlabel\":"), []byte("\n\"label\":"), 1)
	if !bytes.Equal(enc, want) {
		t.Errorf("Encode(inst.dump) =\n%s\nwant\n%s", enc, want)
	}
	var buf bytes.Buffer
	if err := treedump.WriteInstance(&buf, inst); err != nil || !bytes.Equal(buf.Bytes(), enc) {
		t.Errorf("WriteInstance = %q, %v; want the Encode output", buf.Bytes(), err)
	}
}

func ptr[T any](v T) *T { return &v }

func TestRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		inst *parserpb.Instance
	}{
		{"empty", &parserpb.Instance{}},
		{"every Instance field", &parserpb.Instance{
			Fid:            []uint64{1, math.MaxUint64},
			Value:          []float32{0.5, -1.25e-7},
			Label:          []float32{0, 1, float32(math.Inf(1)), float32(math.NaN())},
			InstanceWeight: ptr(float32(2)),
			LabelTag:       []*parserpb.LabelTag{{Key: ptr(int32(-1)), Val: ptr(float32(0.25))}, {}},
			NextFid:        []uint64{7},
			DataSourceKey:  ptr(uint32(math.MaxUint32)),
			LineId: &matrixpb.LineId{
				Uid: ptr(uint64(9)), ReqTime: ptr(int64(-5)), ItemId: ptr(uint64(1) << 63),
				Actions: []int32{1, 2}, Chnid: ptr(int64(3)), PreActions: []int32{4},
				SampleRate: ptr(float32(0.5)), SpecialStrategies: []int32{6, 7},
				DeviceType: ptr("ios"), Cid: ptr(""), UserId: ptr(`quote " backslash \ tab	newline
unicode é 中 \u2028`), IsDraw: ptr(true), Rank: ptr(int32(-3)), DataSourceName: ptr("123"),
			},
			Feature: []*matrixpb.Feature{
				{Name: ptr("fc_bytes"), BytesValue: [][]byte{{}, {0, 0xff, 'a'}, []byte("1234")}},
				{Name: ptr("fc_seq"), FidList: []*matrixpb.Fixed64List{{Value: []uint64{1, 2}}, {}, {Value: []uint64{3}}},
					FloatList: []*matrixpb.FloatList{{Value: []float32{1}}},
					Int64List: []*matrixpb.Int64List{{Value: []int64{-1}}},
					BytesList: []*matrixpb.BytesList{{Value: [][]byte{[]byte("x")}}}},
				{Name: ptr(""), FloatValue: []float32{float32(math.Copysign(0, -1)), 1e38}, Int64Value: []int64{math.MinInt64}},
				{},
				{Fid: []uint64{5}},
			},
		}},
		{"nameless features with fids then a root fid", &parserpb.Instance{
			Feature: []*matrixpb.Feature{{Fid: []uint64{1}}, {Fid: []uint64{2}}},
			Fid:     []uint64{3},
		}},
	}
	// The deprecated dense field, set without naming the deprecated Go field.
	withDense := &parserpb.Instance{}
	if err := prototext.Unmarshal([]byte("dense: [3, 4] fid: 1"), withDense); err != nil {
		t.Fatal(err)
	}
	tests = append(tests, struct {
		name string
		inst *parserpb.Instance
	}{"deprecated dense", withDense})
	for _, tc := range tests {
		b, err := treedump.Encode(tc.inst)
		if err != nil {
			t.Errorf("%s: Encode: %v", tc.name, err)
			continue
		}
		got, err := parse(t, string(b))
		if err != nil {
			t.Errorf("%s: decode:\n%s\n%v", tc.name, b, err)
			continue
		}
		if !proto.Equal(got, tc.inst) {
			t.Errorf("%s: round trip =\n%v\nwant\n%v\ntext:\n%s", tc.name, got, tc.inst, b)
		}
	}
}

func TestNotRepresentable(t *testing.T) {
	withUnknown := &matrixpb.LineId{}
	if err := proto.Unmarshal(unhex(t, "5a0161"), withUnknown); err != nil { // field 11 = "a"
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		inst    *parserpb.Instance
		mention string
	}{
		{"unknown fields", &parserpb.Instance{LineId: withUnknown}, "line_id has unknown fields"},
		{"nameless sequence features", &parserpb.Instance{Feature: []*matrixpb.Feature{
			{FidList: []*matrixpb.Fixed64List{{Value: []uint64{1}}}},
			{FidList: []*matrixpb.Fixed64List{{Value: []uint64{2}}}},
		}}, "ambiguous"},
		{"root fid after a nameless feature without fid", &parserpb.Instance{
			Feature: []*matrixpb.Feature{{FloatValue: []float32{1}}},
			Fid:     []uint64{5},
		}, "ambiguous"},
		{"invalid UTF-8 string", &parserpb.Instance{Feature: []*matrixpb.Feature{{Name: ptr("\xff")}}},
			"feature[0].name"},
	}
	for _, tc := range tests {
		b, err := treedump.Encode(tc.inst)
		if !errors.Is(err, treedump.ErrNotRepresentable) || !strings.Contains(err.Error(), tc.mention) {
			t.Errorf("%s: Encode = %q, %v; want ErrNotRepresentable mentioning %q", tc.name, b, err, tc.mention)
		}
		if err := treedump.WriteInstance(&bytes.Buffer{}, tc.inst); !errors.Is(err, treedump.ErrNotRepresentable) {
			t.Errorf("%s: WriteInstance error = %v", tc.name, err)
		}
	}
	// With names, sequence features are unambiguous: the name closes the nested list.
	named := &parserpb.Instance{Feature: []*matrixpb.Feature{
		{Name: ptr("a"), FidList: []*matrixpb.Fixed64List{{Value: []uint64{1}}}},
		{Name: ptr("b"), FidList: []*matrixpb.Fixed64List{{Value: []uint64{2}}}},
	}}
	if _, err := treedump.Encode(named); err != nil {
		t.Errorf("named sequence features: %v", err)
	}
}

func TestDecodeForms(t *testing.T) {
	tests := []struct {
		name, text string
		want       string // the Instance in text format
	}{
		{"no root line, CRLF, blank lines, JSON names",
			"\"lineId\":\r\n\r\n  \"sampleRate\": 0.5  \r\n\"instanceWeight\": \"2\"\r\n",
			`instance_weight: 2 line_id { sample_rate: 0.5 }`},
		{"single quotes and lenient quotes",
			"'line_id':\n\"user_id\": 'abc'\ndevice_type\": \"x\n",
			`line_id { user_id: "abc" device_type: "x" }`},
		{"a key the element already has returns to the root (reference rule)",
			"\"feature\":\n0:\n\"fid\":\n0: \"1\"\n\"fid\":\n0: \"2\"\n",
			`feature { fid: 1 } fid: 2`},
		{"numeric-looking strings stay strings", "\"line_id\":\n\"user_id\": \"0123\"\n\"cid\": 42\n",
			`line_id { user_id: "0123" cid: "42" }`},
		{"quoted empty string is a value", "\"line_id\":\n\"cid\": \"\"\n", `line_id { cid: "" }`},
		{"empty scalar value leaves the field unset", "\"instance_weight\":\n\"fid\":\n0: 1\n", `fid: 1`},
		{"empty containers", "\"line_id\":\n\"feature\":\n0:\n1:\n", `line_id {} feature {} feature {}`},
		{"special floats", "\"label\":\n0: \"NaN\"\n1: \"-Infinity\"\n2: inf\n3: 1e-45\n",
			`label: [nan, -inf, inf, 1e-45]`},
		{"bytes in base64 forms", "\"feature\":\n0:\n\"bytes_value\":\n0: \"AP8=\"\n1: \"AP8\"\n2: \"_-8\"\n3: \"\"\n",
			`feature { bytes_value: ["\x00\xff", "\x00\xff", "\xff\xef", ""] }`},
		{"JSON escapes", "\"line_id\":\n\"user_id\": \"a\\\"b\\u00e9\\n\"\n", `line_id { user_id: "a\"b\u00e9\n" }`},
		{"values may contain colons", "\"line_id\":\n\"user_id\": \"a:b: c\"\n", `line_id { user_id: "a:b: c" }`},
	}
	for _, tc := range tests {
		got, err := parse(t, tc.text)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		want := &parserpb.Instance{}
		if err := prototext.Unmarshal([]byte(tc.want), want); err != nil {
			t.Fatalf("%s: bad expectation: %v", tc.name, err)
		}
		if !proto.Equal(got, want) {
			t.Errorf("%s: got %v; want %v", tc.name, got, want)
		}
	}
}

func TestDecodeErrors(t *testing.T) {
	tests := []struct {
		name, text string
		line       int
		mention    string
	}{
		{"missing colon", "\"root\":\n\"fid\"\n", 2, `want "key: value"`},
		{"unknown field", "\"root\":\n\"feature\":\n0:\n\"bogus\": 1\n", 4, `unknown field "bogus"`},
		{"field twice", "\"label\":\n0: 1\n\"label\":\n", 3, `"label" given twice`},
		{"index gap", "\"fid\":\n0: \"1\"\n2: \"2\"\n", 3, "index 2 continues no open list"},
		{"index without list", "0: 1\n", 1, "index 0 continues no open list"},
		{"element without list", "\"fid\":\n0:\n", 2, "index 0 opens no element"},
		{"value on a list", "\"fid\": 1\n", 1, "takes indexed lines"},
		{"value on a message", "\"line_id\": 1\n", 1, "takes nested lines"},
		{"bad number", "\"fid\":\n0: \"-1\"\n", 2, `bad fixed64 value "\"-1\""`},
		{"int32 overflow", "\"line_id\":\n\"rank\": 2147483648\n", 2, "out of range"},
		{"float32 overflow", "\"label\":\n0: 1e39\n", 2, "out of range"},
		{"bad bool", "\"line_id\":\n\"is_draw\": maybe\n", 2, "bad bool value"},
		{"bad base64", "\"feature\":\n0:\n\"bytes_value\":\n0: \"!!\"\n", 4, "bad bytes value"},
		{"empty key", "\"\": 1\n", 1, "empty key"},
		{"root later", "\"fid\":\n\"root\":\n", 2, `unknown field "root"`},
		{"huge index", "\"fid\":\n99999999999999999999999: 1\n", 2, "bad list index"},
	}
	for _, tc := range tests {
		_, err := parse(t, tc.text)
		var de *treedump.Error
		if !errors.As(err, &de) || !errors.Is(err, treedump.ErrSyntax) {
			t.Errorf("%s: error %v; want a *treedump.Error wrapping ErrSyntax", tc.name, err)
			continue
		}
		if de.File != "test.dump" || de.Line != tc.line || !strings.Contains(err.Error(), tc.mention) ||
			!strings.HasPrefix(err.Error(), "io/treedump: test.dump:") {
			t.Errorf("%s: error %q (line %d); want test.dump line %d mentioning %q", tc.name, err, de.Line, tc.line,
				tc.mention)
		}
	}
}

// TestGenericMessages exercises Unmarshal and Encode on Monolith's Example types:
// enums, oneofs, and the whole example_batch.pbtxt fixture.
func TestGenericMessages(t *testing.T) {
	eb := &examplepb.ExampleBatch{}
	if err := prototext.Unmarshal(fixtures.Read(t, "example_batch.pbtxt"), eb); err != nil {
		t.Fatal(err)
	}
	eb.NamedFeatureList[0].Type = examplepb.FeatureListType_SHARED
	eb.NamedFeatureList[1].Type = examplepb.FeatureListType(42) // unknown enum number
	b, err := treedump.Encode(eb)
	if err != nil {
		t.Fatal(err)
	}
	got := &examplepb.ExampleBatch{}
	if err := treedump.Unmarshal("example_batch.dump", b, got); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(got, eb) {
		t.Errorf("ExampleBatch does not survive a tree-dump round trip")
	}
	if !bytes.Contains(b, []byte(`"type": "SHARED"`)) || !bytes.Contains(b, []byte(`"type": 42`)) {
		t.Errorf("enums are not written as names (or numbers when unknown)")
	}

	// A second member of a oneof cannot join the same message.
	err = treedump.Unmarshal("x", []byte("\"fid_v1_list\":\n\"value\":\n0: \"1\"\n\"float_value\": 2\n"), &examplepb.Feature{})
	if !errors.Is(err, treedump.ErrSyntax) || !strings.Contains(err.Error(), "oneof type") {
		t.Errorf("oneof conflict: error = %v", err)
	}
	// Map fields are not supported either way.
	ex := &examplepb.FeatureMap{}
	if err := treedump.Unmarshal("x", []byte("\"feature_map\":\n"), ex); !errors.Is(err, treedump.ErrSyntax) {
		t.Errorf("map decode: error = %v", err)
	}
	ex.FeatureMap = map[string]*examplepb.Feature{"a": {}}
	if _, err := treedump.Encode(ex); !errors.Is(err, treedump.ErrNotRepresentable) {
		t.Errorf("map encode: error = %v", err)
	}
}
