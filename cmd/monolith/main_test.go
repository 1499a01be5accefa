package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/protobuf/proto"

	"github.com/monolith-go/monolith/internal/fixtures"
	"github.com/monolith-go/monolith/io/dataset"
	"github.com/monolith-go/monolith/schemas/batch"
	"github.com/monolith-go/monolith/schemas/batch/batchtest"
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

const fixtureConfigs = "../../testdata/example_batch.feature_configs.pbtxt"

// TestShardCommand checks the JSON of every version on the fixture: field names, the fid
// lists cover every configured fid occurrence, and v4's flat list is the union of the rest.
func TestShardCommand(t *testing.T) {
	src := fixtures.Path(t, "example_batch.pbtxt")
	var lists5 map[string][]uint64
	for v := 1; v <= 5; v++ {
		out, stderr, err := runCLI(t, "shard", "--input", src, "--feature-configs", fixtureConfigs, "--ps-num", "2", "--version", fmt.Sprint(v), "--json")
		if err != nil {
			t.Fatalf("v%d: %v\n%s", v, err, stderr)
		}
		var doc map[string]json.RawMessage
		if err := json.Unmarshal([]byte(out), &doc); err != nil {
			t.Fatalf("v%d: %v", v, err)
		}
		want := []string{"fid_list", "fid_offset", "feature_offset", "nfl_offset", "batch_size"}
		switch v {
		case 2, 3:
			want = append(want, "fid_list_row_splits")
		case 4:
			want = append(want, "fid_list_row_splits", "fid_list_table_row_length", "fid_list_shard_row_lenth", "fid_list_emb_row_lenth")
		case 5:
			want = append(want, "fid_list_row_splits", "emb_size", "nfl_size", "feature_size", "fid_size", "fid_list_row_splits_size")
		}
		for _, k := range want {
			if _, ok := doc[k]; !ok {
				t.Errorf("v%d: no %q in %v", v, k, slices.Collect(maps.Keys(doc)))
			}
		}
		var bs int
		_ = json.Unmarshal(doc["batch_size"], &bs)
		var fo [][2]uint32
		_ = json.Unmarshal(doc["fid_offset"], &fo)
		if bs != 51 || len(fo) != 602 {
			t.Errorf("v%d: batch_size %d, %d fid occurrences; want 51 and 602", v, bs, len(fo))
		}
		if v == 5 {
			_ = json.Unmarshal(doc["fid_list"], &lists5)
		}
		if v == 4 {
			var flat []uint64
			_ = json.Unmarshal(doc["fid_list"], &flat)
			var all []uint64
			for _, l := range lists5 {
				all = append(all, l...)
			}
			slices.Sort(all)
			slices.Sort(flat)
			if len(all) != 0 && !slices.Equal(all, flat) {
				t.Errorf("v4 flat list differs from the union of the v5 lists")
			}
		}
	}
	if len(lists5) != 8 || len(lists5["user:0"])+len(lists5["user:1"]) != 110 {
		t.Errorf("v5 lists: %d keys, user table %d fids; want 8 keys, 110", len(lists5), len(lists5["user:0"])+len(lists5["user:1"]))
	}
}

// TestLayoutCommand: the five versions give the same layout tensors and gradients on the
// fixture, in the documented JSON shape.
func TestLayoutCommand(t *testing.T) {
	src := fixtures.Path(t, "example_batch.pbtxt")
	type doc struct {
		Outputs []layoutOutput       `json:"outputs"`
		Grads   map[string][]float32 `json:"grads"`
	}
	var first doc
	for v := 1; v <= 5; v++ {
		for _, par := range []string{"1", "2"} {
			out, stderr, err := runCLI(t, "layout", "--input", src, "--feature-configs", fixtureConfigs, "--ps-num", "3",
				"--version", fmt.Sprint(v), "--embeddings", "synthetic", "--grad", "synthetic", "--parallel", par, "--json")
			if err != nil {
				t.Fatalf("v%d: %v\n%s", v, err, stderr)
			}
			var d doc
			if err := json.Unmarshal([]byte(out), &d); err != nil {
				t.Fatal(err)
			}
			if v == 1 && par == "1" {
				first = d
				names := []string{}
				for _, o := range d.Outputs {
					names = append(names, o.Name)
				}
				if strings.Join(names, ",") != "bias,ctx/0,ctx/1,ctx/2,ctx/3,ctx/4,ctx/5,item_stack,spm_seq,title_seq/0,user_vec" {
					t.Fatalf("output order %v", names)
				}
				if got := d.Outputs[7].Shape; !slices.Equal(got, []int{51, 4, 8}) {
					t.Errorf("item_stack shape %v", got)
				}
				// Row 0 of user_vec, columns 0..7: f_user_id's one fid, embedding columns 1..8.
				continue
			}
			if !reflect.DeepEqual(d, first) {
				t.Fatalf("v%d parallel=%s differs from v1", v, par)
			}
		}
	}
	// Hand check: bias row 0 is the sum over the bias features of their pooled column 0, and
	// with synthetic embeddings column 0 of fid f is f%1009/64.
	rec := fixtureRows(t)
	var want float32
	for _, name := range []string{"f_user_id", "f_user_id-f_page", "f_user_city", "f_goods_id", "f_goods_tags_terms", "f_goods_title", "f_price_reduction"} {
		var s float32
		for _, f := range rec[name] {
			s += float32(f%1009) / 64
		}
		want += s
	}
	for _, name := range []string{"f_spm", "f_page", "f_scm", "f_is_dup", "f_user_ctx_platform", "f_user_ctx_network"} {
		var s float32
		for _, f := range rec[name] {
			s += float32(f%1009) / 64 / float32(len(rec[name]))
		}
		want += s
	}
	if got := first.Outputs[0].Data[0]; math.Abs(float64(got-want)) > 1e-4 {
		t.Errorf("bias row 0 = %v, want %v", got, want)
	}
}

// fixtureRows returns row 0's v2 fids per feature of the fixture.
func fixtureRows(t *testing.T) map[string][]uint64 {
	t.Helper()
	r, err := dataset.Open([]string{fixtures.Path(t, "example_batch.pbtxt")}, dataset.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	rec, err := r.Next(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	out := map[string][]uint64{}
	for _, name := range batch.Features(rec.Schema()) {
		if sp, err := batch.SparseColumn(rec, name); err == nil {
			out[name] = slices.Clone(sp.Row(0))
		}
	}
	return out
}

// procsWith lists the pids whose command line contains s.
func procsWith(s string) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && bytes.Contains(b, []byte(s)) {
			out = append(out, pid)
		}
	}
	return out
}
