package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	"github.com/monolith-go/monolith/internal/tlsconf"
	"github.com/monolith-go/monolith/io/pbtext"
	"github.com/monolith-go/monolith/schemas/tfcorepb"
	pb "github.com/monolith-go/monolith/schemas/tfservingpb"
	"github.com/monolith-go/monolith/serving/tfs"
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
	inputType := fs.String("input_type", "example_batch", "get: example_batch (one ExampleBatch, protobuf text) or instance (one Instance: .json, .pbtxt, .dump)")
	inputFile := fs.String("input_file", "", "get: the input; load: the text-format ModelServerConfig")
	batchSize := fs.Int("batch_size", 8, "get --input_type instance: copies of the instance sent")
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
		var in *tfcorepb.TensorProto
		switch *inputType {
		case "instance":
			inst, err := tfs.InstanceFromFile(*inputFile)
			if err != nil {
				return err
			}
			if in, err = tfs.RepeatedInstanceTensor(inst, *batchSize); err != nil {
				return err
			}
		case "example_batch":
			eb, err := pbtext.ReadExampleBatchFile(*inputFile)
			if err != nil {
				return err
			}
			b, err := proto.Marshal(eb)
			if err != nil {
				return err
			}
			in = tfs.StringTensor([][]byte{b})
		default:
			return fmt.Errorf("%w: --input_type %q: want example_batch or instance", errUsage, *inputType)
		}
		alias := map[string]string{"instance": "instances", "example_batch": "example_batch"}[*inputType]
		if out, err = mon.Predict(ctx, spec, map[string]*tfcorepb.TensorProto{alias: in}); err != nil {
			return err
		}
	default:
		return fmt.Errorf("%w: --cmd_type %q: want status, meta, load or get", errUsage, *cmdType)
	}
	b, err := prototext.MarshalOptions{Multiline: true}.Marshal(out)
	if err != nil {
		return err
	}
	_, err = stdout.Write(b)
	return err
}
