package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/monolith-go/monolith/internal/pytext"
	"github.com/monolith-go/monolith/ps/discovery"
	"github.com/monolith-go/monolith/serving/datadef"
	"github.com/monolith-go/monolith/serving/savedmodel"
	"github.com/monolith-go/monolith/serving/zk"
)

// runAgentController is `monolith agent-controller`, the reference's agent_controller
// (§1.10): decl declares every sub-graph of an export under /{bzid}/saved_models, pub and
// unpub add or remove the declared sub-graphs matching --model_name MODEL:GLOB to or from
// /{bzid}/layouts/{layout}, and bzid_info prints what ZooKeeper holds under the bzid as
// indented JSON. Like the reference it prints an empty line first.
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
	switch *cmd {
	case "decl", "pub", "unpub", "bzid_info":
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
	b, err := zk.OpenBackend(ctx, *bzid, zk.Options{Servers: servers, Auth: os.Getenv("ZK_AUTH"), Logger: log})
	if err != nil {
		return err
	}
	defer b.Close()
	switch *cmd {
	case "decl":
		if *exportBase == "" {
			return fmt.Errorf("%w: decl needs --export_base", errUsage)
		}
		_, err := declareSavedModel(ctx, b, *exportBase, *modelName, *overwrite != 0, log)
		return err
	case "pub", "unpub":
		if *layout == "" || *modelName == "" {
			return fmt.Errorf("%w: %s needs --layout and --model_name MODEL:GLOB", errUsage, *cmd)
		}
		_, err := mapModelToLayout(ctx, b, *modelName, "/"+*bzid+"/layouts/"+*layout, *cmd == "pub", log)
		return err
	default:
		info, err := b.BzidInfo(ctx)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(stdout, string(info.JSON()))
		return err
	}
}

// declareSavedModel declares every entry of exportBase as {model}:{entry} with policy
// latest for entry and latest_once for the others. The model name is --model_name when
// given, else the export's (S5; a mismatch is logged, and an export without a remote-predict
// node needs --model_name); without overwrite an already declared model is an error.
func declareSavedModel(ctx context.Context, b *zk.Backend, exportBase, userName string, overwrite bool, log *slog.Logger) (string, error) {
	exported, ok, err := savedmodel.FindModelName(exportBase)
	if err != nil && userName == "" {
		return "", fmt.Errorf("decl: %w", err)
	}
	if err != nil {
		log.Warn("decl: the export's model name is unknown; --model_name is used", "err", err)
	}
	name := userName
	switch {
	case name == "" && !ok:
		return "", fmt.Errorf("decl: no %s node in the entry graph of %s: give --model_name", savedmodel.RemotePredictOp, exportBase)
	case name == "":
		name = exported
	case ok && exported != name:
		log.Error("decl: --model_name differs from the export's; --model_name is used (S5)", "model_name", name, "exported_model_name", exported)
	}
	existing, err := b.ListSavedModels(ctx, name)
	if err != nil {
		return "", fmt.Errorf("decl: %w", err)
	}
	if len(existing) > 0 && !overwrite {
		return "", fmt.Errorf("decl: %s exists and not in overwrite mode (--overwrite 1)", name)
	}
	ents, err := os.ReadDir(exportBase)
	if err != nil {
		return "", fmt.Errorf("decl: %w", err)
	}
	for _, e := range ents {
		policy := "latest_once"
		if e.Name() == "entry" {
			policy = "latest"
		}
		cfg := datadef.SavedModelDeployConfig{
			ModelBasePath: datadef.Some(pytext.PathJoin(exportBase, e.Name())), VersionPolicy: datadef.Some(policy),
		}
		if err := b.DeclSavedModel(ctx, datadef.SavedModel{ModelName: name, SubGraph: e.Name()}, cfg); err != nil {
			return "", fmt.Errorf("decl: %w", err)
		}
	}
	log.Info("declared saved models", "model", name, "export_base", exportBase, "sub_graphs", len(ents))
	return name, nil
}

// mapModelToLayout adds (pub) or removes (unpub) the declared sub-graphs of MODEL matching
// GLOB (Python fnmatch) to or from layoutPath, and returns them.
func mapModelToLayout(ctx context.Context, b *zk.Backend, pattern, layoutPath string, pub bool, log *slog.Logger) ([]string, error) {
	model, glob, ok := strings.Cut(pattern, ":")
	if !ok {
		return nil, fmt.Errorf("%w: --model_name %q is not MODEL:GLOB", errUsage, pattern)
	}
	re, err := fnmatchRegexp(glob)
	if err != nil {
		return nil, fmt.Errorf("%w: --model_name %q: %v", errUsage, pattern, err)
	}
	sms, err := b.ListSavedModels(ctx, model)
	if err != nil {
		return nil, err
	}
	var matched []string
	for _, sm := range sms {
		if !re.MatchString(sm.SubGraph) {
			continue
		}
		matched = append(matched, sm.SubGraph)
		if pub {
			log.Info("publishing", "saved_model", sm.String(), "layout", layoutPath)
			err = b.AddToLayout(ctx, layoutPath, sm)
		} else {
			log.Info("deleting", "saved_model", sm.String(), "layout", layoutPath)
			err = b.RemoveFromLayout(ctx, layoutPath, sm)
		}
		if err != nil {
			return matched, err
		}
	}
	if len(matched) == 0 {
		log.Warn("no declared sub-graph matches", "model", model, "pattern", glob)
	}
	sort.Strings(matched)
	return matched, nil
}

// fnmatchRegexp translates a Python fnmatch pattern (*, ?, [seq], [!seq]; everything else
// literal) to an anchored regular expression.
func fnmatchRegexp(glob string) (*regexp.Regexp, error) {
	var sb strings.Builder
	sb.WriteString(`\A(?s:`)
	for i := 0; i < len(glob); i++ {
		switch c := glob[i]; c {
		case '*':
			sb.WriteString(".*")
		case '?':
			sb.WriteString(".")
		case '[':
			j := i + 1
			if j < len(glob) && glob[j] == '!' {
				j++
			}
			if j < len(glob) && glob[j] == ']' {
				j++
			}
			for j < len(glob) && glob[j] != ']' {
				j++
			}
			if j >= len(glob) { // no closing bracket: a literal '['
				sb.WriteString(`\[`)
				continue
			}
			set := glob[i+1 : j]
			sb.WriteByte('[')
			if strings.HasPrefix(set, "!") {
				sb.WriteByte('^')
				set = set[1:]
			} else if strings.HasPrefix(set, "^") {
				sb.WriteByte('\\')
			}
			sb.WriteString(strings.NewReplacer(`\`, `\\`, `[`, `\[`).Replace(set))
			sb.WriteByte(']')
			i = j
		default:
			sb.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	sb.WriteString(`)\z`)
	re, err := regexp.Compile(sb.String())
	if err != nil {
		return nil, errors.New("bad pattern: " + err.Error())
	}
	return re, nil
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
