package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/monolith-go/monolith/io/dataset"
	"github.com/monolith-go/monolith/io/pbtext"
	"github.com/monolith-go/monolith/kernels/featcfg"
	"github.com/monolith-go/monolith/kernels/layout"
	"github.com/monolith-go/monolith/kernels/shard"
)

// kernelFlags are the flags shared by shard and layout.
type kernelFlags struct {
	in       inputFlags
	input    string
	configs  string
	psNum    int
	version  int
	unique   bool
	parallel int
	json     bool
}

func (k *kernelFlags) register(fs *flag.FlagSet) {
	k.in.register(fs)
	fs.StringVar(&k.input, "input", "", "training data file (any input format; see inspect)")
	fs.StringVar(&k.configs, "feature-configs", "", "FeatureConfigs in protobuf text (.pbtxt) or JSON (.json)")
	fs.IntVar(&k.psNum, "ps-num", 1, "number of PS shards P (0 means 1)")
	fs.IntVar(&k.version, "version", 5, "sharding_sparse_fids / fused_embedding_to_layout version, 1..5")
	fs.BoolVar(&k.unique, "unique", false, "deduplicate fids per feature (training mode)")
	fs.IntVar(&k.parallel, "parallel", 1, "goroutines for the kernels")
	fs.BoolVar(&k.json, "json", false, "print the outputs as JSON (one object per batch)")
}

// open validates the flags and returns the config, a sharder and the batch reader.
func (k *kernelFlags) open() (*featcfg.Config, *shard.Sharder, *dataset.Reader, error) {
	if k.input == "" || k.configs == "" {
		return nil, nil, nil, fmt.Errorf("%w: --input and --feature-configs are required", errUsage)
	}
	if k.version < 1 || k.version > 5 {
		return nil, nil, nil, fmt.Errorf("%w: --version %d is not 1..5", errUsage, k.version)
	}
	opts, err := k.in.options()
	if err != nil {
		return nil, nil, nil, err
	}
	cfg, err := loadFeatureConfig(k.configs)
	if err != nil {
		return nil, nil, nil, err
	}
	s, err := shard.New(cfg, shard.Options{PS: k.psNum, Version: k.version, Unique: k.unique, Parallel: k.parallel})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%w: %v", errUsage, err)
	}
	r, err := dataset.Open([]string{k.input}, opts)
	if err != nil {
		return nil, nil, nil, err
	}
	return cfg, s, r, nil
}

// eachBatch shards every batch of the input and calls fn with the batch and its result.
func (k *kernelFlags) eachBatch(ctx context.Context, fn func(rec arrow.RecordBatch, res *shard.Result) error) error {
	cfg, s, r, err := k.open()
	if err != nil {
		return err
	}
	defer r.Close()
	var in shard.Input
	for {
		rec, err := r.Next(ctx)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		err = in.FromBatch(rec, cfg)
		var res *shard.Result
		if err == nil {
			res, err = s.Shard(&in)
		}
		if err == nil {
			err = fn(rec, res)
		}
		rec.Release()
		if err != nil {
			return err
		}
	}
}

// tableKey is the "table:ps" key of a fid list.
func tableKey(cfg *featcfg.Config, t, p int) string {
	return cfg.Tables[t].Name + ":" + strconv.Itoa(p)
}

func runShard(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("shard", stderr)
	var k kernelFlags
	k.register(fs)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: monolith shard --input FILE --feature-configs FILE --ps-num P --version V [--unique] --json\n\n"+
			"Runs sharding_sparse_fids on every batch of the input and prints its outputs under their Monolith names.")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	enc := json.NewEncoder(stdout)
	cfg, err := loadFeatureConfig(k.configs)
	if k.configs != "" && err != nil {
		return err
	}
	return k.eachBatch(ctx, func(_ arrow.RecordBatch, r *shard.Result) error {
		out := shardJSON(cfg, r)
		if k.json {
			return enc.Encode(out)
		}
		return printShard(stdout, cfg, r)
	})
}

