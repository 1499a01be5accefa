package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/monolith-go/monolith/internal/atomicfile"
	"github.com/monolith-go/monolith/internal/tlsconf"
	"github.com/monolith-go/monolith/ps/discovery"
	"github.com/monolith-go/monolith/ps/paramsync"
	"github.com/monolith-go/monolith/ps/server"
	"github.com/monolith-go/monolith/ps/table"
)

// runPS is `monolith ps`: one parameter-server shard until the context ends (SIGINT,
// SIGTERM), then a graceful stop with a final checkpoint.
func runPS(ctx context.Context, args []string, _, stderr io.Writer) error {
	fs := newFlagSet("ps", stderr)
	d := server.DefaultOptions()
	shard := fs.Int("shard", 0, "index of this shard in [0, --num-shards)")
	numShards := fs.Int("num-shards", 1, "number of PS shards; fid f lives on shard uint64(f) % N")
	listen := fs.String("listen", d.Listen, "gRPC listen address")
	advertise := fs.String("advertise", "", "address registered with the discovery backend (default: the address listened on)")
	addrFile := fs.String("addr-file", "", "once listening (and registered), write the bound address to `PATH` (atomically), so a launcher learns a :0 port")
	tablesFile := fs.String("tables", "", "text-format TablesConfig file with the tables to serve (required)")
	var disc discoveryFlags
	disc.register(fs, false)
	ckptDir := fs.String("checkpoint-dir", "", "checkpoint directory (restored at start, written at shutdown); shard I of N uses DIR/shard-I-of-N")
	saveEvery := fs.Duration("save-every", 0, "period of background checkpoints (0: only at shutdown and on Save)")
	keep := fs.Int("keep-checkpoints", d.KeepCheckpoints, "checkpoints kept per shard")
	metricsListen := fs.String("metrics-listen", "", "HTTP address of /metrics (Prometheus text); a bare port binds 127.0.0.1")
	memLimit := fs.Int64("mem-limit", d.MemLimitBytes, "HealthCheck memory limit on the resident set, in bytes")
	maxFids := fs.Int("max-fids", d.MaxFidsPerRequest, "maximum fids per request (summed over batch sub-requests)")
	maxMsg := fs.Int("max-message-bytes", d.MaxMessageBytes, "maximum gRPC message size (requests, and lookup replies before they are built)")
	maxSub := fs.Int("max-sub-requests", d.MaxSubRequests, "maximum sub-requests of one batch call")
	maxID := fs.Int("max-request-id-bytes", d.MaxRequestIDBytes, "maximum request id length")
	nonFinite := fs.String("nonfinite-gradients", d.NonFiniteGradients, "a NaN or infinite gradient: reject the apply (status 1, naming the value and the fid) or skip the fids it touches (counted in monolith_ps_nonfinite_gradients_skipped_total)")
	dedupWindow := fs.Int("dedup-window", d.DedupWindow, "recent request ids remembered per requester (a training worker) to answer retried applies and global-step increments as duplicates, saved with each checkpoint; about (tables + 1) per step of a bundle (negative: off)")
	dedupRequesters := fs.Int("dedup-requesters", d.DedupRequesters, "requesters (training workers) with a duplicate window; beyond it the least recently used is forgotten")
	seed := fs.Uint64("seed", 0, "seed of the random initializers")
	verbose := fs.Bool("v", false, "verbose logging")
	syncTo := fs.String("sync-to", "", "parameter sync: serving replicas (monolith serve) at `ADDRS` (comma-separated) get the rows this shard updates")
	syncModel := fs.String("sync-model", "", "parameter sync: the served model's name (required with --sync-to)")
	syncEvery := fs.Duration("sync-every", paramsync.DefaultEvery, "parameter sync: the push period")
	tlsc := tlsconf.AddFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return fmt.Errorf("%w: ps takes no arguments (got %q)", errUsage, fs.Args())
	}
	if *tablesFile == "" {
		return fmt.Errorf("%w: ps needs --tables", errUsage)
	}
	serverTLS, err := tlsc.Server()
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	clientTLS, err := tlsc.Client() // to ask a registered shard whether it still answers
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	log := loggerAt(stderr, *verbose, slog.LevelInfo)
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })

	// The backend first: TF_CONFIG and MLP say which shard this is, of how many, and where
	// it listens.
	var backend discovery.Backend
	if disc.Type != discovery.TypeStatic {
		b, id, err := disc.open(ctx, log)
		if err != nil {
			return fmt.Errorf("ps: %w", err)
		}
		defer b.Close()
		backend = b
		if id.Index >= 0 {
			if id.ServerType != "ps" {
				return fmt.Errorf("%w: discovery %s says this process is %s %d, not a ps", errUsage, disc.Type, id.ServerType, id.Index)
			}
			all, err := b.Query(ctx, "ps")
			if err != nil {
				return fmt.Errorf("ps: discovery %s: %w", disc.Type, err)
			}
			for _, f := range []struct {
				name     string
				flag     *int
				fromDisc int
			}{{"shard", shard, id.Index}, {"num-shards", numShards, len(all)}} {
				if set[f.name] && *f.flag != f.fromDisc {
					return fmt.Errorf("%w: --%s %d, but discovery %s says %d", errUsage, f.name, *f.flag, disc.Type, f.fromDisc)
				}
				*f.flag = f.fromDisc
			}
			if id.Addr != "" && !set["listen"] {
				*listen = id.Addr
			}
		}
	}

	cfg, err := table.LoadTablesConfig(*tablesFile)
	if err != nil {
		return err
	}
	opts := server.Options{
		Shard: *shard, NumShards: *numShards, Listen: *listen, MetricsListen: *metricsListen,
		Tables: cfg, CheckpointDir: *ckptDir, SaveEvery: *saveEvery, KeepCheckpoints: *keep,
		MaxFidsPerRequest: *maxFids, MaxMessageBytes: *maxMsg, MemLimitBytes: *memLimit,
		MaxSubRequests: *maxSub, MaxRequestIDBytes: *maxID, NonFiniteGradients: *nonFinite,
		DedupWindow: *dedupWindow, DedupRequesters: *dedupRequesters, Seed: *seed, Logger: log, TLS: serverTLS,
	}
	if *syncTo != "" {
		if *syncModel == "" || *syncEvery <= 0 {
			return fmt.Errorf("%w: --sync-to needs --sync-model and a positive --sync-every", errUsage)
		}
		opts.Sync = &paramsync.Options{Targets: strings.Split(*syncTo, ","), Model: *syncModel, Every: *syncEvery, TLS: clientTLS}
	} else if *syncModel != "" {
		return fmt.Errorf("%w: --sync-model goes with --sync-to", errUsage)
	}
	srv, err := server.New(opts) // validates opts
	if errors.Is(err, server.ErrInvalidOptions) {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if err != nil {
		return err
	}
	defer srv.Close()
	log.Info(fmt.Sprintf("ps shard %d/%d listening on %s", *shard, *numShards, srv.Addr()), "addr", srv.Addr(), "metrics", srv.MetricsAddr())

	// Serve on a context of its own so that the registration goes away before the server
	// stops answering.
	serveCtx, stopServe := context.WithCancel(context.WithoutCancel(ctx))
	defer stopServe()
	addr := *advertise
	if addr == "" {
		addr = srv.Addr()
	}
	var unregister sync.Once
	deregister := func() {
		unregister.Do(func() {
			if backend == nil {
				return
			}
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			if err := backend.Deregister(dctx, "ps", *shard, addr); err != nil {
				log.Warn("deregister", "discovery", disc.Type, "err", err)
			}
			if err := backend.Close(); err != nil {
				log.Warn("close discovery", "discovery", disc.Type, "err", err)
			}
		})
	}
	if backend != nil {
		if err := refuseLiveShard(ctx, backend, *shard, addr, clientTLS); err != nil {
			return err
		}
		rctx, cancel := context.WithTimeout(ctx, disc.Wait)
		err := backend.Register(rctx, "ps", *shard, addr)
		cancel()
		if err != nil {
			return fmt.Errorf("ps shard %d: register with discovery %s (job %s) within %v: %w", *shard, disc.Type, disc.Job, disc.Wait, err)
		}
		log.Info("registered", "discovery", disc.Type, "job", disc.Job, "name", fmt.Sprintf("ps.%d", *shard), "addr", addr)
	}
	if *addrFile != "" {
		if err := atomicfile.WriteFile(*addrFile, []byte(srv.Addr()+"\n")); err != nil {
			return fmt.Errorf("ps: --addr-file: %w", err)
		}
	}
	stop := context.AfterFunc(ctx, func() { deregister(); stopServe() })
	defer stop()
	err = srv.Serve(serveCtx)
	deregister()
	if errors.Is(err, server.ErrClosed) {
		return nil
	}
	return err
}

// refuseLiveShard fails when discovery already lists another address for shard and a PS
// answers there: two processes must not serve one shard. A registration whose address
// does not answer (a crashed shard whose session has not expired yet) is replaced.
func refuseLiveShard(ctx context.Context, b discovery.Backend, shard int, addr string, tc *tls.Config) error {
	qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	got, err := b.Query(qctx, "ps")
	if err != nil {
		return fmt.Errorf("ps shard %d: read the membership: %w", shard, err)
	}
	old, ok := got[shard]
	if !ok || old == addr {
		return nil
	}
	conn, err := grpc.NewClient(old, tlsconf.DialOption(tc))
	if err != nil {
		return nil // not an address one can dial: nothing serves there
	}
	defer conn.Close()
	pctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	resp, err := healthpb.NewHealthClient(conn).Check(pctx, &healthpb.HealthCheckRequest{})
	if err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_SERVING {
		return fmt.Errorf("ps shard %d: already served by %s (registered as ps.%d, and it answers): a second PS for a live shard refuses to start", shard, old, shard)
	}
	return nil
}
