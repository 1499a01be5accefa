package main

import (
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/monolith-go/monolith/internal/atomicfile"
	"github.com/monolith-go/monolith/io/compress"
	"github.com/monolith-go/monolith/io/recordio"
	"github.com/monolith-go/monolith/io/synth"
	"github.com/monolith-go/monolith/kernels/metrics"
	"github.com/monolith-go/monolith/schemas/batch"
	"github.com/monolith-go/monolith/schemas/examplepb"
)

// runGen writes a synthetic data set (io/synth) and, optionally, its FeatureConfigs.
func runGen(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("gen", stderr)
	d := synth.DefaultConfig()
	out := fs.String("out", "", "output directory (created if needed)")
	typ := fs.String("type", d.Type.String(), "message type: examplebatch, example or instance")
	rows := fs.Int64("rows", d.Rows, "total rows")
	files := fs.Int("files", d.Files, "number of files (rows are split evenly)")
	batchRows := fs.Int("batch-rows", d.BatchRows, "rows per ExampleBatch record, and per group sharing the shared features, uid and chnid")
	features := fs.Int("features", d.Features, "individual sparse features")
	shared := fs.Int("shared", d.Shared, "shared sparse features (SHARED lists in an ExampleBatch, repeated per row otherwise)")
	fidsMin := fs.Int("fids-min", d.FidsMin, "fewest fids per cell")
	fidsMax := fs.Int("fids-max", d.FidsMax, "most fids per cell")
	vocab := fs.Uint64("vocab", d.Vocab, "distinct fids per feature")
	zipf := fs.Float64("zipf", d.Zipf, "Zipf exponent of the fid frequencies (0: uniform)")
	fidVersion := fs.Int("fid-version", d.FidVersion, "1 (fid_v1_list; Instance top-level fids) or 2 (fid_v2_list; Instance named features)")
	firstSlot := fs.Int("first-slot", d.FirstSlot, "slot of the first feature (one slot per feature)")
	naming := fs.String("naming", d.Naming.String(), "feature names: auto (fc_slot for instance, f otherwise), f (f_<slot>) or fc_slot (fc_slot_<slot>)")
	dense := fs.Int("dense", d.Dense, "width of one dense float feature (0: none)")
	tasks := fs.Int("tasks", d.Tasks, "labels per row")
	positiveRate := fs.Float64("positive-rate", d.PositiveRate, "probability of a positive label")
	users := fs.Int("users", d.Users, "distinct users (LineId uid and user_id)")
	channels := fs.Int("channels", d.Channels, "distinct LineId chnid values")
	reqTimeBase := fs.Int64("req-time-base", d.ReqTimeBase, "LineId req_time of the first row (seconds; +1 per row)")
	sampleRate := fs.Float64("sample-rate", float64(d.SampleRate), "LineId sample_rate of every row, in (0, 1]")
	seed := fs.Uint64("seed", d.Seed, "random seed: the same flags give byte-identical files")
	framing := fs.String("framing", d.Record.Framing.String(), "record framing: pbstream or tfrecord")
	codec := fs.String("codec", d.Record.Codec.String(), "compression: none, gzip, zlib, snappy or zstd (the file names get its suffix)")
	sortID := fs.Bool("sort-id", d.Record.PB.HasSortID, "pbstream: write the LineId user_id as each record's sort id (Monolith's file default)")
	lagrangeX := fs.Bool("lagrangex", false, "pbstream: write LagrangeX headers instead of sort ids")
	prefix := fs.String("prefix", d.Prefix, "file name prefix: <prefix>-<index>.<pb|tfrecord>[.<codec>]")
	parallel := fs.Int("parallel", 0, "files generated at once (0: GOMAXPROCS); does not change the output")
	fcOut := fs.String("feature-configs-out", "", "also write a matching FeatureConfigs (protobuf text) to this file")
	dim := fs.Int("layout-dim", 8, "FeatureConfigs: embedding width after the bias column (slice_dims [1, dim])")
	tableSize := fs.Int("table-size", 8, "FeatureConfigs: individual features per table")
	var pf plantedFlags
	fs.StringVar(&pf.kind, "planted", "", "draw the labels from a planted model, lr or fm, and write DIR/train, DIR/eval,\n"+
		"DIR/feature_configs.pbtxt and DIR/planted.json (see below)")
	fs.Int64Var(&pf.evalRows, "eval-rows", 50000, "--planted: rows of the evaluation set")
	fs.IntVar(&pf.evalFiles, "eval-files", 1, "--planted: files of the evaluation set")
	fs.Float64Var(&pf.bias, "planted-bias", synth.PlantedBias, "--planted: global bias of the planted model")
	fs.Float64Var(&pf.weightScale, "planted-weight-scale", 0, "--planted: standard deviation of the fid weights (0: the default for the features)")
	fs.Float64Var(&pf.vectorScale, "planted-vector-scale", 0, "--planted: standard deviation of the FM vector components (0: the default for the features and dim)")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "usage: monolith gen --out DIR [flags]\n\n"+
			"Writes synthetic Monolith training data: sparse features with Zipf-distributed fids,\n"+
			"shared features, an optional dense feature, labels and LineIds, deterministic for a seed.\n"+
			"--feature-configs-out writes a FeatureConfigs for monolith shard, layout and validate.\n\n"+
			plantedUsage+plantedDefaultsText()+"\n\n")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: gen takes no arguments (got %q)", errUsage, fs.Args())
	}
	if *out == "" {
		return fmt.Errorf("%w: gen needs --out DIR", errUsage)
	}
	pf.explicit = map[string]bool{}
	fs.Visit(func(f *flag.Flag) { pf.explicit[f.Name] = true })
	if err := pf.setDefaults(fs); err != nil {
		return err
	}
	c := d
	var err error
	if c.Type, err = batch.ParseSource(*typ); err != nil {
		return fmt.Errorf("%w: --type: %v", errUsage, err)
	}
	if c.Naming, err = synth.ParseNaming(*naming); err != nil {
		return fmt.Errorf("%w: --naming: %v", errUsage, err)
	}
	if c.Record.Framing, err = recordio.ParseFraming(*framing); err != nil {
		return fmt.Errorf("%w: --framing: %v", errUsage, err)
	}
	if c.Record.Codec, err = compress.ParseCodec(*codec); err != nil {
		return fmt.Errorf("%w: --codec: %v", errUsage, err)
	}
	if c.Record.Codec == compress.Auto {
		return fmt.Errorf("%w: --codec auto: name the codec (the file names follow it)", errUsage)
	}
	c.Record.PB.HasSortID, c.Record.PB.LagrangeX = *sortID && !*lagrangeX, *lagrangeX
	c.Rows, c.Files, c.BatchRows = *rows, *files, *batchRows
	c.Features, c.Shared, c.FidsMin, c.FidsMax = *features, *shared, *fidsMin, *fidsMax
	c.Vocab, c.Zipf, c.FidVersion, c.FirstSlot, c.Dense = *vocab, *zipf, *fidVersion, *firstSlot, *dense
	c.Tasks, c.PositiveRate = *tasks, *positiveRate
	c.Users, c.Channels, c.ReqTimeBase, c.SampleRate = *users, *channels, *reqTimeBase, float32(*sampleRate)
	c.Seed, c.Prefix, c.Parallel = *seed, *prefix, *parallel
	if err := c.Validate(); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if pf.kind != "" {
		return runPlanted(ctx, c, *dim, &pf, *out, stdout)
	}
	var fcText []byte
	if *fcOut != "" {
		fc, err := synth.FeatureConfigs(c, synth.LayoutOptions{Dim: *dim, TableSize: *tableSize})
		if err != nil {
			return fmt.Errorf("%w: %v", errUsage, err)
		}
		fcText = formatFeatureConfigs(fc, fmt.Sprintf("FeatureConfigs for `monolith gen` data: %d individual and %d shared %s features (seed %d).",
			c.Features, c.Shared, c.Type, c.Seed))
	}
	res, err := synth.Generate(ctx, c, *out)
	if err != nil {
		return err
	}
	if *fcOut != "" {
		if err := atomicfile.WriteFile(*fcOut, fcText); err != nil {
			return err
		}
	}
	fmt.Fprintf(stdout, "gen: %d files, %d records, %d rows, %d bytes in %s\n", len(res.Files), res.Records, res.Rows, res.Bytes, *out)
	return nil
}

