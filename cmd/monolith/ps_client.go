package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/monolith-go/monolith/internal/tlsconf"
	"github.com/monolith-go/monolith/ps/client"
	"github.com/monolith-go/monolith/ps/discovery"
)

// psClientCommands are the subcommands of `monolith ps-client`.
var psClientCommands = []struct{ name, summary string }{
	{"lookup", "print the rows of fids: --table T [--dim D] --fids 1,2,3 [--create]"},
	{"apply", "apply gradients: --table T [--dim D] --fids ... --grads ... [--lr ...] [--step S] [--update-time T] [--request-id ID]"},
	{"step", "add to (or read) the global step on shard 0: [--increment N] [--request-id ID]"},
	{"stats", "print every shard's counters [--tables]"},
	{"barrier", "wait on a barrier: --id X --worker W --workers N [--timeout 5s] [--shard K]"},
	{"health", "check every shard's health [--component C]; exits 1 when one is unhealthy"},
	{"save", "make every shard write a checkpoint"},
}

func psClientUsage(w io.Writer) {
	fmt.Fprintln(w, "usage: monolith ps-client <command> (--ps ADDR[,ADDR...] | --discovery zk|consul|tf_config|mlp [--zk SERVERS] [--job NAME] --num-shards N) [flags]\n\ncommands:")
	for _, c := range psClientCommands {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
	}
}

// runPSClient is `monolith ps-client`: one call to a parameter server, JSON on stdout.
func runPSClient(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		psClientUsage(stderr)
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
			return flag.ErrHelp
		}
		return fmt.Errorf("%w: ps-client needs a command", errUsage)
	}
	sub := args[0]
	if !slices.ContainsFunc(psClientCommands, func(c struct{ name, summary string }) bool { return c.name == sub }) {
		psClientUsage(stderr)
		return fmt.Errorf("%w: unknown ps-client command %q", errUsage, sub)
	}
	fs := newFlagSet("ps-client "+sub, stderr)
	var disc discoveryFlags
	disc.register(fs, true)
	numShards := fs.Int("num-shards", 0, "number of shards to discover (with a --discovery other than static)")
	timeout := fs.Duration("call-timeout", client.DefaultCallTimeout, "timeout of each RPC attempt")
	retries := fs.Int("retries", client.DefaultRetries, "retries of RPCs failing with Unavailable")
	verbose := fs.Bool("v", false, "verbose logging")
	tlsc := tlsconf.AddFlags(fs)
	var (
		tableName, fidsS, gradsS, lrS, id, component, requestID string
		dim, worker, workers, shard                             int
		step, updateTime, increment                             int64
		create, tables                                          bool
		barrierTimeout                                          time.Duration
	)
	switch sub {
	case "lookup", "apply":
		fs.StringVar(&tableName, "table", "", "table name (required)")
		fs.IntVar(&dim, "dim", 0, "embedding dim (0: ask shard 0)")
		fs.StringVar(&fidsS, "fids", "", "comma-separated fids (required)")
		if sub == "lookup" {
			fs.BoolVar(&create, "create", false, "create absent fids (create_if_missing)")
		} else {
			fs.StringVar(&gradsS, "grads", "", "comma-separated gradients, len(fids) × dim (required)")
			fs.StringVar(&lrS, "lr", "", "comma-separated learning rates, one per segment (default: configured rates)")
			fs.Int64Var(&step, "step", 0, "global step")
			fs.Int64Var(&updateTime, "update-time", 0, "update time in Unix seconds (0: the server's clock)")
			fs.StringVar(&requestID, "request-id", "", "idempotency key: shards that already applied it answer duplicate (default: none)")
		}
	case "step":
		fs.Int64Var(&increment, "increment", 0, "added to the global step (0: read it)")
		fs.StringVar(&requestID, "request-id", "", "idempotency key: a repeat returns the first answer's step (default: none)")
	case "stats":
		fs.BoolVar(&tables, "tables", false, "include per-table statistics")
	case "barrier":
		fs.StringVar(&id, "id", "", "barrier id (required)")
		fs.IntVar(&worker, "worker", -1, "this worker's index in [0, --workers) (required)")
		fs.IntVar(&workers, "workers", 0, "number of workers (required)")
		fs.DurationVar(&barrierTimeout, "timeout", 10*time.Second, "barrier timeout")
		fs.IntVar(&shard, "shard", 0, "coordinator shard")
	case "health":
		fs.StringVar(&component, "component", "", `component to check ("" or "ps")`)
	}
	if err := parseFlags(fs, args[1:]); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return fmt.Errorf("%w: ps-client %s takes no arguments (got %q)", errUsage, sub, fs.Args())
	}
	log := logger(stderr, *verbose)
	addrs, err := psAddrs(ctx, &disc, *numShards, log)
	if err != nil {
		return err
	}
	ct, err := tlsc.Client()
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	cl, err := client.New(addrs, client.WithCallTimeout(*timeout), client.WithRetries(*retries), client.WithTLS(ct))
	if err != nil {
		return err
	}
	defer cl.Close()

	var out any
	switch sub {
	case "lookup", "apply":
		out, err = psLookupOrApply(ctx, cl, sub, tableName, dim, fidsS, gradsS, lrS, create, step, updateTime, requestID)
	case "step":
		if increment < 0 {
			return fmt.Errorf("%w: step: --increment %d is negative", errUsage, increment)
		}
		var st int64
		if st, err = cl.GlobalStep(ctx, increment, requestID); err == nil {
			out = map[string]any{"step": st}
		}
	case "stats":
		out, err = psStats(ctx, cl, tables)
	case "barrier":
		if id == "" || workers <= 0 || worker < 0 {
			return fmt.Errorf("%w: barrier needs --id, --worker and --workers", errUsage)
		}
		if err = cl.BarrierOnShard(ctx, shard, id, worker, workers, barrierTimeout); err == nil {
			out = map[string]any{"barrier": id, "worker": worker, "workers": workers, "released": true}
		}
	case "health":
		out, err = psHealth(ctx, cl, component)
	case "save":
		out, err = psSave(ctx, cl)
	}
	if out != nil {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if jerr := enc.Encode(out); jerr != nil {
			return errors.Join(err, jerr)
		}
	}
	return err
}

