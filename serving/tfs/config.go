package tfs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"google.golang.org/protobuf/encoding/prototext"

	pb "github.com/monolith-go/monolith/schemas/tfservingpb"
)

// ErrInvalidConfig is wrapped by the errors of ValidateModelServerConfig.
var ErrInvalidConfig = errors.New("serving/tfs: invalid model server config")

// ParseModelServerConfig parses a text-format ModelServerConfig, the content of TF
// Serving's --model_config_file. Both `model_config_list {}` and an empty input are valid.
func ParseModelServerConfig(text []byte) (*pb.ModelServerConfig, error) {
	var c pb.ModelServerConfig
	if err := prototext.Unmarshal(text, &c); err != nil {
		return nil, fmt.Errorf("serving/tfs: parse model server config: %w", err)
	}
	return &c, nil
}

// ReadModelServerConfig reads and parses a model config file.
func ReadModelServerConfig(path string) (*pb.ModelServerConfig, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("serving/tfs: read model config file: %w", err)
	}
	c, err := ParseModelServerConfig(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// ModelNames are the names of the models of c, in config order (the reference's
// list_saved_models).
func ModelNames(c *pb.ModelServerConfig) []string {
	var names []string
	for _, m := range c.GetModelConfigList().GetConfig() {
		names = append(names, m.GetName())
	}
	return names
}

// ValidateModelServerConfig checks what the Fake (and TF Serving) requires of a config:
// a model_config_list (or nothing), unique non-empty names, non-empty base paths and the
// "tensorflow" platform (or none). The error matches ErrInvalidConfig.
func ValidateModelServerConfig(c *pb.ModelServerConfig) error {
	if c.GetCustomModelConfig() != nil {
		return fmt.Errorf("%w: custom_model_config is not supported", ErrInvalidConfig)
	}
	seen := make(map[string]bool)
	for i, m := range c.GetModelConfigList().GetConfig() {
		switch {
		case m.GetName() == "":
			return fmt.Errorf("%w: model %d has no name", ErrInvalidConfig, i)
		case seen[m.GetName()]:
			return fmt.Errorf("%w: model %q listed more than once", ErrInvalidConfig, m.GetName())
		case m.GetBasePath() == "":
			return fmt.Errorf("%w: model %q has no base_path", ErrInvalidConfig, m.GetName())
		case m.GetModelPlatform() != "" && m.GetModelPlatform() != "tensorflow":
			return fmt.Errorf("%w: model %q: platform %q is not supported", ErrInvalidConfig, m.GetName(), m.GetModelPlatform())
		}
		seen[m.GetName()] = true
	}
	return nil
}

// ScanVersions returns the versions found under a model's base path: the names of its
// sub-directories (or symbolic links to directories) that are non-negative decimal
// integers, ascending and without repeats ("7" and "007" are one version). A missing base
// path has no versions (TF Serving waits for them); other read errors are returned.
func ScanVersions(basePath string) ([]int64, error) {
	entries, err := os.ReadDir(basePath)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("serving/tfs: scan versions: %w", err)
	}
	var vs []int64
	for _, e := range entries {
		v, err := strconv.ParseInt(e.Name(), 10, 64)
		if err != nil || v < 0 {
			continue
		}
		dir := e.IsDir()
		if e.Type()&fs.ModeSymlink != 0 { // TF Serving follows links, as every reader does
			fi, err := os.Stat(filepath.Join(basePath, e.Name()))
			dir = err == nil && fi.IsDir()
		}
		if dir {
			vs = append(vs, v)
		}
	}
	slices.Sort(vs)
	return slices.Compact(vs), nil
}

// SelectVersions applies a version policy to the versions found on disk (ascending) and
// returns the wanted ones, ascending: latest N (N < 1 means 1; also the policy when none
// is set), all, or the listed specific versions that exist.
func SelectVersions(policy *pb.FileSystemStoragePathSourceConfig_ServableVersionPolicy, found []int64) []int64 {
	switch {
	case policy.GetAll() != nil:
		return slices.Clone(found)
	case policy.GetSpecific() != nil:
		var out []int64
		for _, v := range found {
			if slices.Contains(policy.GetSpecific().GetVersions(), v) {
				out = append(out, v)
			}
		}
		return out
	default:
		n := int(max(policy.GetLatest().GetNumVersions(), 1))
		if n > len(found) {
			n = len(found)
		}
		return slices.Clone(found[len(found)-n:])
	}
}
