package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/protobuf/proto"

	"github.com/monolith-go/monolith/internal/batchtest"
	"github.com/monolith-go/monolith/internal/fixtures"
	"github.com/monolith-go/monolith/io/dataset"
	"github.com/monolith-go/monolith/schemas/batch"
)

// runCLI runs the command line and returns stdout, stderr and the error.
func runCLI(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err := run(context.Background(), args, &out, &errOut)
	return out.String(), errOut.String(), err
}

func inspectJSON(t *testing.T, args ...string) inspectReport {
	t.Helper()
	out, stderr, err := runCLI(t, append([]string{"inspect", "--json"}, args...)...)
	if err != nil {
		t.Fatalf("inspect: %v\n%s", err, stderr)
	}
	var rep inspectReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("inspect --json output: %v\n%s", err, out)
	}
	return rep
}

// TestInspectFixture checks the figures io.md §6.1 gives for example_batch.pbtxt.
func TestInspectFixture(t *testing.T) {
	rep := inspectJSON(t, fixtures.Path(t, "example_batch.pbtxt"))
	if rep.Records != 1 || rep.Rows != 51 || len(rep.Features) != 139 || rep.Source != "examplebatch" {
		t.Fatalf("records %d rows %d features %d source %s; want 1, 51, 139, examplebatch", rep.Records, rep.Rows, len(rep.Features), rep.Source)
	}
	var total int64
	nonEmpty, empty := 0, 0
	slotSet := map[int]bool{}
	for name, f := range rep.Features {
		total += f.Fids
		if f.Fids > 0 {
			nonEmpty++
			if len(f.Slots) != 1 {
				t.Errorf("%s uses slots %v; every list uses a single v1 slot", name, f.Slots)
			}
			for _, s := range f.Slots {
				slotSet[s] = true
			}
			if f.Kind != "fid_v1_list" {
				t.Errorf("%s kind %s, want fid_v1_list", name, f.Kind)
			}
		} else if !strings.HasPrefix(name, "__") {
			empty++
		}
	}
	if total != 1094 || nonEmpty != 95 || empty != 42 || len(slotSet) != 95 {
		t.Errorf("fids %d, non-empty lists %d, empty lists %d, distinct slots %d; want 1094, 95, 42, 95", total, nonEmpty, empty, len(slotSet))
	}
	always := map[string]int{"f_user_id": 1, "f_goods_id": 200, "f_spm": 300, "f_spm_1": 301, "f_spm_2": 302, "f_spm_3": 303,
		"f_spm_4": 304, "f_page": 305, "f_scm": 306, "f_is_dup": 310, "f_user_ctx_platform": 52, "f_user_ctx_network": 61, "f_user_id-f_page": 504}
	for name, slot := range always {
		f := rep.Features[name]
		if f == nil || f.RowsWithFids != 51 || !slices.Equal(f.Slots, []int{slot}) {
			t.Errorf("%s = %+v; want 51/51 rows with fids, slot %d", name, f, slot)
		}
	}
	for _, name := range []string{"f_user_age", "f_goods_shop_id", "f_user_os"} {
		if f := rep.Features[name]; f == nil || f.Fids != 0 || f.Kind != "unset" {
			t.Errorf("%s = %+v, want an empty (unset) list", name, f)
		}
	}
	if f := rep.Features["f_goods_title_terms"]; f == nil || !slices.Equal(f.Slots, []int{209}) || f.Fids < 19 {
		t.Errorf("f_goods_title_terms = %+v; want slot 209 with at least 10+9 fids", f)
	}
	for _, name := range []string{"__LABEL__", "__LINE_ID__"} {
		if f := rep.Features[name]; f == nil || f.Rows != 51 || f.Fids != 0 {
			t.Errorf("%s = %+v", name, f)
		}
	}
	// Every slot the spec lists for the non-empty lists.
	want := []int{1, 4, 5, 10, 52, 61, 200, 223, 224, 225, 232, 233, 234, 235, 242, 300, 301, 302, 303, 304, 305, 306, 310}
	for s := 202; s <= 219; s++ {
		want = append(want, s)
	}
	for s := 502; s <= 555; s++ {
		want = append(want, s)
	}
	for _, s := range want {
		if !slotSet[s] {
			t.Errorf("slot %d missing", s)
		}
	}
}

