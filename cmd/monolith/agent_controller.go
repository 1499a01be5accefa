package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/monolith-go/monolith/internal/zk"
	"github.com/monolith-go/monolith/ps/discovery"
	"github.com/monolith-go/monolith/serving/agentctl"
	"github.com/monolith-go/monolith/serving/savedmodel"
)

// runAgentController is `monolith agent-controller`, the reference's agent_controller
// (§1.10, serving/agentctl): decl declares every sub-graph of an export under
// /{bzid}/saved_models, pub and unpub add or remove the declared sub-graphs matching
// --model_name MODEL:GLOB to or from /{bzid}/layouts/{layout}, and bzid_info prints what
// ZooKeeper holds under the bzid as indented JSON. Like the reference it prints an empty
// line first.
func runAgentController(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("agent-controller", stderr)
	zkServers := fs.String("zk_servers", "", "ZooKeeper connection string host:port[,host:port...] (required)")
	bzid := fs.String("bzid", "test", "namespace")
	exportBase := fs.String("export_base", "", "exported model base path (decl)")
	overwrite := fs.Int("overwrite", 0, "overwrite existing saved_model configs (decl)")
	modelName := fs.String("model_name", "", "decl: the model name (wins over the export's, S5); pub/unpub: MODEL:GLOB of sub-graphs")
	layout := fs.String("layout", "", "layout name under /{bzid}/layouts (pub, unpub)")
	arch := fs.String("arch", "entry_ps", "serving architecture (only entry_ps)")
	cmd := fs.String("cmd", "bzid_info", "decl|pub|unpub|bzid_info")
	timeout := fs.Duration("timeout", 30*time.Second, "bound on the whole command")
	verbose := fs.Bool("v", false, "verbose logging")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return fmt.Errorf("%w: agent-controller takes no arguments (got %q)", errUsage, fs.Args())
	}
	var pattern agentctl.Pattern
	switch *cmd {
	case "decl":
		if *exportBase == "" {
			return fmt.Errorf("%w: decl needs --export_base", errUsage)
		}
	case "pub", "unpub":
		if *layout == "" || *modelName == "" {
			return fmt.Errorf("%w: %s needs --layout and --model_name MODEL:GLOB", errUsage, *cmd)
		}
		var err error
		if pattern, err = agentctl.ParsePattern(*modelName); err != nil {
			return fmt.Errorf("%w: --model_name: %w", errUsage, err)
		}
	case "bzid_info":
	default:
		return fmt.Errorf("%w: unsupported cmd %q, options are decl|pub|unpub|bzid_info", errUsage, *cmd)
	}
	if *arch != "entry_ps" {
		return fmt.Errorf("%w: only the entry_ps architecture is supported (got --arch %q)", errUsage, *arch)
	}
	servers, err := discovery.ParseServers(*zkServers)
	if err != nil || len(servers) == 0 {
		return fmt.Errorf("%w: agent-controller needs --zk_servers host:port[,host:port...] (%v)", errUsage, err)
	}
	log := loggerAt(stderr, *verbose, slog.LevelInfo)
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	fmt.Fprintln(stdout)
	c, err := agentctl.Open(ctx, *bzid, zk.Options{Servers: servers, Auth: os.Getenv("ZK_AUTH"), Logger: log})
	if err != nil {
		return err
	}
	defer c.Close()
	switch *cmd {
	case "decl":
		_, err = c.Declare(ctx, *exportBase, *modelName, *overwrite != 0)
	case "pub":
		_, err = c.Publish(ctx, *layout, pattern)
	case "unpub":
		_, err = c.Unpublish(ctx, *layout, pattern)
	default:
		info, err := c.BzidInfo(ctx)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(stdout, string(info.JSON()))
		return err
	}
	return err
}

// runFakeExport is `monolith fake-export`: an export tree for agent demos and tests (see
// serving/savedmodel.WriteFakeExport).
func runFakeExport(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("fake-export", stderr)
	out := fs.String("out", "", "export base folder to write (required)")
	model := fs.String("model", "test_ffm_model", "model name in the entry graph's remote-predict ops")
	numPS := fs.Int("num-ps", 2, "number of ps_i sub-graphs")
	version := fs.Int64("version", 1, "version folder name")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 || *out == "" {
		return fmt.Errorf("%w: fake-export needs --out and takes no arguments", errUsage)
	}
	if err := savedmodel.WriteFakeExport(*out, *model, *numPS, *version); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s: entry and %d ps sub-graphs of %s, version %d\n", *out, *numPS, *model, *version)
	return nil
}
