package avsc

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/linkedin/goavro/v2"
)

// TestRowParses: the schema is valid Avro and JSON, and every field has a doc string.
func TestRowParses(t *testing.T) {
	if _, err := goavro.NewCodec(Row); err != nil {
		t.Fatal(err)
	}
	var s struct {
		Name   string `json:"name"`
		Fields []struct {
			Name string `json:"name"`
			Doc  string `json:"doc"`
		} `json:"fields"`
	}
	if err := json.Unmarshal([]byte(Row), &s); err != nil {
		t.Fatal(err)
	}
	want := []string{"batch_schema", "batch_rows", "features", "label", "instance_weight", "line_id", "data_source_key", "extra", "fid_order"}
	if len(s.Fields) != len(want) {
		t.Fatalf("fields = %d, want %d", len(s.Fields), len(want))
	}
	for i, f := range s.Fields {
		if f.Name != want[i] || f.Doc == "" {
			t.Errorf("field %d = %q (doc %q), want %q with a doc", i, f.Name, f.Doc, want[i])
		}
	}
}

// TestEntryDumpParses: the schema is valid Avro and JSON, every field (of both records) has
// a doc string, and the optimizer kinds are the SingleOptimizerDump oneof members in field
// number order.
func TestEntryDumpParses(t *testing.T) {
	codec, err := goavro.NewCodec(EntryDump)
	if err != nil {
		t.Fatal(err)
	}
	type field struct {
		Name string          `json:"name"`
		Doc  string          `json:"doc"`
		Type json.RawMessage `json:"type"`
	}
	var s struct {
		Name   string  `json:"name"`
		Fields []field `json:"fields"`
	}
	if err := json.Unmarshal([]byte(EntryDump), &s); err != nil {
		t.Fatal(err)
	}
	check := func(fields []field, want []string) {
		t.Helper()
		if len(fields) != len(want) {
			t.Fatalf("fields = %d, want %d", len(fields), len(want))
		}
		for i, f := range fields {
			if f.Name != want[i] || f.Doc == "" {
				t.Errorf("field %d = %q (doc %q), want %q with a doc", i, f.Name, f.Doc, want[i])
			}
		}
	}
	check(s.Fields, []string{"table", "id", "embedding", "last_update_ts_sec", "opt"})
	var opt []json.RawMessage
	if err := json.Unmarshal(s.Fields[4].Type, &opt); err != nil || len(opt) != 2 {
		t.Fatalf("opt type: %v (%d branches)", err, len(opt))
	}
	var arr struct {
		Items struct {
			Fields []field `json:"fields"`
		} `json:"items"`
	}
	if err := json.Unmarshal(opt[1], &arr); err != nil {
		t.Fatal(err)
	}
	check(arr.Items.Fields, []string{"kind", "norm", "zero", "accum", "accum_update", "m", "v", "vhat", "n",
		"beta1_power", "beta2_power", "grad_square_sum", "last_update_step", "global_step"})
	var kind struct {
		Symbols []string `json:"symbols"`
	}
	if err := json.Unmarshal(arr.Items.Fields[0].Type, &kind); err != nil {
		t.Fatal(err)
	}
	want := "none adagrad sgd ftrl dynamic_wd_adagrad adadelta adam amsgrad momentum rmsprop rmspropv2 group_ftrl batch_softmax group_adagrad"
	if got := strings.Join(kind.Symbols, " "); got != want {
		t.Errorf("kinds = %s\nwant     %s", got, want)
	}

	// A record with every kind of value encodes and decodes, including a fid ≥ 2^63.
	rec := map[string]any{
		"table":              "user",
		"id":                 int64(-1),
		"embedding":          []any{float32(1), float32(-0.5)},
		"last_update_ts_sec": goavro.Union("long", int64(1234)),
		"opt": goavro.Union("array", []any{map[string]any{
			"kind": "adam", "m": []any{float32(1)}, "v": []any{float32(2)},
			"beta1_power": goavro.Union("float", float32(0.9)), "beta2_power": nil,
			"grad_square_sum": nil, "last_update_step": nil, "global_step": nil,
		}}),
	}
	bin, err := codec.BinaryFromNative(nil, rec)
	if err != nil {
		t.Fatal(err)
	}
	back, rest, err := codec.NativeFromBinary(bin)
	if err != nil || len(rest) != 0 {
		t.Fatalf("decode: %v (%d bytes left)", err, len(rest))
	}
	if m := back.(map[string]any); m["id"] != int64(-1) || m["table"] != "user" {
		t.Errorf("decoded %v", m)
	}
}