func TestInspectText(t *testing.T) {
	out, _, err := runCLI(t, "inspect", fixtures.Path(t, "example_batch.pbtxt"), fixtures.Path(t, "inst.pbtext"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"files: 2", "source: mixed", "rows: 52", "f_goods_title_terms", "fid_v1_list", "51/51"} {
		if !strings.Contains(out, want) {
			t.Errorf("text output lacks %q:\n%s", want, out)
		}
	}
}

// readBack reads a file back into one ExampleBatch and returns its deterministic bytes.
func readBack(t *testing.T, path string, args ...string) []byte {
	t.Helper()
	o := dataset.Options{Mem: memory.NewGoAllocator()}
	o.Record.PB.HasSortID = true
	for _, a := range args {
		if a == "--lagrangex" {
			o.Record.PB.LagrangeX = true
		}
	}
	r, err := dataset.Open([]string{path}, o)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	rec, err := r.Next(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	eb, err := batch.ToExampleBatch(rec)
	if err != nil {
		t.Fatal(err)
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(eb)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestConvertRoundTrip: the fixture converts to every output format and back without
// loss (the re-serialized ExampleBatch is the 34292-byte golden of io.md §6.1).
func TestConvertRoundTrip(t *testing.T) {
	dir := t.TempDir()
	src := fixtures.Path(t, "example_batch.pbtxt")
	for _, tc := range []struct {
		to, name string
		extra    []string
	}{
		{"tfrecord", "eb.tfrecord", nil},
		{"tfrecord", "eb.tfrecord.gz", nil},
		{"pbstream", "eb.pb", nil},
		{"pbstream", "eb.pb.zst", []string{"--out-lagrangex"}},
		{"pbstream", "eb.pb.snappy", nil},
		{"pbstream", "eb.pb.zlib", nil},
		{"parquet", "eb.parquet", nil},
		{"avro", "eb.avro", nil},
		{"jsonl", "eb.jsonl", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(dir, tc.name)
			args := append([]string{"convert", "--input", src, "--output", out, "--to", tc.to}, tc.extra...)
			if _, stderr, err := runCLI(t, args...); err != nil {
				t.Fatalf("convert: %v\n%s", err, stderr)
			}
			in := tc.extra
			if slices.Contains(tc.extra, "--out-lagrangex") {
				in = []string{"--lagrangex"}
			}
			b := readBack(t, out, in...)
			sum := sha256.Sum256(b)
			if len(b) != batchtest.FixtureSize || hex.EncodeToString(sum[:]) != batchtest.FixtureSHA {
				t.Fatalf("%s: read back %d bytes sha256 %x; want the 34292-byte golden", tc.name, len(b), sum)
			}
			// And back again to a framed file through convert itself.
			again := filepath.Join(dir, tc.name+".back.tfrecord")
			if _, stderr, err := runCLI(t, append([]string{"convert", "--input", out, "--output", again, "--to", "tfrecord"}, in...)...); err != nil {
				t.Fatalf("convert back: %v\n%s", err, stderr)
			}
			if !bytes.Equal(readBack(t, again), b) {
				t.Fatalf("second round trip differs")
			}
		})
	}
}

// TestConvertTypes: ExampleBatch → Example and Instance streams, and the counts survive.
func TestConvertTypes(t *testing.T) {
	dir := t.TempDir()
	src := fixtures.Path(t, "example_batch.pbtxt")
	for _, typ := range []string{"example", "instance"} {
		out := filepath.Join(dir, typ+".pb")
		if _, stderr, err := runCLI(t, "convert", "--input", src, "--output", out, "--to", "pbstream", "--out-type", typ); err != nil {
			t.Fatalf("%s: %v\n%s", typ, err, stderr)
		}
		rep := inspectJSON(t, "--type", typ, out)
		if rep.Records != 51 || rep.Rows != 51 || rep.Source != typ {
			t.Errorf("%s: records %d rows %d source %s", typ, rep.Records, rep.Rows, rep.Source)
		}
		var total int64
		for _, f := range rep.Features {
			total += f.Fids
		}
		if total != 1094 {
			t.Errorf("%s: %d fids, want 1094", typ, total)
		}
	}
	// A double_list cannot become an Instance feature: the conversion fails and leaves no file.
	out := filepath.Join(dir, "lossy.pb")
	pbtxt := filepath.Join(dir, "d.pbtxt")
	if err := os.WriteFile(pbtxt, []byte(`batch_size: 1 named_feature_list { name: "d" feature { double_list { value: 1 } } }`), 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err := runCLI(t, "convert", "--input", pbtxt, "--output", out, "--to", "pbstream", "--out-type", "instance")
	if err == nil || !strings.Contains(err.Error(), `"d"`) {
		t.Errorf("lossy conversion: %v", err)
	}
	if _, statErr := os.Stat(out); !errors.Is(statErr, os.ErrNotExist) {
		t.Errorf("a failed conversion left %s behind", out)
	}
}

func TestUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "no command"},
		{[]string{"frobnicate"}, "unknown command"},
		{[]string{"inspect"}, "no input files"},
		{[]string{"inspect", "--type", "bogus", "x"}, "--type"},
		{[]string{"convert", "--input", "x"}, "needs --input, --output and --to"},
		{[]string{"inspect", "/nonexistent/*.pb"}, "/nonexistent"},
	} {
		_, _, err := runCLI(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want %q", tc.args, err, tc.want)
		}
	}
	if _, _, err := runCLI(t, "frobnicate"); exitCode(err) != 2 {
		t.Errorf("unknown command exit code %d, want 2", exitCode(err))
	}
}

func TestProgressAlways(t *testing.T) {
	_, stderr, err := runCLI(t, "inspect", "--progress", "always", fixtures.Path(t, "example_batch.pbtxt"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stderr, "51 rows") {
		t.Errorf("progress line missing: %q", stderr)
	}
}
