//go:build !race

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/apache/arrow-go/v18/arrow"
	"google.golang.org/protobuf/encoding/prototext"

	kmetrics "github.com/monolith-go/monolith/kernels/metrics"
	"github.com/monolith-go/monolith/pipelines/train"
	"github.com/monolith-go/monolith/ps/client"
	"github.com/monolith-go/monolith/ps/servingmodel"
	"github.com/monolith-go/monolith/schemas/batch"
	"github.com/monolith-go/monolith/schemas/tfcorepb"
	pb "github.com/monolith-go/monolith/schemas/tfservingpb"
	"github.com/monolith-go/monolith/transforms/beamio"
)

// predictionRows reads predict's JSON lines: line ids, predictions, labels.
func predictionRows(t *testing.T, path string) (ids []string, preds, labels []float32) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(strings.TrimSpace(string(b)), "\n") {
		var row struct {
			LineID     json.RawMessage `json:"line_id"`
			Prediction float32         `json:"prediction"`
			Label      float32         `json:"label"`
		}
		if err := json.Unmarshal([]byte(line), &row); err != nil {
			t.Fatalf("%s: %q: %v", path, line, err)
		}
		ids, preds, labels = append(ids, string(row.LineID)), append(preds, row.Prediction), append(labels, row.Label)
	}
	return ids, preds, labels
}

// checkServed compares predict --server's JSON lines (served) with predict's on the
// checkpoint (local), row by row through the line ids (the local pipeline may order rows by
// bundle), and their AUC with evaluate's summary ev; it returns the served predictions.
func checkServed(t *testing.T, served, local string, ev train.Summary, what string) []float32 {
	t.Helper()
	sIDs, sPreds, sLabels := predictionRows(t, served)
	lIDs, lPreds, _ := predictionRows(t, local)
	if int64(len(sPreds)) != ev.EvalExamples || len(lPreds) != len(sPreds) {
		t.Fatalf("%s %d rows, predict %d, evaluate %d", what, len(sPreds), len(lPreds), ev.EvalExamples)
	}
	byID := map[string]float32{}
	for i, id := range lIDs {
		byID[id] = lPreds[i]
	}
	var worst float64
	for i, id := range sIDs {
		want, ok := byID[id]
		if !ok {
			t.Fatalf("%s row %d (line id %s) is not in predict's output", what, i, id)
		}
		worst = max(worst, math.Abs(float64(sPreds[i]-want)))
	}
	auc, err := kmetrics.AUC(sPreds, sLabels)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: %d rows, AUC %.6f (evaluate %.6f), largest prediction difference %.2g", what, len(sPreds), auc, *ev.EvalAUC, worst)
	if worst > 1e-6 || math.Abs(auc-*ev.EvalAUC) > 1e-6 {
		t.Errorf("%s predictions differ from the checkpoint's by %g; AUC %v against evaluate's %v", what, worst, auc, *ev.EvalAUC)
	}
	return sPreds
}

