package modelserver

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/monolith-go/monolith/ps/servingmodel"
)

// TestLoadRefusesUnfinished: a version folder without its done marker, or with a manifest
// that does not parse, is not loaded, and the error says why.
func TestLoadRefusesUnfinished(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "m", "3")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := (Loader{}).Load(context.Background(), "m", dir, 3); !errors.Is(err, servingmodel.ErrCorrupt) {
		t.Errorf("no marker: %v, want ErrCorrupt", err)
	}
	if err := os.WriteFile(dir+servingmodel.DoneSuffix, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, servingmodel.ManifestName), []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := (Loader{}).Load(context.Background(), "m", dir, 3); !errors.Is(err, servingmodel.ErrCorrupt) {
		t.Errorf("bad manifest: %v, want ErrCorrupt", err)
	}
}