// plantedUsage documents --planted.
const plantedUsage = `With --planted lr|fm, the labels come from a known logistic-regression or factorization-machine
model (io/synth.Planted) whose parameters derive from --seed, so a trained model can be judged
against the Bayes-optimal AUC. DIR gets:
  train/                   --rows rows in --files files (row stream: data seed = splitmix64 output 1 of --seed)
  eval/                    --eval-rows rows in --eval-files files, same planted model, independent rows
                           (data seed = splitmix64 output 2 of --seed)
  feature_configs.pbtxt    one table "emb", slice_dims [1, layout-dim], layouts "bias" (ADDN) and "vec" (CONCAT)
  planted.json             the model and data shape, and the eval set's positive rate, bayes_auc and
                           bayes_logloss (of the true p) and lr_only_auc (of the model's linear part)
Flags not given explicitly then default to:`

// plantedDefaultsText lists plantedDefaults as flags, for the usage text.
func plantedDefaultsText() string {
	var b strings.Builder
	for i, d := range plantedDefaults {
		if i%6 == 0 {
			b.WriteString("\n ")
		}
		fmt.Fprintf(&b, " --%s %s", d[0], d[1])
	}
	b.WriteString(" (--eval-rows 50000 --eval-files 1)")
	return b.String()
}

// plantedFlags are the flags of `gen --planted`.
type plantedFlags struct {
	kind                           string
	evalRows                       int64
	evalFiles                      int
	bias, weightScale, vectorScale float64
	explicit                       map[string]bool // flags given on the command line
}

