package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/monolith-go/monolith/internal/atomicfile"
	"github.com/monolith-go/monolith/io/compress"
	"github.com/monolith-go/monolith/io/recordio"
	"github.com/monolith-go/monolith/io/synth"
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
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: monolith gen --out DIR [flags]\n\n"+
			"Writes synthetic Monolith training data: sparse features with Zipf-distributed fids,\n"+
			"shared features, an optional dense feature, labels and LineIds, deterministic for a seed.\n"+
			"--feature-configs-out writes a FeatureConfigs for monolith shard, layout and validate.")
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
		if err := writeFileAtomic(*fcOut, fcText); err != nil {
			return err
		}
	}
	fmt.Fprintf(stdout, "gen: %d files, %d records, %d rows, %d bytes in %s\n", len(res.Files), res.Records, res.Rows, res.Bytes, *out)
	return nil
}

// writeFileAtomic writes b to path through a temporary file.
func writeFileAtomic(path string, b []byte) error {
	f, err := atomicfile.Create(path)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		return errors.Join(fmt.Errorf("write %s: %w", path, err), f.Abort())
	}
	return f.Commit()
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