// shardJSON returns every output of a sharding result under its Monolith name.
func shardJSON(cfg *featcfg.Config, r *shard.Result) map[string]any {
	out := map[string]any{
		"version":        r.Version,
		"ps_num":         r.PS,
		"batch_size":     r.BatchSize,
		"nfl_offset":     r.NflOffset,
		"feature_offset": r.FeatureOffset,
	}
	pairs := make([][2]uint32, len(r.FidOffset))
	for i, v := range r.FidOffset {
		pairs[i] = [2]uint32{shard.Index1(v), shard.Index2(v)}
	}
	out["fid_offset"] = pairs
	if r.Version == 4 {
		out["fid_list"] = nonNil(r.Fids)
		out["fid_list_row_splits"] = nonNil(r.RowSplits)
		out["fid_list_table_row_length"] = r.TableRowLength
		out["fid_list_shard_row_lenth"] = r.ShardRowLength
		out["fid_list_emb_row_lenth"] = r.EmbRowLength
		return out
	}
	lists := map[string][]uint64{}
	splits := map[string][]int64{}
	sizes := map[string]int{}
	for t := range cfg.Tables {
		for p := 0; p < r.PS; p++ {
			key := tableKey(cfg, t, p)
			lists[key] = nonNil(r.List(t, p))
			splits[key] = r.Splits(t, p)
			sizes[key] = len(r.Splits(t, p))
		}
	}
	out["fid_list"] = lists
	if r.Version >= 2 {
		out["fid_list_row_splits"] = splits
	}
	if r.Version == 5 {
		out["emb_size"] = r.EmbSize
		out["fid_list_row_splits_size"] = sizes
		out["nfl_size"] = []int{len(r.NflOffset)}
		out["feature_size"] = []int{len(r.FeatureOffset)}
		out["fid_size"] = []int{len(r.FidOffset)}
	}
	return out
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func printShard(w io.Writer, cfg *featcfg.Config, r *shard.Result) error {
	fmt.Fprintf(w, "batch_size %d, %d features, %d entries, %d fid occurrences, version %d, ps_num %d\n",
		r.BatchSize, len(cfg.Features), len(r.FeatureOffset)-1, len(r.FidOffset), r.Version, r.PS)
	for t := range cfg.Tables {
		for p := 0; p < r.PS; p++ {
			fmt.Fprintf(w, "  %-24s %6d fids  %8d floats\n", tableKey(cfg, t, p), len(r.List(t, p)), r.EmbSize[t*r.PS+p])
		}
	}
	return nil
}

// layoutOutput is one tensor of the layout JSON.
type layoutOutput struct {
	Name  string    `json:"name"`
	Shape []int     `json:"shape"`
	Data  []float32 `json:"data"`
}

func runLayout(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("layout", stderr)
	var k kernelFlags
	k.register(fs)
	embeddings := fs.String("embeddings", "synthetic", "embedding values: synthetic (element k of fid f is f%1009/64 + k/8)")
	grad := fs.String("grad", "", "also run the gradient with output gradients: synthetic (element i of output o is (i%7+1)/4 + (o%3)/2)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: monolith layout --input FILE --feature-configs FILE --ps-num P --version V --embeddings synthetic [--grad synthetic] --json\n\n"+
			"Shards every batch, runs fused_embedding_to_layout on synthetic embeddings and prints the\n"+
			"layout tensors in output order (and, with --grad, one gradient buffer per table:ps).")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *embeddings != "synthetic" {
		return fmt.Errorf("%w: --embeddings %q: only synthetic is supported", errUsage, *embeddings)
	}
	if *grad != "" && *grad != "synthetic" {
		return fmt.Errorf("%w: --grad %q: only synthetic is supported", errUsage, *grad)
	}
	cfg, err := loadFeatureConfig(k.configs)
	if k.configs != "" && err != nil {
		return err
	}
	var lay *layout.Layouter
	if cfg != nil {
		if lay, err = layout.New(cfg, layout.Options{Version: k.version, PS: k.psNum, Parallel: k.parallel}); err != nil {
			return fmt.Errorf("%w: %v", errUsage, err)
		}
	}
	enc := json.NewEncoder(stdout)
	return k.eachBatch(ctx, func(rec arrow.RecordBatch, r *shard.Result) error {
		bufs := layout.ListBuffers(cfg, r, layout.SyntheticValue)
		emb, err := layout.Arrange(r.Version, cfg, r, bufs)
		if err != nil {
			return err
		}
		rows := int(rec.NumRows())
		outs := lay.Outputs(rows)
		req := []layout.Sharded{layout.FromShard(r)}
		if err := lay.Forward(req, emb, outs); err != nil {
			return err
		}
		doc := map[string]any{}
		var list []layoutOutput
		o := 0
		for _, l := range cfg.Layouts {
			for i := 0; i < l.Outputs(); i++ {
				name := l.Name
				if l.OutType == featcfg.None {
					name = l.Name + "/" + strconv.Itoa(i)
				}
				list = append(list, layoutOutput{Name: name, Shape: l.OutputShape(i, rows), Data: outs[o]})
				o++
			}
		}
		doc["outputs"] = list
		if *grad == "synthetic" {
			grads := lay.Outputs(rows)
			for o, g := range grads {
				for i := range g {
					g[i] = float32(i%7+1)/4 + float32(o%3)/2
				}
			}
			eg := layout.Zeros(emb)
			if err := lay.Backward(req, grads, eg); err != nil {
				return err
			}
			byList := map[string][]float32{}
			for k, b := range layout.Lists(r.Version, cfg, r, eg) {
				byList[tableKey(cfg, k/r.PS, k%r.PS)] = nonNil(b)
			}
			doc["grads"] = byList
		}
		if k.json {
			return enc.Encode(doc)
		}
		fmt.Fprintf(stdout, "batch of %d rows:\n", rows)
		for _, t := range list {
			fmt.Fprintf(stdout, "  %-20s %v\n", t.Name, t.Shape)
		}
		return nil
	})
}

// loadFeatureConfig reads and preprocesses a FeatureConfigs file.
func loadFeatureConfig(path string) (*featcfg.Config, error) {
	fc, err := pbtext.ReadFeatureConfigsFile(path)
	if err != nil {
		return nil, err
	}
	c, err := featcfg.New(fc)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}
