package server

import (
	"crypto/tls"

	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/monolith-go/monolith/ps/paramsync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/monolith-go/monolith/internal/metricsrv"
	"github.com/monolith-go/monolith/ps/checkpoint"
	"github.com/monolith-go/monolith/ps/server/codec"
	"github.com/monolith-go/monolith/ps/table"
	"github.com/monolith-go/monolith/schemas/pspb"
)

// ErrInvalidOptions is wrapped by the error of Validate (and so of New) for inconsistent
// Options.
var ErrInvalidOptions = errors.New("ps/server: invalid options")

// Defaults of Options. A zero field of Options means its default.
const (
	DefaultListen            = "127.0.0.1:0"
	DefaultKeepCheckpoints   = 3
	DefaultMaxFidsPerRequest = 1 << 20
	DefaultMaxSubRequests    = codec.DefaultMaxSubRequests
	DefaultMaxRequestIDBytes = 256
	DefaultMaxMessageBytes   = codec.DefaultMaxMessageBytes
	DefaultMemLimitBytes     = int64(1) << 62 // Monolith's monolith_default_machine_info_mem_limit
	DefaultDedupWindow       = 1 << 14
	DefaultDedupRequesters   = 32
)

// Options configure one PS shard. Zero numeric and string fields take the defaults of
// DefaultOptions; Tables is required.
type Options struct {
	// Shard is this server's index in [0, NumShards); fid f belongs to shard
	// uint64(f) % NumShards (P10).
	Shard, NumShards int
	// Listen is the gRPC address (default "127.0.0.1:0", an ephemeral port).
	Listen string
	// MetricsListen is the HTTP address of /metrics (Prometheus text format) serving
	// Registry. Empty turns it off; a bare port ("9100" or ":9100") binds 127.0.0.1.
	MetricsListen string
	// Registry receives the shard's metrics, with the constant labels shard and
	// num_shards, so that several shards (and other components) of one process can share
	// it; they are removed from it when the server stops. Nil: the server's own registry,
	// with the Go and process collectors.
	Registry *prometheus.Registry
	// Tables are the tables this shard serves (the --tables file).
	Tables *pspb.TablesConfig
	// CheckpointDir, when set, holds this shard's checkpoints under
	// shard-<Shard>-of-<NumShards>/: the newest is restored by New, Serve writes one on a
	// graceful stop, and the Save RPC writes one on demand.
	CheckpointDir string
	// SaveEvery is the period of background saves (0: none); it needs CheckpointDir.
	SaveEvery time.Duration
	// RestoreFrom, when set, is the checkpoint folder of this shard restored at start
	// instead of the newest one of CheckpointDir: another job's checkpoint (spec §3.4
	// restore_dir) or an older one of this job (§3.5 restore_ckpt).
	RestoreFrom string
	// KeepCheckpoints is how many checkpoints Prune keeps after each save (default 3).
	KeepCheckpoints int
	// MaxFidsPerRequest bounds the fids of one request, summed over the sub-requests of the
	// batch RPCs (default 1<<20); more is rejected with codes.ResourceExhausted.
	MaxFidsPerRequest int
	// MaxSubRequests bounds the sub-requests of one batch RPC (default 1024): a batch of
	// many empty sub-requests costs memory without fids.
	MaxSubRequests int
	// MaxRequestIDBytes bounds a request id (default 256): the duplicate window keeps them.
	MaxRequestIDBytes int
	// MaxMessageBytes bounds gRPC messages both ways (default 64 MiB); a lookup whose
	// reply would exceed it is refused before its embeddings are allocated.
	MaxMessageBytes int
	// MemLimitBytes is the HealthCheck memory limit on the resident set (default 2^62).
	MemLimitBytes int64
	// DedupWindow is how many recent request ids (ApplyGradients, its batch sub-requests and
	// GlobalStep share one window) the shard remembers per requester to answer retries as
	// duplicates instead of applying them again (default 16384; a negative value disables
	// request-id deduplication). A requester is the part of an id before its first ':' or
	// '/': training's run id, one per worker process, so one worker's ids never push
	// another's out. Size it to the ids a retried bundle can resend: training sends about
	// (tables + 1) per step, so 16384 covers bundles (input files) of some 3,000 steps with
	// 4 tables. The window is saved with each checkpoint and restored with it. Each
	// remembered id costs about 100 bytes plus its length.
	DedupWindow int
	// DedupRequesters bounds the requesters with a window (default 32); a new one beyond
	// it evicts the window used least recently.
	DedupRequesters int
	// NonFiniteGradients is the policy for a NaN or infinite gradient: NonFiniteReject
	// (the default: the whole apply fails with status_code 1, naming the value and the
	// fid, and nothing is applied) or NonFiniteSkip (the fids whose gradient rows hold one
	// are left out, the others applied, and the skipped fids counted in
	// monolith_ps_nonfinite_gradients_skipped_total). A non-finite learning rate is always
	// rejected.
	NonFiniteGradients string
	// Sync, when set, pushes the rows this shard updates to serving replicas every
	// Sync.Every (spec/ps.md §9, package paramsync); the last push runs as Serve ends.
	Sync *paramsync.Options
	// TLS, when set, serves gRPC over TLS with it (internal/tlsconf; ClientAuth set for
	// mutual TLS). Nil serves plaintext.
	TLS *tls.Config
	// Seed seeds the tables' random initializers; each table of each shard derives its own.
	Seed uint64
	// Logger receives lifecycle and error logs (default slog.Default()).
	Logger *slog.Logger
}