// plantedDefaults are the defaults of the data flags under --planted.
var plantedDefaults = [][2]string{
	{"type", "examplebatch"}, {"framing", "tfrecord"}, {"features", "8"}, {"shared", "0"}, {"dense", "0"},
	{"tasks", "1"}, {"fids-min", "1"}, {"fids-max", "1"}, {"vocab", "300"}, {"zipf", "1.05"},
	{"layout-dim", "4"}, {"rows", "500000"}, {"files", "4"}, {"batch-rows", "256"},
}

// maxEvalRows bounds --eval-rows: gen keeps 12 bytes per eval row in memory.
const maxEvalRows = 1 << 28

// setDefaults checks the planted flags and, with --planted, gives the data flags that were
// not set explicitly their planted defaults.
func (pf *plantedFlags) setDefaults(fs *flag.FlagSet) error {
	if pf.kind == "" {
		for _, name := range []string{"eval-rows", "eval-files", "planted-bias", "planted-weight-scale", "planted-vector-scale"} {
			if pf.explicit[name] {
				return fmt.Errorf("%w: --%s needs --planted", errUsage, name)
			}
		}
		return nil
	}
	for _, name := range []string{"feature-configs-out", "table-size", "positive-rate"} {
		if pf.explicit[name] {
			return fmt.Errorf("%w: --%s does not apply to --planted data (it writes DIR/feature_configs.pbtxt and draws labels from the model)", errUsage, name)
		}
	}
	for _, d := range plantedDefaults {
		if !pf.explicit[d[0]] {
			if err := fs.Set(d[0], d[1]); err != nil {
				return fmt.Errorf("planted default --%s: %w", d[0], err)
			}
		}
	}
	return nil
}

