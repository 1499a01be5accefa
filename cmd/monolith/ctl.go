package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/monolith-go/monolith/internal/tlsconf"
	"github.com/monolith-go/monolith/pipelines/train/controller"
	pb "github.com/monolith-go/monolith/schemas/controllerpb"
)

// runCtl is `monolith ctl stop|resume|status|save --model-dir DIR`: the client of a training
// job's controller (spec §2.1), found through {model-dir}/controller_server_addr.txt. It
// prints one JSON object: the command and, for status, the global step and the blocked and
// unblocked workers.
func runCtl(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("ctl", stderr)
	modelDir := fs.String("model-dir", "", "the training job's model directory (required)")
	timeout := fs.Duration("timeout", 5*time.Minute, "bound on the call (a save waits for the checkpoint)")
	tlsc := tlsconf.AddFlags(fs)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: monolith ctl stop|resume|status|save --model-dir DIR\n\n"+
			"stop pauses every worker at its next step boundary, resume releases them, save writes a\n"+
			"checkpoint and returns once it is written, status prints the global step and the paused workers.")
		fs.PrintDefaults()
	}
	if len(args) == 0 {
		fs.Usage()
		return fmt.Errorf("%w: ctl needs a command", errUsage)
	}
	cmd := args[0]
	if err := parseFlags(fs, args[1:]); err != nil {
		return err
	}
	if fs.NArg() != 0 || *modelDir == "" {
		return fmt.Errorf("%w: ctl %s needs --model-dir and takes no other arguments", errUsage, cmd)
	}
	switch cmd {
	case "stop", "resume", "status", "save":
	default:
		return fmt.Errorf("%w: ctl command %q is not stop, resume, status or save", errUsage, cmd)
	}
	ct, err := tlsc.Client()
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	c, err := controller.Dial(*modelDir, ct)
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	out := map[string]any{"command": cmd, "controller": c.Addr}
	switch cmd {
	case "stop":
		_, err = c.StopTraining(ctx, &pb.StopTrainingRequest{})
	case "resume":
		_, err = c.ResumeTraining(ctx, &pb.ResumeTrainingRequest{})
	case "save":
		_, err = c.SaveCheckpoint(ctx, &pb.SaveCheckpointRequest{})
	case "status":
		var st *pb.GetTrainingStatusResponse
		var bs *pb.GetBlockStatusResponse
		if st, err = c.GetTrainingStatus(ctx, &pb.GetTrainingStatusRequest{}); err == nil {
			if bs, err = c.GetBlockStatus(ctx, &pb.GetBlockStatusRequest{}); err == nil {
				out["global_step"] = st.GetGlobalStep()
				out["blocked"] = orEmpty(bs.GetBlockedIndices())
				out["unblocked"] = orEmpty(bs.GetUnblockedIndices())
				out["paused"] = len(bs.GetBlockedIndices()) > 0
			}
		}
	}
	if err != nil {
		return fmt.Errorf("ctl %s (controller %s): %w", cmd, c.Addr, err)
	}
	b, _ := json.Marshal(out)
	_, err = fmt.Fprintln(stdout, string(b))
	return err
}

func orEmpty(v []int32) []int32 {
	if v == nil {
		return []int32{}
	}
	return v
}
