package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/monolith-go/monolith/io/dataset"
	"github.com/monolith-go/monolith/io/synth"
	"github.com/monolith-go/monolith/kernels/metrics"
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
			cfg, err := loadFeatureConfig(fcPath)
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

// readPlantedEval reads the eval set of a planted data set: the fids of every row, feature
// by feature in SparseFeatures order (f_1..f_<features>), and the first label.
func readPlantedEval(t *testing.T, dir string, features int) (fids [][][]uint64, labels []float32) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "eval", "part-*.tfrecord"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no eval files in %s: %v", dir, err)
	}
	slices.Sort(files)
	r, err := dataset.Open(files, dataset.Options{Type: batch.SourceExampleBatch, Mem: memory.NewGoAllocator()})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for {
		rec, err := r.Next(context.Background())
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		cols := make([]batch.Sparse, features)
		for f := range cols {
			if cols[f], err = batch.SparseColumn(rec, "f_"+strconv.Itoa(f+1)); err != nil {
				t.Fatal(err)
			}
		}
		l, err := batch.DenseColumn(rec, batch.ColLabel)
		if err != nil {
			t.Fatal(err)
		}
		for i := range int(rec.NumRows()) {
			row := make([][]uint64, features)
			for f, col := range cols {
				row[f] = slices.Clone(col.Row(i))
			}
			fids = append(fids, row)
			labels = append(labels, l.Row(i)[0])
		}
		rec.Release()
	}
	return fids, labels
}

// TestGenPlanted: gen --planted writes train and eval files, a FeatureConfigs that loads
// and a planted.json whose bayes_auc, bayes_logloss, lr_only_auc and positive rate are those
// recomputed from the planted model over the eval rows read back (v1 or v2 fids, which read
// back as v2); monolith layout runs on the output.
func TestGenPlanted(t *testing.T) {
	for _, tc := range []struct {
		kind, fidVersion string
	}{{"fm", "1"}, {"lr", "2"}} {
		kind := tc.kind
		t.Run(kind, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "out")
			out := runGenCLI(t, "--planted", kind, "--out", dir, "--rows", "3000", "--files", "2", "--eval-rows", "2500",
				"--eval-files", "2", "--batch-rows", "100", "--seed", "5", "--fid-version", tc.fidVersion)
			if !strings.HasPrefix(out, "gen: planted "+kind+": train 2 files, 3000 rows; eval 2 files, 2500 rows; bayes_auc 0.") ||
				strings.Count(out, "\n") != 1 {
				t.Errorf("summary %q", out)
			}
			for _, f := range []string{"train/part-00000.tfrecord", "train/part-00001.tfrecord", "eval/part-00000.tfrecord",
				"eval/part-00001.tfrecord", "feature_configs.pbtxt", "planted.json"} {
				if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
					t.Error(err)
				}
			}
			js, err := os.ReadFile(filepath.Join(dir, "planted.json"))
			if err != nil {
				t.Fatal(err)
			}
			var info plantedInfo
			if err := json.Unmarshal(js, &info); err != nil {
				t.Fatal(err)
			}
			if info.Model != kind || info.Seed != 5 || strconv.Itoa(info.FidVersion) != tc.fidVersion || info.Dim != 4 || info.Features != 8 || info.Vocab != 300 || info.Zipf != 1.05 ||
				info.TrainRows != 3000 || info.EvalRows != 2500 || info.TrainSeed == info.EvalSeed {
				t.Errorf("planted.json: %s", js)
			}
			k, err := synth.ParsePlantedKind(info.Model)
			if err != nil {
				t.Fatal(err)
			}
			m := &synth.Planted{Kind: k, Dim: info.Dim, Seed: info.Seed, Bias: info.Bias, WeightScale: info.WeightScale, VectorScale: info.VectorScale}
			fids, labels := readPlantedEval(t, dir, info.Features)
			if len(fids) != 2500 {
				t.Fatalf("read %d eval rows", len(fids))
			}
			probs, linear := make([]float32, len(fids)), make([]float32, len(fids))
			pos := 0.0
			for i, row := range fids {
				probs[i], linear[i] = float32(m.Prob(row)), float32(m.LinearLogit(row))
				if labels[i] > 0 {
					pos++
				}
			}
			auc, err := metrics.AUC(probs, labels)
			if err != nil {
				t.Fatal(err)
			}
			ll, err := metrics.LogLoss(probs, labels)
			if err != nil {
				t.Fatal(err)
			}
			lrAUC, err := metrics.AUC(linear, labels)
			if err != nil {
				t.Fatal(err)
			}
			if auc != info.BayesAUC || ll != info.BayesLogLoss || lrAUC != info.LROnlyAUC || pos/2500 != info.PositiveRateEval {
				t.Errorf("recomputed auc %v, logloss %v, lr-only auc %v, positive rate %v; planted.json %s", auc, ll, lrAUC, pos/2500, js)
			}
			if kind == "fm" && info.BayesAUC-info.LROnlyAUC < 0.03 {
				t.Errorf("FM: lr-only AUC %v close to the Bayes AUC %v", info.LROnlyAUC, info.BayesAUC)
			}
			fcPath := filepath.Join(dir, "feature_configs.pbtxt")
			cfg, err := loadFeatureConfig(fcPath)
			if err != nil {
				t.Fatal(err)
			}
			if len(cfg.Features) != 8 || len(cfg.Tables) != 1 || len(cfg.Layouts) != 2 || cfg.Layouts[1].Name != "vec" || cfg.Layouts[1].RowSize[0] != 32 {
				t.Errorf("FeatureConfigs: %d features, %d tables, layouts %+v", len(cfg.Features), len(cfg.Tables), cfg.Layouts)
			}
			var so, se bytes.Buffer
			if err := run(context.Background(), []string{"layout", "--input", filepath.Join(dir, "eval", "part-00000.tfrecord"),
				"--type", "examplebatch", "--feature-configs", fcPath, "--ps-num", "2", "--json"}, &so, &se); err != nil {
				t.Fatalf("layout on the output: %v\n%s", err, se.String())
			}
		})
	}
}

