// Package agentctl is Monolith's agent_controller (spec §1.10) on serving/zk's Backend: Declare writes every sub-graph of an export to /{bzid}/saved_models, Publish and Unpublish add or remove the declared sub-graphs matching MODEL:GLOB to or from /{bzid}/layouts/{layout}, and BzidInfo reads what ZooKeeper holds under the bzid.
// Decisions: S5, a given model name wins over the export's (a mismatch is logged); S14, deploy configs join paths as Python's os.path.join does, uncleaned; GLOB is Python's fnmatch (*, ?, [seq], [!seq]).
// `monolith agent-controller` (cmd/monolith) only parses its flags and prints; the tests run a real ZooKeeper (S15).
package agentctl

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"sort"
	"strings"

	"github.com/monolith-go/monolith/internal/pytext"
	izk "github.com/monolith-go/monolith/internal/zk"
	"github.com/monolith-go/monolith/serving/datadef"
	"github.com/monolith-go/monolith/serving/savedmodel"
	"github.com/monolith-go/monolith/serving/zk"
)

// ErrInvalidArgument reports an unusable pattern, layout name or export.
var ErrInvalidArgument = errors.New("serving/agentctl: invalid argument")

// Controller runs agent_controller's commands under one bzid. Close releases it.
type Controller struct {
	b   *zk.Backend
	log *slog.Logger
}

// Open connects to ZooKeeper (ctx bounds the wait for a session) and returns the
// Controller of bzid.
func Open(ctx context.Context, bzid string, opts izk.Options) (*Controller, error) {
	b, err := zk.OpenBackend(ctx, bzid, opts)
	if err != nil {
		return nil, fmt.Errorf("serving/agentctl: %w", err)
	}
	return &Controller{b: b, log: b.Client().Logger().With("bzid", bzid)}, nil
}

// Close closes the connection; it is idempotent and returns nil.
func (c *Controller) Close() error { return c.b.Close() }

// Declare declares every entry of exportBase as {model}:{entry}, deploy config
// model_base_path {exportBase}/{entry} with version policy latest for entry and
// latest_once for the others, and returns the model name: modelName when given, else the
// export's (S5: a mismatch is logged; an export without a remote-predict node needs
// modelName). Without overwrite an already declared model is an error.
func (c *Controller) Declare(ctx context.Context, exportBase, modelName string, overwrite bool) (string, error) {
	exported, ok, err := savedmodel.FindModelName(exportBase)
	if err != nil && modelName == "" {
		return "", fmt.Errorf("serving/agentctl: decl: %w", err)
	}
	if err != nil {
		c.log.Warn("decl: the export's model name is unknown; --model_name is used", "err", err)
	}
	name := modelName
	switch {
	case name == "" && !ok:
		return "", fmt.Errorf("%w: decl: no %s node in the entry graph of %s: give the model name (--model_name)", ErrInvalidArgument, savedmodel.RemotePredictOp, exportBase)
	case name == "":
		name = exported
	case ok && exported != name:
		c.log.Error("decl: --model_name differs from the export's; --model_name is used (S5)", "model_name", name, "exported_model_name", exported)
	}
	existing, err := c.b.ListSavedModels(ctx, name)
	if err != nil {
		return "", fmt.Errorf("serving/agentctl: decl %s: %w", name, err)
	}
	if len(existing) > 0 && !overwrite {
		return "", fmt.Errorf("serving/agentctl: decl: %s exists and not in overwrite mode (--overwrite 1)", name)
	}
	ents, err := os.ReadDir(exportBase)
	if err != nil {
		return "", fmt.Errorf("serving/agentctl: decl: %w", err)
	}
	for _, e := range ents {
		policy := "latest_once"
		if e.Name() == "entry" {
			policy = "latest"
		}
		cfg := datadef.SavedModelDeployConfig{
			ModelBasePath: datadef.Some(pytext.PathJoin(exportBase, e.Name())), VersionPolicy: datadef.Some(policy),
		}
		if err := c.b.DeclSavedModel(ctx, datadef.SavedModel{ModelName: name, SubGraph: e.Name()}, cfg); err != nil {
			return "", fmt.Errorf("serving/agentctl: decl %s:%s: %w", name, e.Name(), err)
		}
	}
	c.log.Info("declared saved models", "model", name, "export_base", exportBase, "sub_graphs", len(ents))
	return name, nil
}