// TestServeEndToEnd: train → export --model → a `monolith serve` process loads the version
// (AVAILABLE) → predict --server scores the eval data with the same predictions (within
// 1e-6) and AUC as predict and evaluate on the checkpoint; bad requests are
// INVALID_ARGUMENT and the server keeps serving.
func TestServeEndToEnd(t *testing.T) {
	dir := t.TempDir()
	cfg := trainedFM(t, dir, "5", 4000, 1000)
	data := filepath.Join(dir, "data")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var so, se bytes.Buffer
	base := filepath.Join(dir, "models")
	if err := run(ctx, []string{"export", "--model", "--config", cfg, "--output", base, "--name", "planted"}, &so, &se); err != nil {
		t.Fatalf("export --model: %v\n%s", err, se.String())
	}

	srv := startProc(t, "serve", nil, "serve", "--port", "0", "--model_name", "planted", "--model_base_path", filepath.Join(base, "planted"),
		"--file_system_poll_wait_seconds", "1", "--platform_config_file", filepath.Join(dir, "platform.cfg"))
	addrRE := regexp.MustCompile(`serve listening on (127\.0\.0\.1:\d+)`)
	var addr string
	for deadline := time.Now().Add(30 * time.Second); addr == ""; time.Sleep(20 * time.Millisecond) {
		if m := addrRE.FindStringSubmatch(srv.errb.String()); m != nil {
			addr = m[1]
		} else if time.Now().After(deadline) {
			t.Fatalf("serve did not listen in 30 s:\n%s", srv.errb.String())
		}
	}
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ms := pb.NewModelServiceClient(cc)
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		st, err := ms.GetModelStatus(ctx, &pb.GetModelStatusRequest{ModelSpec: &pb.ModelSpec{Name: "planted"}})
		if err == nil && len(st.GetModelVersionStatus()) == 1 && st.GetModelVersionStatus()[0].GetState() == pb.ModelVersionStatus_AVAILABLE {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the version is not AVAILABLE after 60 s: %v %v\n%s", st, err, srv.errb.String())
		}
	}

	remote, local := filepath.Join(dir, "remote.jsonl"), filepath.Join(dir, "local.jsonl")
	if err := run(ctx, []string{"predict", "--config", cfg, "--server", addr, "--model_name", "planted", "--out", remote}, &so, &se); err != nil {
		t.Fatalf("predict --server: %v\n%s", err, se.String())
	}
	if err := run(ctx, []string{"predict", "--config", cfg, "--out", local}, &so, &se); err != nil {
		t.Fatalf("predict: %v\n%s", err, se.String())
	}
	so.Reset()
	if err := run(ctx, []string{"evaluate", "--config", cfg}, &so, &se); err != nil {
		t.Fatalf("evaluate: %v\n%s", err, se.String())
	}
	ev := decodeSummary(t, so.String())
	rPreds := checkServed(t, remote, local, ev, "served")

	// Bad requests: named, INVALID_ARGUMENT, and the server keeps serving.
	ps := pb.NewPredictionServiceClient(cc)
	str := func(b ...[]byte) *tfcorepb.TensorProto {
		return &tfcorepb.TensorProto{Dtype: tfcorepb.DataType_DT_STRING, StringVal: b}
	}
	for name, in := range map[string]map[string]*tfcorepb.TensorProto{
		"malformed ExampleBatch": {"example_batch": str([]byte{0xff, 0xff, 0x01})},
		"malformed Instance":     {"instances": str([]byte("x"), []byte{0x0a, 0xff})},
		"no input":               {},
		"float input":            {"instances": {Dtype: tfcorepb.DataType_DT_FLOAT, FloatVal: []float32{1}}},
	} {
		_, err := ps.Predict(ctx, &pb.PredictRequest{ModelSpec: &pb.ModelSpec{Name: "planted"}, Inputs: in})
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("%s: %v, want InvalidArgument", name, err)
		}
	}
	if _, err := ps.Predict(ctx, &pb.PredictRequest{ModelSpec: &pb.ModelSpec{Name: "nope"}, Inputs: map[string]*tfcorepb.TensorProto{"instances": str()}}); status.Code(err) != codes.NotFound {
		t.Errorf("unknown model: %v, want NotFound", err)
	}
	if _, err := ms.GetModelStatus(ctx, &pb.GetModelStatusRequest{ModelSpec: &pb.ModelSpec{Name: "planted"}}); err != nil {
		t.Errorf("the server after bad requests: %v", err)
	}

	// tfs-client, Monolith's tfs_client: status, meta and get (Predict) of one ExampleBatch.
	evalFiles, err := filepath.Glob(filepath.Join(data, "eval", "*"))
	if err != nil || len(evalFiles) == 0 {
		t.Fatalf("eval files: %v %v", evalFiles, err)
	}
	ebFile := filepath.Join(dir, "batch.pbtxt")
	var rows int64
	if err := beamio.ReadFile(ctx, evalFiles[0], beamio.DefaultReadConfig(), nil, func(rec arrow.RecordBatch) error {
		defer rec.Release()
		if rows > 0 {
			return nil
		}
		eb, err := batch.ToExampleBatch(rec)
		if err != nil {
			return err
		}
		rows = rec.NumRows()
		b, err := prototext.Marshal(eb)
		if err != nil {
			return err
		}
		return os.WriteFile(ebFile, b, 0o644)
	}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--cmd_type", "status"}, "AVAILABLE"},
		{[]string{"--cmd_type", "meta"}, "signature_def"},
		{[]string{"--cmd_type", "get", "--input_file", ebFile}, `"predictions"`},
	} {
		out, errOut, err := runCLI(t, append([]string{"tfs-client", "--target", addr, "--model_name", "planted"}, tc.args...)...)
		if err != nil || !strings.Contains(out, tc.want) {
			t.Errorf("tfs-client %v: %v %s\n%s", tc.args, err, errOut, out)
		}
		if tc.args[1] == "get" && strings.Count(out, "float_val:") != int(rows) {
			t.Errorf("tfs-client get: %d predictions for a batch of %d rows:\n%s", strings.Count(out, "float_val:"), rows, out)
		}
	}

	// Parameter sync: a training PS shard restored from the checkpoint pushes the rows it
	// updates to the server, whose predictions change without a reload.
	tables := filepath.Join(dir, "tables.pbtxt")
	if err := run(ctx, []string{"train", "--config", cfg, "--write-tables", tables}, &so, &se); err != nil {
		t.Fatalf("train --write-tables: %v\n%s", err, se.String())
	}
	ps0 := startPS(t, "--tables", tables, "--shard", "0", "--num-shards", "2", "--checkpoint-dir", filepath.Join(dir, "ckpt"),
		"--sync-to", addr, "--sync-model", "planted", "--sync-every", "100ms")
	m, err := servingmodel.Open(filepath.Join(base, "planted", strconv.FormatInt(ev.GlobalStep, 10)))
	if err != nil {
		t.Fatal(err)
	}
	cl, err := client.New([]string{ps0.addr})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	updated := 0
	for _, tb := range m.Tables {
		if strings.HasPrefix(tb.Name, "dense_") {
			continue
		}
		var fids []int64
		if err := tb.Scan(filepath.Join(base, "planted", strconv.FormatInt(ev.GlobalStep, 10)), func(fid int64, _ []float32) error {
			if uint64(fid)%2 == 0 {
				fids = append(fids, fid)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		grads := make([]float32, len(fids)*tb.Dim)
		for i := range grads {
			grads[i] = -50
		}
		if _, err := cl.ApplyGradients(ctx, tb.Name, tb.Dim, fids, grads, nil, ev.GlobalStep+1, 0); err != nil {
			t.Fatal(err)
		}
		updated += len(fids)
	}
	synced := filepath.Join(dir, "synced.jsonl")
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if err := run(ctx, []string{"predict", "--config", cfg, "--server", addr, "--model_name", "planted", "--out", synced}, &so, &se); err != nil {
			t.Fatalf("predict --server after the updates: %v", err)
		}
		_, after, _ := predictionRows(t, synced)
		changed := 0
		for i := range after {
			if after[i] != rPreds[i] {
				changed++
			}
		}
		if changed > 0 {
			t.Logf("parameter sync: %d rows updated on shard 0; %d of %d served predictions changed", updated, changed, len(after))
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no served prediction changed 30 s after %d rows were updated on a syncing shard", updated)
		}
	}
}
