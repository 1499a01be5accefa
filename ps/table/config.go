package table

import (
	"fmt"
	"log/slog"
	"os"

	"google.golang.org/protobuf/encoding/prototext"

	"github.com/monolith-go/monolith/ps/filter"
	"github.com/monolith-go/monolith/schemas/pspb"
)

// FromSpec builds a table and its admission filter from one entry of a tables file.
func FromSpec(spec *pspb.TableSpec, seed uint64, logger *slog.Logger) (*Table, error) {
	f, err := filter.New(spec.GetFilter(), spec.GetOccurrence())
	if err != nil {
		return nil, fmt.Errorf("%w: table %q: %w", ErrInvalidConfig, spec.GetName(), err)
	}
	return New(Options{Name: spec.GetName(), Config: spec.GetConfig(), Filter: f, Seed: seed, Logger: logger})
}

// ParseTablesConfig parses a text-format TablesConfig and checks what concerns the file
// as a whole: at least one table, with unique non-empty names. Each table's own config is
// validated by FromSpec when the table is built (once, by the server).
func ParseTablesConfig(name string, text []byte) (*pspb.TablesConfig, error) {
	cfg := &pspb.TablesConfig{}
	if err := prototext.Unmarshal(text, cfg); err != nil {
		return nil, fmt.Errorf("tables config %s: %w", name, err)
	}
	if len(cfg.GetTables()) == 0 {
		return nil, fmt.Errorf("tables config %s: %w: no tables", name, ErrInvalidConfig)
	}
	seen := map[string]int{}
	for i, spec := range cfg.GetTables() {
		if spec.GetName() == "" {
			return nil, fmt.Errorf("tables config %s: %w: table %d has no name", name, ErrInvalidConfig, i)
		}
		if j, dup := seen[spec.GetName()]; dup {
			return nil, fmt.Errorf("tables config %s: %w: tables %d and %d are both named %q", name, ErrInvalidConfig, j, i, spec.GetName())
		}
		seen[spec.GetName()] = i
	}
	return cfg, nil
}

// LoadTablesConfig reads and validates a text-format TablesConfig file.
func LoadTablesConfig(path string) (*pspb.TablesConfig, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tables config: %w", err)
	}
	return ParseTablesConfig(path, b)
}
