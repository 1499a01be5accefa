package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	"github.com/monolith-go/monolith/internal/tlsconf"
	"github.com/monolith-go/monolith/io/pbtext"
	"github.com/monolith-go/monolith/schemas/batch"
	"github.com/monolith-go/monolith/schemas/tfcorepb"
	pb "github.com/monolith-go/monolith/schemas/tfservingpb"
	"github.com/monolith-go/monolith/serving/modelserver"
	"github.com/monolith-go/monolith/serving/tfs"
	"github.com/monolith-go/monolith/transforms/beamio"
)

// runTFSClient is `monolith tfs-client`, the port of Monolith's tfs_client: status, meta,
// load and get (Predict) against a TF Serving (or monolith serve) at --target, printing
// the responses in text format.
func runTFSClient(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("tfs-client", stderr)
	target := fs.String("target", "127.0.0.1:8500", "the TF Serving's gRPC address")
	cmdType := fs.String("cmd_type", "status", "status, meta, load (HandleReloadConfigRequest with --input_file) or get (Predict)")
	model := fs.String("model_name", "", "the model (required but for load)")
	signature := fs.String("signature_name", "serving_default", "the signature")
	inputType, inputFile, batchSize := predictFlags(fs, "get")
	timeout := fs.Duration("timeout", 30*time.Second, "bound on the call")
	tlsc := tlsconf.AddFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return fmt.Errorf("%w: tfs-client takes no arguments", errUsage)
	}
	if *model == "" && *cmdType != "load" {
		return fmt.Errorf("%w: tfs-client %s needs --model_name", errUsage, *cmdType)
	}
	ct, err := tlsClient(tlsc)
	if err != nil {
		return err
	}
	mon, err := tfs.DialMonitor(*target, tlsconf.DialOption(ct))
	if err != nil {
		return err
	}
	defer mon.Close()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	spec := &pb.ModelSpec{Name: *model, SignatureName: *signature}
	var out proto.Message
	switch *cmdType {
	case "status":
		list, err := mon.GetModelStatus(ctx, spec)
		if err != nil {
			return err
		}
		out = &pb.GetModelStatusResponse{ModelVersionStatus: list}
	case "meta":
		if out, err = mon.GetModelMetadata(ctx, spec); err != nil {
			return err
		}
	case "load":
		cfg, err := tfs.ReadModelServerConfig(*inputFile)
		if err != nil {
			return err
		}
		if err := mon.ReloadConfig(ctx, cfg); err != nil {
			return err
		}
		_, err = fmt.Fprintf(stdout, "%v load done\n", tfs.ModelNames(cfg))
		return err
	case "get":
		alias, in, err := predictInput(ctx, *inputType, *inputFile, *batchSize)
		if err != nil {
			return err
		}
		if out, err = mon.Predict(ctx, spec, map[string]*tfcorepb.TensorProto{alias: in}); err != nil {
			return err
		}
	default:
		return fmt.Errorf("%w: --cmd_type %q: want status, meta, load or get", errUsage, *cmdType)
	}
	return printText(stdout, out)
}

// printText writes m in protobuf text, one field per line.
func printText(w io.Writer, m proto.Message) error {
	b, err := prototext.MarshalOptions{Multiline: true}.Marshal(m)
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

// predictFlags are the input flags of a Predict command (tfs-client get, agent-client
// predict).
func predictFlags(fs *flag.FlagSet, cmd string) (inputType, inputFile *string, batchSize *int) {
	inputType = fs.String("input_type", "example_batch", cmd+": example_batch (one ExampleBatch, protobuf text), instance (one Instance: .json, .pbtxt, .dump) or data (the first --batch_size rows of a data file, any format monolith reads, as one ExampleBatch)")
	inputFile = fs.String("input_file", "", cmd+": the input")
	batchSize = fs.Int("batch_size", 8, cmd+" --input_type instance: copies of the instance sent; data: rows sent")
	return inputType, inputFile, batchSize
}

// predictInput is the input of a Predict request as Monolith's serving clients send it:
// the alias ("example_batch" or "instances") and a string tensor of serialized messages.
func predictInput(ctx context.Context, inputType, file string, batchSize int) (string, *tfcorepb.TensorProto, error) {
	switch inputType {
	case "instance":
		inst, err := tfs.InstanceFromFile(file)
		if err != nil {
			return "", nil, err
		}
		in, err := tfs.RepeatedInstanceTensor(inst, batchSize)
		return modelserver.InputInstances, in, err
	case "example_batch":
		eb, err := pbtext.ReadExampleBatchFile(file)
		if err != nil {
			return "", nil, err
		}
		b, err := proto.Marshal(eb)
		if err != nil {
			return "", nil, err
		}
		return modelserver.InputExampleBatch, tfs.StringTensor([][]byte{b}), nil
	case "data":
		if batchSize <= 0 {
			return "", nil, fmt.Errorf("%w: --batch_size %d must be positive", errUsage, batchSize)
		}
		read := beamio.DefaultReadConfig()
		read.RowsPerBatch = batchSize
		var b []byte
		errFirst := errors.New("first batch read")
		err := beamio.ReadFile(ctx, file, read, nil, func(rec arrow.RecordBatch) error {
			defer rec.Release()
			eb, err := batch.ToExampleBatch(rec)
			if err != nil {
				return err
			}
			if b, err = proto.Marshal(eb); err != nil {
				return err
			}
			return errFirst
		})
		switch {
		case err != nil && !errors.Is(err, errFirst):
			return "", nil, err
		case b == nil:
			return "", nil, fmt.Errorf("%s: no rows", file)
		}
		return modelserver.InputExampleBatch, tfs.StringTensor([][]byte{b}), nil
	}
	return "", nil, fmt.Errorf("%w: --input_type %q: want example_batch, instance or data", errUsage, inputType)
}
