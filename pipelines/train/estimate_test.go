package train

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/monolith-go/monolith/io/recordio"
	"github.com/monolith-go/monolith/kernels/metrics"
	"github.com/monolith-go/monolith/schemas/examplepb"
)

// TestEvaluateAndPredictFromCheckpoint: evaluate and predict over the checkpoint a training
// run left reproduce that run's evaluation.
func TestEvaluateAndPredictFromCheckpoint(t *testing.T) {
	dir := t.TempDir()
	c := plantedData(t, dir, 4000)
	c.Epochs, c.PS.Shards, c.Checkpoint.Dir = 1, 2, filepath.Join(dir, "model")
	ctx := context.Background()
	sum, err := Run(ctx, c, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ev, err := Evaluate(ctx, c, Options{}, "", "")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("eval AUC: training %.6f, evaluate %.6f; log loss %.6f, %.6f", *sum.EvalAUC, *ev.EvalAUC, *sum.EvalLogLoss, *ev.EvalLogLoss)
	if ev.GlobalStep != sum.GlobalStep || ev.EvalExamples != sum.EvalExamples || ev.PSShards != 2 {
		t.Errorf("evaluate: step %d, %d rows, %d shards; training: step %d, %d rows", ev.GlobalStep, ev.EvalExamples, ev.PSShards, sum.GlobalStep, sum.EvalExamples)
	}
	if math.Abs(*ev.EvalAUC-*sum.EvalAUC) > 1e-9 || math.Abs(*ev.EvalLogLoss-*sum.EvalLogLoss) > 1e-9 {
		t.Errorf("evaluate AUC %v, log loss %v; training's %v, %v", *ev.EvalAUC, *ev.EvalLogLoss, *sum.EvalAUC, *sum.EvalLogLoss)
	}
	if !strings.HasSuffix(ev.Checkpoint, "model.ckpt-"+itoa(sum.GlobalStep)) {
		t.Errorf("evaluate summary %+v", ev)
	}

	// Predict: the same AUC from its output, and a line id per row.
	out := filepath.Join(dir, "pred.jsonl")
	n, err := Predict(ctx, c, Options{}, "", "", out, "jsonl")
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var preds, labels []float32
	uids := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var row struct {
			LineID     map[string]any `json:"line_id"`
			Prediction float32        `json:"prediction"`
			Label      float32        `json:"label"`
		}
		if err := json.Unmarshal(sc.Bytes(), &row); err != nil {
			t.Fatalf("%q: %v", sc.Text(), err)
		}
		preds, labels = append(preds, row.Prediction), append(labels, row.Label)
		if uid, ok := row.LineID["uid"]; ok {
			uids[uid.(string)] = true
		}
	}
	auc, err := metrics.AUC(preds, labels)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("predict: %d rows, AUC %.6f, %d distinct uids", n, auc, len(uids))
	if n != sum.EvalExamples || int64(len(preds)) != n || math.Abs(auc-*sum.EvalAUC) > 1e-9 || len(uids) < 2 {
		t.Errorf("predict: %d rows (file %d), AUC %v, %d uids; want %d rows, AUC %v, line ids", n, len(preds), auc, len(uids), sum.EvalExamples, *sum.EvalAUC)
	}
	tf := filepath.Join(dir, "pred.tfrecord")
	if n, err = Predict(ctx, c, Options{}, "model.ckpt-"+itoa(sum.GlobalStep), "", tf, "tfrecord"); err != nil {
		t.Fatal(err)
	}
	recs := 0
	r, err := recordio.Open(tf, recordio.Options{Framing: recordio.TFRecord})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for {
		rec, err := r.Next()
		if err != nil {
			break
		}
		ex := &examplepb.Example{}
		if err := proto.Unmarshal(rec.Payload, ex); err != nil || ex.GetLineId() == nil || len(ex.GetNamedFeature()) != 1 || len(ex.GetLabel()) != 1 {
			t.Fatalf("record %d: %v %v", recs, ex, err)
		}
		recs++
	}
	if int64(recs) != n || n != sum.EvalExamples {
		t.Errorf("tfrecord: %d records, %d reported, want %d", recs, n, sum.EvalExamples)
	}
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }

// TestCheckpointErrors: a missing or mismatching checkpoint fails evaluate and predict
// before any data is read (the inputs do not exist), naming the checkpoint and the table.
func TestCheckpointErrors(t *testing.T) {
	dir := t.TempDir()
	c := plantedData(t, dir, 1000)
	c.Epochs, c.EvalInput, c.PS.Shards, c.Checkpoint.Dir = 1, "", 2, filepath.Join(dir, "model")
	ctx := context.Background()
	if _, err := Run(ctx, c, Options{}); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "nothing-here", "*")
	for _, tc := range []struct {
		name string
		edit func(c *Config)
		ckpt string
		want string
	}{
		{"no model dir", func(c *Config) { c.Checkpoint.Dir = filepath.Join(dir, "none") }, "", "no checkpoint state"},
		{"no such step", nil, "model.ckpt-99999", "shard 0"},
		{"other model", func(c *Config) { c.Model, c.Hidden = "deepfm", []int{4} }, "", `no table "dense_mlp0_w"`},
		{"shard count", func(c *Config) { c.PS.Shards = 3 }, "", "has 2 PS shards, the config says ps.shards 3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cc := *c
			cc.EvalInput = missing
			if tc.edit != nil {
				tc.edit(&cc)
			}
			_, err := Evaluate(ctx, &cc, Options{}, tc.ckpt, "")
			if !errors.Is(err, ErrCheckpoint) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("evaluate: %v, want a checkpoint error with %q", err, tc.want)
			}
			_, err = Predict(ctx, &cc, Options{}, tc.ckpt, missing, filepath.Join(dir, "p.jsonl"), "jsonl")
			if !errors.Is(err, ErrCheckpoint) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("predict: %v, want a checkpoint error with %q", err, tc.want)
			}
		})
	}
}
