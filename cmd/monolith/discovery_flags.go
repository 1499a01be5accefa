package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/monolith-go/monolith/ps/discovery"
)

// discoveryFlags are the discovery flags of ps, ps-client and cluster (train maps the same
// names onto its runner keys).
type discoveryFlags struct {
	Type     string        // --discovery: one of discovery.Types
	ZK       string        // --zk: ZooKeeper servers
	Job      string        // --job: the ZooKeeper folder /monolith/NAME, or the Consul psm
	TFConfig string        // --tf-config (default $TF_CONFIG)
	PS       string        // --ps: static addresses, comma-separated
	Wait     time.Duration // --discovery-wait
}

// register binds the flags; withPS adds --ps (static addresses).
func (d *discoveryFlags) register(fs *flag.FlagSet, withPS bool) {
	fs.StringVar(&d.Type, "discovery", discovery.TypeStatic, "discovery backend: "+strings.Join(discovery.Types, ", "))
	fs.StringVar(&d.ZK, "zk", "", "ZooKeeper servers host:port[,...] (--discovery zk)")
	fs.StringVar(&d.Job, "job", "monolith", "the job's name: ZooKeeper folder /monolith/NAME (zk), or its psm (consul)")
	fs.StringVar(&d.TFConfig, "tf-config", "", "the TF_CONFIG cluster JSON (--discovery tf_config; default $TF_CONFIG)")
	fs.DurationVar(&d.Wait, "discovery-wait", 60*time.Second, "bound of every wait on the discovery backend")
	if withPS {
		fs.StringVar(&d.PS, "ps", "", "PS shard addresses host:port[,...] in shard order (--discovery static)")
	}
}

// staticAddrs splits --ps, keeping empty elements (an empty shard address is an error).
func (d *discoveryFlags) staticAddrs() []string {
	if strings.TrimSpace(d.PS) == "" {
		return nil
	}
	out := strings.Split(d.PS, ",")
	for i := range out {
		out[i] = strings.TrimSpace(out[i])
	}
	return out
}

// open opens the backend the flags select, bounded by d.Wait. Errors name the flag or
// the backend.
func (d *discoveryFlags) open(ctx context.Context, log *slog.Logger) (discovery.Backend, discovery.Identity, error) {
	tfc := d.TFConfig
	if tfc == "" {
		tfc = os.Getenv("TF_CONFIG")
	}
	c := discovery.Config{Type: d.Type, JobName: d.Job, PSM: d.Job, ZKServers: d.ZK, TFConfig: tfc, Static: d.staticAddrs(), Logger: log}
	switch d.Type {
	case discovery.TypeZK:
		if d.ZK == "" {
			return nil, discovery.Identity{Index: -1}, fmt.Errorf("%w: --discovery zk needs --zk SERVERS", errUsage)
		}
	case discovery.TypeStatic:
		if len(c.Static) == 0 {
			return nil, discovery.Identity{Index: -1}, fmt.Errorf("%w: --discovery static needs --ps ADDRS", errUsage)
		}
	}
	wait := d.Wait
	if wait <= 0 {
		wait = 60 * time.Second
	}
	octx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	b, id, err := discovery.New(octx, c, os.LookupEnv)
	if err != nil {
		return nil, id, fmt.Errorf("discovery %s: %w", d.Type, err)
	}
	return b, id, nil
}
