package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/monolith-go/monolith/io/dataset"
	"github.com/monolith-go/monolith/kernels/featcfg"
	"github.com/monolith-go/monolith/schemas/batch"
)

// runGenCLI runs `monolith gen` with args and returns its stdout.
func runGenCLI(t *testing.T, args ...string) string {
	t.Helper()
	var out, errOut bytes.Buffer
	if err := runGen(context.Background(), args, &out, &errOut); err != nil {
		t.Fatalf("gen %v: %v\n%s", args, err, errOut.String())
	}
	return out.String()
}

// genData is what a generated data set reads back as.
type genData struct {
	rows, records int64
	features      map[string]bool // feature columns seen
	shared        map[string]bool // run-end encoded (SHARED) columns seen
	fids          map[string][]uint64
	labels        []float32
}

func readGen(t *testing.T, dir, typ string) genData {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "part-*"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no files in %s: %v", dir, err)
	}
	slices.Sort(files)
	src, err := batch.ParseSource(typ)
	if err != nil {
		t.Fatal(err)
	}
	o := dataset.Options{Type: src, Mem: memory.NewGoAllocator()}
	o.Record.PB.HasSortID = true
	r, err := dataset.Open(files, o)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	d := genData{features: map[string]bool{}, shared: map[string]bool{}, fids: map[string][]uint64{}}
	for {
		rec, err := r.Next(context.Background())
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range batch.Features(rec.Schema()) {
			d.features[name] = true
			if sp, err := batch.SparseColumn(rec, name); err == nil {
				d.shared[name] = d.shared[name] || sp.Shared
				for i := range int(rec.NumRows()) {
					d.fids[name] = append(d.fids[name], sp.Row(i)...)
				}
			}
		}
		l, err := batch.DenseColumn(rec, batch.ColLabel)
		if err != nil {
			t.Fatal(err)
		}
		for i := range int(rec.NumRows()) {
			d.labels = append(d.labels, l.Row(i)...)
		}
		rec.Release()
	}
	st := r.Stats()
	d.rows, d.records = st.Rows, st.Records
	return d
}

// TestGen: gen writes the configured data set in every message type; it reads back with
// io/dataset (rows, records, individual and shared features, labels), the FeatureConfigs it
// writes loads and names only features present in the data, and monolith shard and layout
// run on the output.
func TestGen(t *testing.T) {
	for _, tc := range []struct {
		typ      string
		extra    []string
		records  int64
		features []string
		shared   []string
	}{
		{"examplebatch", []string{"--codec", "gzip"}, 6,
			[]string{"f_1", "f_2", "f_3", "f_4", "f_5", "f_6", "f_7", "f_8", "f_dense"}, []string{"f_7", "f_8"}},
		{"example", []string{"--framing", "tfrecord", "--codec", "zstd", "--fid-version", "2"}, 500,
			[]string{"f_1", "f_6", "f_7", "f_8", "f_dense"}, nil},
		{"instance", []string{"--codec", "snappy"}, 500,
			[]string{"fc_slot_1", "fc_slot_6", "fc_slot_7", "fc_slot_8", "fc_dense"}, nil},
		{"instance", []string{"--fid-version", "2", "--naming", "f", "--framing", "tf"}, 500,
			[]string{"f_1", "f_8", "f_dense"}, nil},
	} {
		t.Run(tc.typ+strings.Join(tc.extra, ""), func(t *testing.T) {
			dir := t.TempDir()
			data := filepath.Join(dir, "data")
			fcPath := filepath.Join(dir, "fc.pbtxt")
			args := append([]string{"--out", data, "--type", tc.typ, "--rows", "500", "--files", "2", "--batch-rows", "100",
				"--features", "6", "--shared", "2", "--dense", "4", "--tasks", "2", "--seed", "7", "--positive-rate", "0.5",
				"--feature-configs-out", fcPath}, tc.extra...)
			out := runGenCLI(t, args...)
			if !strings.HasPrefix(out, "gen: 2 files, ") || !strings.Contains(out, " 500 rows, ") || strings.Count(out, "\n") != 1 {
				t.Errorf("summary %q", out)
			}
			d := readGen(t, data, tc.typ)
			if d.rows != 500 || d.records != tc.records {
				t.Errorf("read %d rows in %d records; want 500 in %d", d.rows, d.records, tc.records)
			}
			if len(d.features) != 9 { // 6 + 2 sparse, 1 dense
				t.Errorf("features %v", d.features)
			}
			for _, f := range tc.features {
				if !d.features[f] {
					t.Errorf("feature %s missing; have %v", f, d.features)
				}
			}
			for f, sh := range d.shared {
				if sh != slices.Contains(tc.shared, f) {
					t.Errorf("feature %s shared=%v", f, sh)
				}
			}
			if len(d.labels) != 1000 {
				t.Errorf("%d labels, want 2 per row", len(d.labels))
			}
			cfg, err := featcfg.LoadFile(fcPath)
			if err != nil {
				t.Fatal(err)
			}
			if len(cfg.Features) != 8 || len(cfg.Layouts) != 3 {
				t.Errorf("FeatureConfigs: %d features, %d layouts", len(cfg.Features), len(cfg.Layouts))
			}
			for _, f := range cfg.Features {
				if !d.features[f.Name] || len(d.fids[f.Name]) == 0 {
					t.Errorf("configured feature %s has no data", f.Name)
				}
			}
			first, _ := filepath.Glob(filepath.Join(data, "part-00000*"))
			for _, cmd := range []string{"shard", "layout"} {
				var so, se bytes.Buffer
				if err := run(context.Background(), []string{cmd, "--input", first[0], "--type", tc.typ, "--feature-configs", fcPath, "--ps-num", "2", "--json"}, &so, &se); err != nil {
					t.Fatalf("%s on the output: %v\n%s", cmd, err, se.String())
				}
			}
		})
	}
}