// psAddrs returns the shard addresses from --ps, or from the discovery backend once all
// --num-shards shards are registered.
func psAddrs(ctx context.Context, disc *discoveryFlags, n int, log *slog.Logger) ([]string, error) {
	if disc.Type == discovery.TypeStatic || disc.Type == "" {
		addrs, err := discovery.Static(disc.staticAddrs())
		if err != nil {
			return nil, fmt.Errorf("%w: --ps: %v", errUsage, err)
		}
		return addrs, nil
	}
	if disc.PS != "" {
		return nil, fmt.Errorf("%w: --ps is static discovery, but --discovery is %s", errUsage, disc.Type)
	}
	if n <= 0 {
		return nil, fmt.Errorf("%w: --discovery %s needs --num-shards", errUsage, disc.Type)
	}
	b, _, err := disc.open(ctx, log)
	if err != nil {
		return nil, fmt.Errorf("ps-client: %w", err)
	}
	defer b.Close()
	addrs, err := discovery.WaitFor(ctx, b, "ps", n, disc.Wait, log)
	if err != nil {
		return nil, fmt.Errorf("ps-client: %w", err)
	}
	return addrs, nil
}

// parseList parses the comma-separated values of a flag, skipping empty elements.
func parseList[T any](flagName, s string, parse func(string) (T, error)) ([]T, error) {
	var out []T
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		v, err := parse(f)
		if err != nil {
			return nil, fmt.Errorf("%w: --%s: %v", errUsage, flagName, err)
		}
		out = append(out, v)
	}
	return out, nil
}

func parseInt64(s string) (int64, error) { return strconv.ParseInt(s, 0, 64) }

func parseFloat32(s string) (float32, error) {
	v, err := strconv.ParseFloat(s, 32)
	return float32(v), err
}

// psLookupRow is one fid of `ps-client lookup`.
type psLookupRow struct {
	Fid       int64     `json:"fid"`
	Shard     int       `json:"shard"`
	Found     bool      `json:"found"`
	Embedding []float32 `json:"embedding"`
}

func psLookupOrApply(ctx context.Context, cl *client.Client, sub, tableName string, dim int, fidsS, gradsS, lrS string, create bool, step, updateTime int64, requestID string) (any, error) {
	if tableName == "" {
		return nil, fmt.Errorf("%w: %s needs --table", errUsage, sub)
	}
	fids, err := parseList("fids", fidsS, parseInt64)
	if err != nil {
		return nil, err
	}
	if len(fids) == 0 {
		return nil, fmt.Errorf("%w: %s needs --fids", errUsage, sub)
	}
	if dim == 0 {
		st, err := cl.GetStats(ctx, true)
		if err != nil {
			return nil, err
		}
		for _, t := range st.GetTables() {
			if t.GetName() == tableName {
				dim = int(t.GetDim())
			}
		}
		if dim == 0 {
			return nil, fmt.Errorf("ps-client: shard 0 has no table %q", tableName)
		}
	}
	n := cl.NumShards()
	if sub == "lookup" {
		res, err := cl.Lookup(ctx, tableName, dim, fids, client.LookupOptions{CreateIfMissing: create, WantFound: true})
		if err != nil {
			return nil, err
		}
		rows := make([]psLookupRow, len(fids))
		for i, f := range fids {
			rows[i] = psLookupRow{Fid: f, Shard: int(uint64(f) % uint64(n)), Found: res.Found[i], Embedding: res.Embeddings[i*dim : (i+1)*dim]}
		}
		return map[string]any{"table": tableName, "dim": dim, "rows": rows, "num_found": res.NumFound, "num_initialized": res.NumInitialized}, nil
	}
	grads, err := parseList("grads", gradsS, parseFloat32)
	if err != nil {
		return nil, err
	}
	if len(grads) != len(fids)*dim {
		return nil, fmt.Errorf("%w: --grads has %d values for %d fids of dim %d (want %d)", errUsage, len(grads), len(fids), dim, len(fids)*dim)
	}
	lrs, err := parseList("lr", lrS, parseFloat32)
	if err != nil {
		return nil, err
	}
	res, err := cl.Apply(ctx, client.ApplyRequest{
		Table: tableName, Dim: dim, Fids: fids, Grads: grads, LRs: lrs, Step: step, UpdateTime: updateTime, RequestID: requestID,
	})
	if err != nil {
		return nil, err
	}
	return map[string]any{"table": tableName, "num_updated": res.NumUpdated, "num_not_found": res.NumNotFound, "num_created": res.NumCreated, "duplicates": res.Duplicates}, nil
}

