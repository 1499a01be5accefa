package pbtext_test

import (
	"errors"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	"github.com/monolith-go/monolith/io/pbtext"
	"github.com/monolith-go/monolith/schemas/parserpb"
)

// FuzzReadText checks that text input never panics, that failures are *pbtext.Error,
// and that what parses survives a text round trip.
func FuzzReadText(f *testing.F) {
	for _, s := range []string{
		"fid: 1\nfid: 2\nlabel: 0.0\nlabel: 1.0\nline_id {\n  actions: 1\n}\nfeature {\n  name: \"a\"\n  fid: 3\n}",
		`fid: 1, fid: 2, label: 0.0, line_id { actions: 1 }, feature { name: "a" fid: 3 }`,
		`feature { bytes_value: "\x00\xff" fid_list { value: [1, 2] } }`, "line_id <", "bogus: 1", "",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		inst := &parserpb.Instance{}
		if err := pbtext.ReadText(b, inst); err != nil {
			var pe *pbtext.Error
			if !errors.As(err, &pe) {
				t.Fatalf("ReadText(%q): error %v is not a *pbtext.Error", b, err)
			}
			return
		}
		out, err := prototext.Marshal(inst)
		if err != nil {
			t.Fatalf("re-marshal: %v", err)
		}
		again := &parserpb.Instance{}
		if err := pbtext.ReadText(out, again); err != nil || !proto.Equal(inst, again) {
			t.Fatalf("round trip of %q: %v", b, err)
		}
	})
}

// FuzzReadJSON is FuzzReadText for protobuf JSON.
func FuzzReadJSON(f *testing.F) {
	for _, s := range []string{
		`{"fid": [12345], "label": [0, 1], "line_id": {"actions": [1]}}`,
		`{"feature": [{"name": "a", "fid": ["3"], "bytesValue": ["AP8="]}]}`, `{"label": ["NaN"]}`, "{", "[]",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		inst := &parserpb.Instance{}
		if err := pbtext.ReadJSON(b, inst); err != nil {
			var pe *pbtext.Error
			if !errors.As(err, &pe) {
				t.Fatalf("ReadJSON(%q): error %v is not a *pbtext.Error", b, err)
			}
			return
		}
		out, err := protojson.Marshal(inst)
		if err != nil {
			t.Fatalf("re-marshal: %v", err)
		}
		again := &parserpb.Instance{}
		if err := pbtext.ReadJSON(out, again); err != nil || !proto.Equal(inst, again) {
			t.Fatalf("round trip of %q: %v", b, err)
		}
	})
}
