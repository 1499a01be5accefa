package pbtext_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/monolith-go/monolith/io/pbtext"
	"github.com/monolith-go/monolith/schemas/examplepb"
	"github.com/monolith-go/monolith/schemas/parserpb"
)

func TestFormatOf(t *testing.T) {
	tests := map[string]pbtext.Format{
		"a/inst.pbtext": pbtext.Text, "b.pbtxt": pbtext.Text, "c.TEXTPROTO": pbtext.Text, "d.txtpb": pbtext.Text,
		"e.txt": pbtext.Text, "f.prototxt": pbtext.Text, "inst.json": pbtext.JSON, "x.JSON": pbtext.JSON,
	}
	for path, want := range tests {
		if got, err := pbtext.FormatOf(path); err != nil || got != want {
			t.Errorf("FormatOf(%q) = %v, %v; want %v", path, got, err, want)
		}
	}
	for _, path := range []string{"inst.dump", "x.pb", "noext"} {
		if _, err := pbtext.FormatOf(path); !errors.Is(err, pbtext.ErrUnknownFormat) {
			t.Errorf("FormatOf(%q) error = %v; want ErrUnknownFormat", path, err)
		}
	}
	if pbtext.Text.String() != "text" || pbtext.JSON.String() != "json" || pbtext.Format(9).String() != "Format(9)" {
		t.Errorf("Format.String: %v %v %v", pbtext.Text, pbtext.JSON, pbtext.Format(9))
	}
}

func TestErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		name, body   string
		line, column int
		mention      string
	}{
		{"unknown.pbtxt", "fid: 1\nbogus: 2\n", 2, 1, "unknown field: bogus"},
		{"syntax.pbtext", "fid: 1\nline_id {\n  actions: x\n}", 3, 12, "int32 type: x"},
		{"unclosed.pbtxt", "line_id {\n", 0, 0, "unexpected EOF"}, // no position from the library
		{"badtype.json", "{\n  \"fid\": [1],\n  \"label\": \"zero\"\n}", 3, 12, ""},
		{"unknown.json", "{\"fid\": [1], \"nope\": 2}", 1, 14, "nope"},
		{"trailing.json", "{\"fid\": [1]} x", 1, 14, ""},
	}
	for _, tc := range tests {
		path := write(tc.name, tc.body)
		_, err := pbtext.ReadInstanceFile(path)
		var pe *pbtext.Error
		if !errors.As(err, &pe) {
			t.Errorf("%s: error %v; want *pbtext.Error", tc.name, err)
			continue
		}
		if pe.File != path || pe.Line != tc.line || pe.Column != tc.column ||
			!strings.HasPrefix(err.Error(), "io/pbtext: "+path+":") || !strings.Contains(err.Error(), tc.mention) {
			t.Errorf("%s: error %q (line %d col %d); want %s:%d:%d mentioning %q",
				tc.name, err, pe.Line, pe.Column, path, tc.line, tc.column, tc.mention)
		}
		if strings.Contains(err.Error(), "(line") || strings.Contains(err.Error(), "proto:") {
			t.Errorf("%s: error %q repeats the library's prefix or position", tc.name, err)
		}
	}

	// In-memory input names the format instead of a file.
	err := pbtext.ReadText([]byte("bogus: 1"), &parserpb.Instance{})
	if err == nil || !strings.HasPrefix(err.Error(), "io/pbtext: text input:1:1:") {
		t.Errorf("ReadText error = %v", err)
	}
	err = pbtext.ReadJSON([]byte("{"), &examplepb.Example{})
	if err == nil || !strings.HasPrefix(err.Error(), "io/pbtext: json input:") {
		t.Errorf("ReadJSON error = %v", err)
	}
	if _, err := pbtext.ReadExampleFile(filepath.Join(dir, "missing.pbtxt")); !errors.Is(err, fs.ErrNotExist) ||
		!strings.Contains(err.Error(), "missing.pbtxt") {
		t.Errorf("missing file: error = %v", err)
	}
	if _, err := pbtext.ReadExampleBatchFile(write("batch.bin", "")); !errors.Is(err, pbtext.ErrUnknownFormat) {
		t.Errorf("unknown extension: error = %v", err)
	}
	if err := pbtext.Unmarshal("x", nil, pbtext.Format(0), &parserpb.Instance{}); !errors.Is(err, pbtext.ErrUnknownFormat) {
		t.Errorf("Unmarshal(Format(0)) error = %v", err)
	}
}

func TestReadReplacesContent(t *testing.T) {
	inst := &parserpb.Instance{Fid: []uint64{9}, Label: []float32{5}}
	if err := pbtext.ReadText([]byte("fid: 1"), inst); err != nil {
		t.Fatal(err)
	}
	if len(inst.GetFid()) != 1 || inst.GetFid()[0] != 1 || len(inst.GetLabel()) != 0 {
		t.Errorf("after ReadText: %v; want only fid 1", inst)
	}
	ex, err := pbtext.ReadExampleFile(func() string {
		p := filepath.Join(t.TempDir(), "ex.pbtxt")
		if err := os.WriteFile(p, []byte(`named_feature { name: "f" feature { int64_value: 3 } } label: 1`), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}())
	if err != nil || ex.GetNamedFeature()[0].GetFeature().GetInt64Value() != 3 {
		t.Errorf("ReadExampleFile = %v, %v", ex, err)
	}
}