// The NonFiniteGradients policies.
const (
	NonFiniteReject = "reject"
	NonFiniteSkip   = "skip"
)

// DefaultOptions returns the defaults of every field but Shard, NumShards (1) and Tables.
func DefaultOptions() Options {
	return Options{
		NumShards:          1,
		Listen:             DefaultListen,
		KeepCheckpoints:    DefaultKeepCheckpoints,
		MaxFidsPerRequest:  DefaultMaxFidsPerRequest,
		MaxSubRequests:     DefaultMaxSubRequests,
		MaxRequestIDBytes:  DefaultMaxRequestIDBytes,
		MaxMessageBytes:    DefaultMaxMessageBytes,
		MemLimitBytes:      DefaultMemLimitBytes,
		DedupWindow:        DefaultDedupWindow,
		DedupRequesters:    DefaultDedupRequesters,
		NonFiniteGradients: NonFiniteReject,
	}
}

// withDefaults fills the zero fields with their defaults.
func (o Options) withDefaults() Options {
	d := DefaultOptions()
	if o.Listen == "" {
		o.Listen = d.Listen
	}
	if o.KeepCheckpoints == 0 {
		o.KeepCheckpoints = d.KeepCheckpoints
	}
	if o.MaxFidsPerRequest == 0 {
		o.MaxFidsPerRequest = d.MaxFidsPerRequest
	}
	if o.MaxMessageBytes == 0 {
		o.MaxMessageBytes = d.MaxMessageBytes
	}
	if o.MaxSubRequests == 0 {
		o.MaxSubRequests = d.MaxSubRequests
	}
	if o.MaxRequestIDBytes == 0 {
		o.MaxRequestIDBytes = d.MaxRequestIDBytes
	}
	if o.MemLimitBytes == 0 {
		o.MemLimitBytes = d.MemLimitBytes
	}
	if o.DedupWindow == 0 {
		o.DedupWindow = d.DedupWindow
	}
	if o.DedupRequesters <= 0 {
		o.DedupRequesters = d.DedupRequesters
	}
	if o.NonFiniteGradients == "" {
		o.NonFiniteGradients = d.NonFiniteGradients
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// Validate reports every inconsistent field, joined, in an error matching
// ErrInvalidOptions. Zero fields that have a default are valid. New calls it.
func (o Options) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("ps/server: "+format, args...))
	}
	if o.NumShards < 1 {
		bad("num shards %d, want at least 1", o.NumShards)
	} else if o.Shard < 0 || o.Shard >= o.NumShards {
		bad("shard %d out of range [0, %d)", o.Shard, o.NumShards)
	}
	if err := table.CheckTables(o.Tables); err != nil {
		bad("tables: %v", err)
	}
	if o.SaveEvery < 0 {
		bad("save every %v is negative", o.SaveEvery)
	}
	if o.SaveEvery > 0 && o.CheckpointDir == "" {
		bad("save every %v needs a checkpoint directory", o.SaveEvery)
	}
	if o.KeepCheckpoints < 0 {
		bad("keep checkpoints %d is negative", o.KeepCheckpoints)
	}
	if o.MaxFidsPerRequest < 0 {
		bad("max fids per request %d is negative", o.MaxFidsPerRequest)
	}
	if o.MaxMessageBytes < 0 {
		bad("max message bytes %d is negative", o.MaxMessageBytes)
	}
	if o.MaxSubRequests < 0 || o.MaxRequestIDBytes < 0 {
		bad("max sub-requests %d and max request id bytes %d must not be negative", o.MaxSubRequests, o.MaxRequestIDBytes)
	}
	switch o.NonFiniteGradients {
	case "", NonFiniteReject, NonFiniteSkip:
	default:
		bad("non-finite gradient policy %q: want %s or %s", o.NonFiniteGradients, NonFiniteReject, NonFiniteSkip)
	}
	if o.MemLimitBytes < 0 {
		bad("memory limit %d is negative", o.MemLimitBytes)
	}
	if o.Listen != "" {
		if _, _, err := net.SplitHostPort(o.Listen); err != nil {
			bad("listen address %q: %v", o.Listen, err)
		}
	}
	if o.MetricsListen != "" {
		if err := metricsrv.Validate(o.MetricsListen); err != nil {
			bad("%v", err)
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return optionsError{errors.Join(errs...)}
}

// optionsError is Validate's error: the joined problems, matching ErrInvalidOptions.
type optionsError struct{ error }

func (e optionsError) Unwrap() error        { return e.error }
func (e optionsError) Is(target error) bool { return target == ErrInvalidOptions }

// ShardDir is the folder of shard's checkpoints under a checkpoint directory
// (checkpoint.ShardDir).
func ShardDir(checkpointDir string, shard, numShards int) string {
	return checkpoint.ShardDir(checkpointDir, shard, numShards)
}