// Publish adds the declared sub-graphs that p matches to the layout (a name under
// /{bzid}/layouts) and returns them in name order.
func (c *Controller) Publish(ctx context.Context, layout string, p Pattern) ([]string, error) {
	return c.mapToLayout(ctx, layout, p, true)
}

// Unpublish removes the declared sub-graphs that p matches from the layout and returns
// them in name order; sub-graphs not in the layout are no error.
func (c *Controller) Unpublish(ctx context.Context, layout string, p Pattern) ([]string, error) {
	return c.mapToLayout(ctx, layout, p, false)
}

// mapToLayout is Publish (pub) or Unpublish.
func (c *Controller) mapToLayout(ctx context.Context, layout string, p Pattern, pub bool) ([]string, error) {
	if p.re == nil {
		return nil, fmt.Errorf("%w: a pattern not made by ParsePattern", ErrInvalidArgument)
	}
	if layout == "" {
		return nil, fmt.Errorf("%w: empty layout name", ErrInvalidArgument)
	}
	layoutPath := "/" + c.b.Bzid() + "/layouts/" + layout
	sms, err := c.b.ListSavedModels(ctx, p.Model)
	if err != nil {
		return nil, fmt.Errorf("serving/agentctl: %s: %w", p, err)
	}
	var matched []string
	for _, sm := range sms {
		if !p.Match(sm.SubGraph) {
			continue
		}
		matched = append(matched, sm.SubGraph)
		if pub {
			c.log.Info("publishing", "saved_model", sm.String(), "layout", layoutPath)
			err = c.b.AddToLayout(ctx, layoutPath, sm)
		} else {
			c.log.Info("deleting", "saved_model", sm.String(), "layout", layoutPath)
			err = c.b.RemoveFromLayout(ctx, layoutPath, sm)
		}
		if err != nil {
			return matched, fmt.Errorf("serving/agentctl: %s in %s: %w", sm, layoutPath, err)
		}
	}
	if len(matched) == 0 {
		c.log.Warn("no declared sub-graph matches", "model", p.Model, "pattern", p.Glob)
	}
	sort.Strings(matched)
	return matched, nil
}

// BzidInfo reads the saved models, container services, layouts and bindings of the bzid
// (the reference's bzid_info; its JSON method gives the printed text).
func (c *Controller) BzidInfo(ctx context.Context) (*zk.BzidInfo, error) {
	info, err := c.b.BzidInfo(ctx)
	if err != nil {
		return nil, fmt.Errorf("serving/agentctl: bzid_info: %w", err)
	}
	return info, nil
}

// Pattern is pub and unpub's MODEL:GLOB: a model name and a Python fnmatch pattern of its
// sub-graphs.
type Pattern struct {
	Model, Glob string
	re          *regexp.Regexp
}

// ParsePattern parses MODEL:GLOB (the first ':' separates them).
func ParsePattern(s string) (Pattern, error) {
	model, glob, ok := strings.Cut(s, ":")
	if !ok || model == "" {
		return Pattern{}, fmt.Errorf("%w: %q is not MODEL:GLOB", ErrInvalidArgument, s)
	}
	re, err := fnmatchRegexp(glob)
	if err != nil {
		return Pattern{}, fmt.Errorf("%w: %q: %w", ErrInvalidArgument, s, err)
	}
	return Pattern{Model: model, Glob: glob, re: re}, nil
}

// Match reports whether the glob matches a sub-graph name.
func (p Pattern) Match(subGraph string) bool { return p.re != nil && p.re.MatchString(subGraph) }

// String returns MODEL:GLOB.
func (p Pattern) String() string { return p.Model + ":" + p.Glob }

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
		return nil, fmt.Errorf("bad pattern: %w", err)
	}
	return re, nil
}
