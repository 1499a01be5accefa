package train

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/monolith-go/monolith/internal/atomicfile"
	"github.com/monolith-go/monolith/internal/tlsconf"
	"github.com/monolith-go/monolith/io/dataset"
	"github.com/monolith-go/monolith/schemas/batch"
	"github.com/monolith-go/monolith/schemas/tfcorepb"
	"github.com/monolith-go/monolith/schemas/tfservingpb"
	"github.com/monolith-go/monolith/transforms/beamio"
	"github.com/monolith-go/monolith/transforms/model"
)

// The Predict aliases of monolith serve (serving/modelserver): one serialized ExampleBatch
// per batch in, one probability per row out.
const (
	predictInput  = "example_batch"
	predictOutput = "predictions"
)

// RemotePredictTimeout bounds each Predict call of PredictRemote.
const RemotePredictTimeout = 30 * time.Second

// PredictRemote scores the rows of the files matching input (default c.EvalInput) with
// the model a server serves under name (monolith serve, or a TF Serving with the same
// API): each batch read goes as one serialized ExampleBatch in the "example_batch" input,
// and the "predictions" it answers are written to out as Predict writes them, with line
// ids (and labels when the rows carry them). tc dials over TLS (nil: plaintext). It returns
// the rows written.
func PredictRemote(ctx context.Context, c *Config, server, name string, tc *tls.Config, input, out, format string) (int64, error) {
	if input == "" {
		input = c.EvalInput
	}
	enc, err := predictionEncoder(format)
	switch {
	case err != nil:
		return 0, err
	case input == "":
		return 0, fmt.Errorf("%w: predict needs an input (or eval_input, or data)", ErrConfig)
	case out == "":
		return 0, fmt.Errorf("%w: predict needs an output file", ErrConfig)
	case server == "" || name == "":
		return 0, fmt.Errorf("%w: predict --server needs the server's address and the model's name", ErrConfig)
	}
	files, err := beamio.Files(ctx, input)
	if err != nil {
		return 0, fmt.Errorf("pipelines/train: predict input %s: %w", input, err)
	}
	cc, err := grpc.NewClient(server, tlsconf.DialOption(tc), grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20), grpc.MaxCallSendMsgSize(64<<20)))
	if err != nil {
		return 0, fmt.Errorf("pipelines/train: predict --server %s: %w", server, err)
	}
	defer cc.Close()
	stub := tfservingpb.NewPredictionServiceClient(cc)
	var all model.Scores
	bufs := dataset.NewBuffers()
	for _, f := range files {
		err := beamio.ReadFile(ctx, f, c.readConfig(), bufs, func(rec arrow.RecordBatch) error {
			defer rec.Release()
			sc, err := predictBatch(ctx, stub, name, rec)
			if err != nil {
				return err
			}
			all.Preds = append(all.Preds, sc.Preds...)
			all.Labels = append(all.Labels, sc.Labels...)
			all.LineIDs = append(all.LineIDs, sc.LineIDs...)
			return nil
		})
		if err != nil {
			return 0, fmt.Errorf("pipelines/train: predict --server %s: %s: %w", server, f, err)
		}
	}
	var buf bytes.Buffer
	if err := enc(&buf, all); err != nil {
		return 0, fmt.Errorf("pipelines/train: predictions %s: %w", out, err)
	}
	if err := atomicfile.WriteFile(out, buf.Bytes()); err != nil {
		return 0, fmt.Errorf("pipelines/train: predictions: %w", err)
	}
	return int64(len(all.Preds)), nil
}

// predictBatch sends one batch and returns its scores with the rows' labels and line ids.
func predictBatch(ctx context.Context, stub tfservingpb.PredictionServiceClient, name string, rec arrow.RecordBatch) (model.Scores, error) {
	eb, err := batch.ToExampleBatch(rec)
	if err != nil {
		return model.Scores{}, err
	}
	b, err := proto.Marshal(eb)
	if err != nil {
		return model.Scores{}, err
	}
	req := &tfservingpb.PredictRequest{
		ModelSpec: &tfservingpb.ModelSpec{Name: name},
		Inputs: map[string]*tfcorepb.TensorProto{predictInput: {Dtype: tfcorepb.DataType_DT_STRING, StringVal: [][]byte{b},
			TensorShape: &tfcorepb.TensorShapeProto{Dim: []*tfcorepb.TensorShapeProto_Dim{{Size: 1}}}}},
	}
	cctx, cancel := context.WithTimeout(ctx, RemotePredictTimeout)
	resp, err := stub.Predict(cctx, req)
	cancel()
	if err != nil {
		return model.Scores{}, err
	}
	preds := resp.GetOutputs()[predictOutput].GetFloatVal()
	rows := int(rec.NumRows())
	if len(preds) != rows {
		return model.Scores{}, fmt.Errorf("the server answered %d predictions for %d rows", len(preds), rows)
	}
	sc := model.Scores{Preds: preds}
	if sc.LineIDs, err = model.RowLineIDs(rec, rows); err != nil {
		return model.Scores{}, err
	}
	if labels, err := model.RowLabels(rec); err == nil {
		sc.Labels = labels
	}
	return sc, nil
}
