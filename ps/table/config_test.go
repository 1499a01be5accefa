package table

import (
	"errors"
	"testing"
)

func TestParseTablesConfig(t *testing.T) {
	const seg = `config { entry_config { segments { dim_size: 2 init_config { zeros {} } opt_config { sgd {} } } } }`
	for _, tc := range []struct {
		name, text string
		ok         bool
	}{
		{"two tables", `tables { name: "a" ` + seg + ` } tables { name: "b" ` + seg + ` }`, true},
		{"no tables", ``, false},
		{"unnamed", `tables { ` + seg + ` }`, false},
		{"duplicate", `tables { name: "a" ` + seg + ` } tables { name: "a" ` + seg + ` }`, false},
		{"syntax", `tables { name: `, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := ParseTablesConfig("test.pbtxt", []byte(tc.text))
			if (err == nil) != tc.ok {
				t.Fatalf("ParseTablesConfig = %v, want ok %v", err, tc.ok)
			}
			if err == nil {
				for _, spec := range cfg.GetTables() {
					if _, err := FromSpec(spec, 0); err != nil {
						t.Errorf("FromSpec(%s): %v", spec.GetName(), err)
					}
				}
			}
		})
	}
	bad := `tables { name: "a" config { entry_config { segments { dim_size: 0 } } } }`
	cfg, err := ParseTablesConfig("bad.pbtxt", []byte(bad))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := FromSpec(cfg.GetTables()[0], 0); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("FromSpec of a zero-dim table = %v, want ErrInvalidConfig", err)
	}
}