// psShardStats is one shard of `ps-client stats`.
type psShardStats struct {
	Shard              int            `json:"shard"`
	NumShards          int            `json:"num_shards"`
	LookupCount        int64          `json:"lookup_count"`
	ApplyCount         int64          `json:"apply_gradients_count"`
	AvgLookupLatencyUs float64        `json:"avg_lookup_latency_us"`
	AvgApplyLatencyUs  float64        `json:"avg_apply_latency_us"`
	DuplicateRequests  int64          `json:"duplicate_requests"`
	Tables             []psTableStats `json:"tables,omitempty"`
	Error              string         `json:"error,omitempty"`
}

type psTableStats struct {
	Name           string `json:"name"`
	Size           int64  `json:"size"`
	Dim            int    `json:"dim"`
	MemoryBytes    int64  `json:"memory_bytes"`
	RawBytes       int64  `json:"raw_bytes"`
	MaxUpdateTsSec int64  `json:"max_update_ts_sec"`
}

func psStats(ctx context.Context, cl *client.Client, tables bool) (any, error) {
	all, err := cl.GetStatsAll(ctx, tables)
	out := make([]psShardStats, len(all))
	for k, st := range all {
		out[k] = psShardStats{Shard: k}
		if st == nil {
			out[k].Error = "unavailable"
			continue
		}
		out[k] = psShardStats{
			Shard: int(st.GetShard()), NumShards: int(st.GetNumShards()),
			LookupCount: st.GetLookupCount(), ApplyCount: st.GetApplyGradientsCount(),
			AvgLookupLatencyUs: st.GetAvgLookupLatencyUs(), AvgApplyLatencyUs: st.GetAvgApplyLatencyUs(),
			DuplicateRequests: st.GetDuplicateRequests(),
		}
		for _, t := range st.GetTables() {
			out[k].Tables = append(out[k].Tables, psTableStats{
				Name: t.GetName(), Size: t.GetSize(), Dim: int(t.GetDim()), MemoryBytes: t.GetMemoryBytes(),
				RawBytes: t.GetRawBytes(), MaxUpdateTsSec: t.GetMaxUpdateTsSec(),
			})
		}
	}
	return map[string]any{"shards": out}, err
}

type psShardHealth struct {
	Shard         int    `json:"shard"`
	Healthy       bool   `json:"healthy"`
	Status        int32  `json:"status"`
	Message       string `json:"message,omitempty"`
	RSSBytes      int64  `json:"rss_bytes"`
	MemLimitBytes int64  `json:"mem_limit_bytes"`
	Error         string `json:"error,omitempty"`
}

func psHealth(ctx context.Context, cl *client.Client, component string) (any, error) {
	all, err := cl.HealthCheckAll(ctx, component)
	out := make([]psShardHealth, len(all))
	var errs []error
	for k, h := range all {
		out[k] = psShardHealth{Shard: k}
		if h == nil {
			out[k].Error = "unavailable"
			continue
		}
		out[k].Healthy, out[k].Status, out[k].Message = h.GetHealthy(), h.GetStatus(), h.GetMessage()
		out[k].RSSBytes, out[k].MemLimitBytes = h.GetRssBytes(), h.GetMemLimitBytes()
		if !h.GetHealthy() {
			errs = append(errs, fmt.Errorf("ps-client: shard %d unhealthy: %s", k, h.GetMessage()))
		}
	}
	return map[string]any{"shards": out}, errors.Join(append([]error{err}, errs...)...)
}

type psShardSave struct {
	Shard   int    `json:"shard"`
	Path    string `json:"path,omitempty"`
	Entries int64  `json:"entries"`
	Error   string `json:"error,omitempty"`
}

func psSave(ctx context.Context, cl *client.Client) (any, error) {
	all, err := cl.Save(ctx)
	out := make([]psShardSave, len(all))
	for k, r := range all {
		out[k] = psShardSave{Shard: k}
		if r == nil {
			out[k].Error = "failed"
			continue
		}
		out[k].Path, out[k].Entries = r.GetPath(), r.GetEntries()
	}
	return map[string]any{"shards": out}, err
}