// plantedInfo is DIR/planted.json.
type plantedInfo struct {
	Model            string  `json:"model"`
	Seed             uint64  `json:"seed"`
	Dim              int     `json:"dim"`
	Bias             float64 `json:"bias"`
	WeightScale      float64 `json:"weight_scale"`
	VectorScale      float64 `json:"vector_scale"`
	Features         int     `json:"features"`
	FidsMin          int     `json:"fids_min"`
	FidsMax          int     `json:"fids_max"`
	FidVersion       int     `json:"fid_version"`
	Vocab            uint64  `json:"vocab"`
	Zipf             float64 `json:"zipf"`
	TrainRows        int64   `json:"train_rows"`
	TrainFiles       int     `json:"train_files"`
	TrainSeed        uint64  `json:"train_seed"`
	EvalRows         int64   `json:"eval_rows"`
	EvalFiles        int     `json:"eval_files"`
	EvalSeed         uint64  `json:"eval_seed"`
	PositiveRateEval float64 `json:"positive_rate_eval"`
	MeanProbEval     float64 `json:"mean_p_eval"`
	BayesAUC         float64 `json:"bayes_auc"`
	BayesLogLoss     float64 `json:"bayes_logloss"`
	LROnlyAUC        float64 `json:"lr_only_auc"`
}

// runPlanted writes a planted data set (see plantedUsage) from the data config c.
func runPlanted(ctx context.Context, c synth.Config, dim int, pf *plantedFlags, out string, stdout io.Writer) error {
	kind, err := synth.ParsePlantedKind(pf.kind)
	if err != nil {
		return fmt.Errorf("%w: --planted: %v", errUsage, err)
	}
	if c.Tasks < 1 {
		return fmt.Errorf("%w: --planted needs --tasks >= 1", errUsage)
	}
	if pf.evalRows < 2 || pf.evalRows > maxEvalRows {
		return fmt.Errorf("%w: --eval-rows %d must be in [2, %d]", errUsage, pf.evalRows, maxEvalRows)
	}
	evalCfg := c
	evalCfg.Rows, evalCfg.Files = pf.evalRows, pf.evalFiles
	if err := evalCfg.Validate(); err != nil {
		return fmt.Errorf("%w: eval set: %v", errUsage, err)
	}
	fc, err := synth.PlantedFeatureConfigs(c, dim)
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	m, err := synth.NewPlanted(kind, c, dim, c.Seed)
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	m.Bias = pf.bias
	if pf.explicit["planted-weight-scale"] {
		m.WeightScale = pf.weightScale
	}
	if pf.explicit["planted-vector-scale"] {
		m.VectorScale = pf.vectorScale
	}
	if err := m.Validate(); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	fcText := formatFeatureConfigs(fc, fmt.Sprintf("FeatureConfigs of `monolith gen --planted %s` data: %d features, dim %d (seed %d).",
		kind, c.Features, dim, c.Seed))

	set, err := synth.GeneratePlanted(ctx, c, m, pf.evalRows, pf.evalFiles, out)
	if err != nil {
		return err
	}
	train, eval, trainRes, evalRes := set.TrainConfig, set.EvalConfig, set.Train, set.Eval

	info := plantedInfo{Model: kind.String(), Seed: c.Seed, Dim: dim, Bias: m.Bias, WeightScale: m.WeightScale, VectorScale: m.VectorScale,
		Features: c.Features, FidsMin: c.FidsMin, FidsMax: c.FidsMax, FidVersion: c.FidVersion, Vocab: c.Vocab, Zipf: c.Zipf,
		TrainRows: train.Rows, TrainFiles: train.Files, TrainSeed: train.Seed, EvalRows: eval.Rows, EvalFiles: eval.Files, EvalSeed: eval.Seed}
	if kind == synth.PlantedLR {
		info.VectorScale = 0 // unused
	}
	var pos, sumP float64
	for i, y := range set.EvalLabels {
		if y > 0 {
			pos++
		}
		sumP += float64(set.EvalProbs[i])
	}
	info.PositiveRateEval, info.MeanProbEval = pos/float64(eval.Rows), sumP/float64(eval.Rows)
	if info.BayesAUC, err = metrics.AUC(set.EvalProbs, set.EvalLabels); err != nil {
		return fmt.Errorf("eval set bayes_auc: %w", err)
	}
	if info.BayesLogLoss, err = metrics.LogLoss(set.EvalProbs, set.EvalLabels); err != nil {
		return fmt.Errorf("eval set bayes_logloss: %w", err)
	}
	if info.LROnlyAUC, err = metrics.AUC(set.EvalLinear, set.EvalLabels); err != nil {
		return fmt.Errorf("eval set lr_only_auc: %w", err)
	}
	js, err := json.MarshalIndent(info, "", "  ")
	if err != nil {
		return fmt.Errorf("planted.json: %w", err)
	}
	if err := atomicfile.WriteFile(filepath.Join(out, "feature_configs.pbtxt"), fcText); err != nil {
		return err
	}
	if err := atomicfile.WriteFile(filepath.Join(out, "planted.json"), append(js, '\n')); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "gen: planted %s: train %d files, %d rows; eval %d files, %d rows; bayes_auc %.4f, lr_only_auc %.4f, positive_rate_eval %.4f; in %s\n",
		kind, len(trainRes.Files), trainRes.Rows, len(evalRes.Files), evalRes.Rows, info.BayesAUC, info.LROnlyAUC, info.PositiveRateEval, out)
	return nil
}

