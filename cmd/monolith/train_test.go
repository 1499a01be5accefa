package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/monolith-go/monolith/ps/table"
)

// TestTrainCommand runs `monolith gen --planted fm` and `monolith train` on a small data
// set and checks the summary line, then writes the tables file for external shards.
func TestTrainCommand(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	runGenCLI(t, "--planted", "fm", "--seed", "3", "--out", data, "--rows", "20000", "--vocab", "50", "--eval-rows", "5000")
	cfg := filepath.Join(dir, "fm.yaml")
	if err := os.WriteFile(cfg, []byte("model: fm\ndata: data\nbatch_size: 128\nepochs: 2\nps: {shards: 2}\ncheckpoint: {dir: ckpt}\n"+
		"sparse:\n  segments:\n    - {init: {zeros: {}}, optimizer: {adagrad: {learning_rate: 0.1}}}\n"+
		"    - {init: {random_uniform: {minval: -0.05, maxval: 0.05}}, optimizer: {adagrad: {learning_rate: 0.1}}}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var so, se bytes.Buffer
	if err := run(context.Background(), []string{"train", "--config", cfg, "--progress", "never"}, &so, &se); err != nil {
		t.Fatalf("train: %v\n%s", err, se.String())
	}
	var sum struct {
		Examples    int64    `json:"examples"`
		EvalAUC     *float64 `json:"eval_auc"`
		BayesAUC    *float64 `json:"bayes_auc"`
		EvalLogLoss *float64 `json:"eval_logloss"`
		ConstLL     *float64 `json:"eval_constant_logloss"`
		Checkpoint  string   `json:"checkpoint"`
	}
	lines := strings.Split(strings.TrimSpace(so.String()), "\n")
	if len(lines) != 1 {
		t.Fatalf("stdout has %d lines, want the one summary line:\n%s", len(lines), so.String())
	}
	if err := json.Unmarshal([]byte(lines[0]), &sum); err != nil {
		t.Fatalf("summary %q: %v", lines[0], err)
	}
	if sum.Examples != 40000 || sum.EvalAUC == nil || sum.BayesAUC == nil || sum.EvalLogLoss == nil || sum.ConstLL == nil {
		t.Fatalf("summary %s", lines[0])
	}
	if *sum.EvalAUC < 0.6 || *sum.EvalAUC > *sum.BayesAUC+0.02 || *sum.EvalLogLoss > *sum.ConstLL-0.02 {
		t.Errorf("eval AUC %.4f (Bayes %.4f), log loss %.4f (constant %.4f)", *sum.EvalAUC, *sum.BayesAUC, *sum.EvalLogLoss, *sum.ConstLL)
	}
	if sum.Checkpoint != filepath.Join(dir, "ckpt") {
		t.Errorf("checkpoint %q", sum.Checkpoint)
	}
	for _, shard := range []string{"shard-0-of-2", "shard-1-of-2"} {
		if _, err := os.Stat(filepath.Join(dir, "ckpt", shard, "LATEST")); err != nil {
			t.Errorf("checkpoint of %s: %v", shard, err)
		}
	}

	// The trained checkpoint round-trips through every export sink.
	for _, to := range []string{"entrydump", "avro", "parquet"} {
		so.Reset()
		out := filepath.Join(dir, "export-"+to)
		if err := run(context.Background(), []string{"export", "--checkpoint", sum.Checkpoint, "--to", to, "--output", out}, &so, &se); err != nil {
			t.Fatalf("export --to %s: %v\n%s", to, err, se.String())
		}
		if got := strings.Count(so.String(), "verified"); got != 2 { // emb and dense_w0
			t.Errorf("export --to %s verified %d tables, want 2:\n%s", to, got, so.String())
		}
	}

	tables := filepath.Join(dir, "tables.pbtxt")
	so.Reset()
	if err := run(context.Background(), []string{"train", "--config", cfg, "--write-tables", tables}, &so, &se); err != nil {
		t.Fatalf("train --write-tables: %v", err)
	}
	tc, err := table.LoadTablesConfig(tables)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(tc.GetTables()); n != 2 { // emb and dense_w0
		t.Errorf("%d tables, want emb and dense_w0", n)
	}
}

func TestTrainUsageErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("model: fm\nbogus: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"train"},
		{"train", "--config", filepath.Join(dir, "missing.yaml")},
		{"train", "--config", bad},
		{"train", "--config", bad, "extra"},
	} {
		var so, se bytes.Buffer
		if err := run(context.Background(), args, &so, &se); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
}
