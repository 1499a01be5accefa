package table

import (
	"fmt"
	"os"

	"google.golang.org/protobuf/encoding/prototext"

	"github.com/monolith-go/monolith/ps/filter"
	"github.com/monolith-go/monolith/schemas/pspb"
)

// FromSpec builds a table and its admission filter from one entry of a tables file.
func FromSpec(spec *pspb.TableSpec, seed uint64) (*Table, error) {
	f, err := filter.New(spec.GetFilter(), spec.GetOccurrence())
	if err != nil {
		return nil, fmt.Errorf("%w: table %q: %w", ErrInvalidConfig, spec.GetName(), err)
	}
	return New(Options{Name: spec.GetName(), Config: spec.GetConfig(), Filter: f, Seed: seed})
}

// ParseTablesConfig parses a text-format TablesConfig and checks it with CheckTables.
// Each table's own config is validated by FromSpec when the table is built (once, by the
// server).
func ParseTablesConfig(name string, text []byte) (*pspb.TablesConfig, error) {
	cfg := &pspb.TablesConfig{}
	if err := prototext.Unmarshal(text, cfg); err != nil {
		return nil, fmt.Errorf("tables config %s: %w", name, err)
	}
	if err := CheckTables(cfg); err != nil {
		return nil, fmt.Errorf("tables config %s: %w", name, err)
	}
	return cfg, nil
}

// CheckTables checks what concerns a TablesConfig as a whole: at least one table, with
// unique non-empty names. Errors wrap ErrInvalidConfig.
func CheckTables(cfg *pspb.TablesConfig) error {
	if len(cfg.GetTables()) == 0 {
		return fmt.Errorf("%w: no tables", ErrInvalidConfig)
	}
	seen := make(map[string]int, len(cfg.GetTables()))
	for i, spec := range cfg.GetTables() {
		if spec.GetName() == "" {
			return fmt.Errorf("%w: table %d has no name", ErrInvalidConfig, i)
		}
		if j, dup := seen[spec.GetName()]; dup {
			return fmt.Errorf("%w: table %q configured twice (tables %d and %d)", ErrInvalidConfig, spec.GetName(), j, i)
		}
		seen[spec.GetName()] = i
	}
	return nil
}

// LoadTablesConfig reads and validates a text-format TablesConfig file.
func LoadTablesConfig(path string) (*pspb.TablesConfig, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tables config: %w", err)
	}
	return ParseTablesConfig(path, b)
}
