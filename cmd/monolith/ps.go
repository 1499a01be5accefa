package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"

	"github.com/monolith-go/monolith/ps/discovery"
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
	advertise := fs.String("advertise", "", "address registered in ZooKeeper (default: the address listened on)")
	tablesFile := fs.String("tables", "", "text-format TablesConfig file with the tables to serve (required)")
	zk := fs.String("zk", "", "ZooKeeper servers host:port[,host:port...]; registers this shard when set")
	zkPath := fs.String("zk-path", "/monolith/ps", "ZooKeeper root of the PS membership")
	ckptDir := fs.String("checkpoint-dir", "", "checkpoint directory (restored at start, written at shutdown); shard I of N uses DIR/shard-I-of-N")
	saveEvery := fs.Duration("save-every", 0, "period of background checkpoints (0: only at shutdown and on Save)")
	keep := fs.Int("keep-checkpoints", d.KeepCheckpoints, "checkpoints kept per shard")
	metricsListen := fs.String("metrics-listen", "", "HTTP address of /metrics (Prometheus text); a bare port binds 127.0.0.1")
	memLimit := fs.Int64("mem-limit", d.MemLimitBytes, "HealthCheck memory limit on the resident set, in bytes")
	maxFids := fs.Int("max-fids", d.MaxFidsPerRequest, "maximum fids per request (summed over batch sub-requests)")
	maxMsg := fs.Int("max-message-bytes", d.MaxMessageBytes, "maximum gRPC message size")
	dedupWindow := fs.Int("dedup-window", d.DedupWindow, "recent request ids remembered to answer retried applies and global-step increments as duplicates (negative: off)")
	seed := fs.Uint64("seed", 0, "seed of the random initializers")
	verbose := fs.Bool("v", false, "verbose logging")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return fmt.Errorf("%w: ps takes no arguments (got %q)", errUsage, fs.Args())
	}
	if *tablesFile == "" {
		return fmt.Errorf("%w: ps needs --tables", errUsage)
	}
	log := loggerAt(stderr, *verbose, slog.LevelInfo)

	cfg, err := table.LoadTablesConfig(*tablesFile)
	if err != nil {
		return err
	}
	opts := server.Options{
		Shard: *shard, NumShards: *numShards, Listen: *listen, MetricsListen: *metricsListen,
		Tables: cfg, CheckpointDir: *ckptDir, SaveEvery: *saveEvery, KeepCheckpoints: *keep,
		MaxFidsPerRequest: *maxFids, MaxMessageBytes: *maxMsg, MemLimitBytes: *memLimit,
		DedupWindow: *dedupWindow, Seed: *seed, Logger: log,
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

	// Serve on a context of its own so that the ZooKeeper node goes away before the server
	// stops answering.
	serveCtx, stopServe := context.WithCancel(context.WithoutCancel(ctx))
	defer stopServe()
	var reg *discovery.Registration
	var unregister sync.Once
	deregister := func() {
		unregister.Do(func() {
			if reg != nil {
				if err := reg.Close(); err != nil {
					log.Warn("leave ZooKeeper", "err", err)
				}
			}
		})
	}
	if *zk != "" {
		addr := *advertise
		if addr == "" {
			addr = srv.Addr()
		}
		servers, err := discovery.ParseServers(*zk)
		if err != nil {
			return fmt.Errorf("%w: --zk: %v", errUsage, err)
		}
		reg, err = discovery.Register(ctx, servers, *zkPath, *shard, *numShards, addr, log)
		if err != nil {
			return fmt.Errorf("ps shard %d: register in ZooKeeper %s%s: %w", *shard, *zk, *zkPath, err)
		}
		log.Info("registered in ZooKeeper", "zk", *zk, "path", *zkPath, "addr", addr)
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