// TestGenPlantedDeterminism: the same flags give byte-identical output (data, FeatureConfigs,
// planted.json); another seed gives other rows and another model.
func TestGenPlantedDeterminism(t *testing.T) {
	gen := func(seed string) map[string][]byte {
		dir := t.TempDir()
		runGenCLI(t, "--planted", "fm", "--out", dir, "--rows", "2000", "--files", "2", "--eval-rows", "1000", "--seed", seed)
		out := map[string][]byte{}
		err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			b, err := os.ReadFile(path)
			rel, _ := filepath.Rel(dir, path)
			out[rel] = b
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	a, b, c := gen("3"), gen("3"), gen("4")
	if len(a) != 5 {
		t.Fatalf("files %d", len(a))
	}
	for name, x := range a {
		if !bytes.Equal(x, b[name]) {
			t.Errorf("%s differs between two runs with seed 3", name)
		}
		if name != "feature_configs.pbtxt" && bytes.Equal(x, c[name]) {
			t.Errorf("%s is the same for seeds 3 and 4", name)
		}
	}
}

// TestGenPlantedFlags: explicit flags override the planted defaults, the scale flags reach
// the model, and flags that do not fit are usage errors.
func TestGenPlantedFlags(t *testing.T) {
	dir := t.TempDir()
	runGenCLI(t, "--planted", "fm", "--out", dir, "--rows", "600", "--files", "1", "--eval-rows", "500", "--features", "3",
		"--layout-dim", "2", "--fids-max", "2", "--planted-bias", "0.5", "--planted-weight-scale", "0.25", "--planted-vector-scale", "0.75",
		"--framing", "pbstream")
	js, err := os.ReadFile(filepath.Join(dir, "planted.json"))
	if err != nil {
		t.Fatal(err)
	}
	var info plantedInfo
	if err := json.Unmarshal(js, &info); err != nil {
		t.Fatal(err)
	}
	if info.Features != 3 || info.Dim != 2 || info.FidsMin != 1 || info.FidsMax != 2 || info.Bias != 0.5 || info.WeightScale != 0.25 || info.VectorScale != 0.75 {
		t.Errorf("planted.json %s", js)
	}
	if _, err := os.Stat(filepath.Join(dir, "train", "part-00000.pb")); err != nil {
		t.Error(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--planted", "dnn"}, "--planted"},
		{[]string{"--planted", "fm", "--shared", "1"}, "shared"},
		{[]string{"--planted", "fm", "--tasks", "0"}, "--tasks"},
		{[]string{"--planted", "fm", "--eval-rows", "1"}, "--eval-rows"},
		{[]string{"--planted", "fm", "--eval-rows", "10", "--eval-files", "11"}, "eval set"},
		{[]string{"--planted", "fm", "--layout-dim", "0"}, "dim"},
		{[]string{"--planted", "fm", "--planted-vector-scale", "-1"}, "scales"},
		{[]string{"--planted", "lr", "--feature-configs-out", "x"}, "--feature-configs-out"},
		{[]string{"--planted", "lr", "--positive-rate", "0.5"}, "--positive-rate"},
		{[]string{"--eval-rows", "10"}, "needs --planted"},
		{[]string{"--planted-bias", "1"}, "needs --planted"},
	} {
		d := t.TempDir()
		var so, se bytes.Buffer
		err := runGen(context.Background(), append([]string{"--out", d}, tc.args...), &so, &se)
		if err == nil || !errors.Is(err, errUsage) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want a usage error mentioning %q", tc.args, err, tc.want)
		}
		if ents, _ := os.ReadDir(d); len(ents) != 0 {
			t.Errorf("%v: usage error left %d files", tc.args, len(ents))
		}
	}
}
