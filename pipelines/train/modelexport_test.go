package train

import (
	"context"
	"path/filepath"
	"slices"
	"testing"

	"github.com/monolith-go/monolith/ps/client"
	"github.com/monolith-go/monolith/ps/servingmodel"
)

// TestExportModel: a trained checkpoint exported for serving carries the model's spec and
// every table, and each served row equals what the restored checkpoint's PS answers.
func TestExportModel(t *testing.T) {
	dir := t.TempDir()
	c := plantedData(t, dir, 2000)
	c.Epochs, c.PS.Shards, c.Checkpoint.Dir = 1, 2, filepath.Join(dir, "model")
	ctx := context.Background()
	sum, err := Run(ctx, c, Options{})
	if err != nil {
		t.Fatal(err)
	}
	base := filepath.Join(dir, "serving")
	res, err := ExportModel(ctx, c, "", base, "planted", -1)
	if err != nil {
		t.Fatal(err)
	}
	if res.Version != sum.GlobalStep || res.Dir != filepath.Join(base, "planted", itoa(sum.GlobalStep)) {
		t.Fatalf("exported version %d to %s; the run ended at step %d", res.Version, res.Dir, sum.GlobalStep)
	}
	m, err := servingmodel.Open(res.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if m.Spec.Model != c.Model || m.Spec.Shards != 2 || m.Spec.GlobalStep != sum.GlobalStep || m.Spec.FeatureConfigs == "" {
		t.Errorf("spec %+v", m.Spec)
	}
	r, err := Restore(ctx, c, "", Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var names []string
	for _, spec := range r.Prepared.Tables.GetTables() {
		names = append(names, spec.GetName())
	}
	for _, tb := range m.Tables {
		if !slices.Contains(names, tb.Name) {
			t.Errorf("exported table %q is not the model's (%v)", tb.Name, names)
			continue
		}
		var fids []int64
		var rows []float32
		if err := tb.Scan(res.Dir, func(fid int64, emb []float32) error {
			fids, rows = append(fids, fid), append(rows, emb...)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		got, err := r.Client.Lookup(ctx, tb.Name, tb.Dim, fids, client.LookupOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got.Embeddings, rows) {
			t.Errorf("table %q: the served rows differ from the checkpoint's", tb.Name)
		}
	}
	if len(m.Tables) != len(names) {
		t.Errorf("%d tables exported, the model has %d", len(m.Tables), len(names))
	}
	if _, err := ExportModel(ctx, c, "", base, "planted", -1); err == nil {
		t.Error("exporting the same version twice succeeded")
	}
}
