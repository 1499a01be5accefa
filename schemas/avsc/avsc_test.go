package avsc

import (
	"encoding/json"
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