// TestGenDeterminism: the same seed gives byte-identical files (and FeatureConfigs); a
// different seed gives different data.
func TestGenDeterminism(t *testing.T) {
	gen := func(seed string) (map[string][]byte, []byte) {
		dir := t.TempDir()
		runGenCLI(t, "--out", dir, "--rows", "300", "--files", "3", "--features", "4", "--shared", "1", "--codec", "zstd",
			"--seed", seed, "--feature-configs-out", filepath.Join(dir, "fc.pbtxt"))
		files, _ := filepath.Glob(filepath.Join(dir, "part-*"))
		out := map[string][]byte{}
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			out[filepath.Base(f)] = b
		}
		fc, err := os.ReadFile(filepath.Join(dir, "fc.pbtxt"))
		if err != nil {
			t.Fatal(err)
		}
		return out, fc
	}
	a, fcA := gen("11")
	b, fcB := gen("11")
	c, _ := gen("12")
	if len(a) != 3 {
		t.Fatalf("%d files", len(a))
	}
	for name, x := range a {
		if !bytes.Equal(x, b[name]) {
			t.Errorf("%s differs between two runs with seed 11", name)
		}
		if bytes.Equal(x, c[name]) {
			t.Errorf("%s is the same for seeds 11 and 12", name)
		}
	}
	if !bytes.Equal(fcA, fcB) {
		t.Errorf("FeatureConfigs text differs between runs")
	}
	for _, want := range []string{`feature_configs { key: "f_1" value { table: "t00" slice_dims: 1 slice_dims: 8 } }`,
		`feature_configs { key: "f_4" value { table: "t00" pooling_type: MEAN slice_dims: 1 slice_dims: 8 } }`,
		`feature_configs { key: "f_5" value { table: "shared" slice_dims: 1 slice_dims: 8 } }`,
		"out_type: ADDN", "shape { dims: -1 dims: 32 }"} {
		if !strings.Contains(string(fcA), want) {
			t.Errorf("FeatureConfigs lacks %q:\n%s", want, fcA)
		}
	}
}

func TestGenUsage(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "--out"},
		{[]string{"--out", dir, "--type", "bogus"}, "--type"},
		{[]string{"--out", dir, "--codec", "lz4"}, "--codec"},
		{[]string{"--out", dir, "--codec", "auto"}, "--codec auto"},
		{[]string{"--out", dir, "--framing", "csv"}, "--framing"},
		{[]string{"--out", dir, "--naming", "x"}, "--naming"},
		{[]string{"--out", dir, "--rows", "0"}, "rows"},
		{[]string{"--out", dir, "--fids-min", "5", "--fids-max", "2"}, "fids per cell"},
		{[]string{"--out", dir, "--type", "instance", "--naming", "f"}, "fc_slot"},
		{[]string{"--out", dir, "--feature-configs-out", filepath.Join(dir, "fc"), "--layout-dim", "-2"}, "layout dim"},
		{[]string{"--out", dir, "extra"}, "no arguments"},
		{[]string{"--bogus"}, "bogus"},
	} {
		var so, se bytes.Buffer
		err := runGen(context.Background(), tc.args, &so, &se)
		if err == nil || !errors.Is(err, errUsage) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want a usage error mentioning %q", tc.args, err, tc.want)
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("usage errors left %d files in %s", len(ents), dir)
	}
}