// formatFeatureConfigs writes fc as protobuf text in the layout of
// testdata/example_batch.feature_configs.pbtxt: one line per feature (in natural name
// order, so f_2 comes before f_10), then the layouts by name, their slices in order. Unlike
// prototext's output, the bytes are stable. header becomes a leading comment.
func formatFeatureConfigs(fc *examplepb.FeatureConfigs, header string) []byte {
	var b strings.Builder
	b.WriteString("# " + header + "\n\n")
	names := make([]string, 0, len(fc.GetFeatureConfigs()))
	for n := range fc.GetFeatureConfigs() {
		names = append(names, n)
	}
	slices.SortFunc(names, func(x, y string) int { return cmp.Or(naturalCompare(x, y), strings.Compare(x, y)) })
	for _, n := range names {
		f := fc.GetFeatureConfigs()[n]
		fmt.Fprintf(&b, "feature_configs { key: %s value { table: %s", strconv.Quote(n), strconv.Quote(f.GetTable()))
		if f.GetPoolingType() != examplepb.PoolingType_SUM {
			fmt.Fprintf(&b, " pooling_type: %s", f.GetPoolingType())
		}
		if f.GetMaxSequenceLength() != 0 {
			fmt.Fprintf(&b, " max_sequence_length: %d", f.GetMaxSequenceLength())
		}
		for _, d := range f.GetSliceDims() {
			fmt.Fprintf(&b, " slice_dims: %d", d)
		}
		b.WriteString(" } }\n")
	}
	layouts := make([]string, 0, len(fc.GetOutConfigs()))
	for n := range fc.GetOutConfigs() {
		layouts = append(layouts, n)
	}
	slices.Sort(layouts)
	for _, n := range layouts {
		o := fc.GetOutConfigs()[n]
		fmt.Fprintf(&b, "\nout_configs {\n  key: %s\n  value {\n    out_type: %s\n", strconv.Quote(n), o.GetOutType())
		for _, s := range o.GetSliceConfigs() {
			fmt.Fprintf(&b, "    slice_configs { feature_name: %s start: %d end: %d }\n", strconv.Quote(s.GetFeatureName()), s.GetStart(), s.GetEnd())
		}
		for _, sh := range o.GetShape() {
			b.WriteString("    shape {")
			for _, d := range sh.GetDims() {
				fmt.Fprintf(&b, " dims: %d", d)
			}
			b.WriteString(" }\n")
		}
		b.WriteString("  }\n}\n")
	}
	return []byte(b.String())
}

// naturalCompare orders strings with their digit runs compared as numbers.
func naturalCompare(a, b string) int {
	for a != "" && b != "" {
		da, db := digitRun(a), digitRun(b)
		if da > 0 && db > 0 {
			na, nb := strings.TrimLeft(a[:da], "0"), strings.TrimLeft(b[:db], "0")
			if c := cmp.Or(cmp.Compare(len(na), len(nb)), strings.Compare(na, nb)); c != 0 {
				return c
			}
			a, b = a[da:], b[db:]
			continue
		}
		if a[0] != b[0] {
			return cmp.Compare(a[0], b[0])
		}
		a, b = a[1:], b[1:]
	}
	return cmp.Compare(len(a), len(b))
}

// digitRun returns the length of the run of ASCII digits at the start of s.
func digitRun(s string) int {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return i
}
