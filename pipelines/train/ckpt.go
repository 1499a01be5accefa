package train

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/monolith-go/monolith/kernels/featcfg"
	"github.com/monolith-go/monolith/pipelines/train/ckptstate"
	"github.com/monolith-go/monolith/pipelines/train/controller"
	"github.com/monolith-go/monolith/ps/checkpoint"
	"github.com/monolith-go/monolith/ps/client"
	"github.com/monolith-go/monolith/ps/server"
)

// restoreFolders synchronises checkpoint.restore_dir into the model directory (the
// driver is the chief, spec §3.4) and reads the model directory's checkpoint state with
// the restore_ckpt override (§3.5). When the state names a checkpoint, it returns for each
// in-process shard the folder of that checkpoint, found by its step (model.ckpt-{step}) in
// the shard folders beside it; nil when the shards should restore their own newest.
func restoreFolders(ctx context.Context, c *Config, log *slog.Logger) ([]string, error) {
	dir := c.Checkpoint.Dir
	if dir == "" {
		return nil, nil
	}
	if err := ckptstate.SyncRestore(ctx, ckptstate.SyncConfig{RestoreDir: c.Checkpoint.RestoreDir, RestoreCkpt: c.Checkpoint.RestoreCkpt,
		ModelDir: dir, IsChief: true, Log: log}); err != nil {
		return nil, fmt.Errorf("pipelines/train: restore_dir: %w", err)
	}
	st, err := ckptstate.GetState(dir, "", ckptstate.Options{Mode: ckptstate.ModeTrain, RestoreCkpt: c.Checkpoint.RestoreCkpt, Log: log})
	if err != nil {
		return nil, fmt.Errorf("pipelines/train: %w", err)
	}
	if st == nil || st.GetModelCheckpointPath() == "" {
		return nil, nil
	}
	latest := st.GetModelCheckpointPath()
	if err := ckptstate.CheckLocal(latest); err != nil {
		return nil, fmt.Errorf("pipelines/train: checkpoint %s: %w", latest, err)
	}
	step, err := ckptstate.StepOf(latest)
	if err != nil {
		return nil, fmt.Errorf("pipelines/train: %s: %w", filepath.Join(dir, ckptstate.StateName), err)
	}
	root := filepath.Dir(latest)
	out := make([]string, c.PS.Shards)
	for i := range out {
		if out[i], err = checkpoint.AtStep(server.ShardDir(root, i, c.PS.Shards), step); err != nil {
			return nil, fmt.Errorf("pipelines/train: checkpoint %s of shard %d: %w", latest, i, err)
		}
	}
	return out, nil
}

// stateRecorder records every checkpoint in the model directory's checkpoint state
// (model.ckpt-{step}; retention as checkpoint.keep), for Monolith's tools and for
// restore_dir / restore_ckpt.
type stateRecorder struct {
	dir  string
	keep int
}

func (stateRecorder) BeforeSave(context.Context, int64) error { return nil }

func (r stateRecorder) AfterSave(ctx context.Context, step int64) error {
	_, err := ckptstate.Record(r.dir, step, r.keep, !controller.SaveConsistent(ctx))
	return err
}

func (r stateRecorder) String() string { return "CheckpointStateRecorder(" + r.dir + ")" }

// ckptInfo writes ckpt.info-{step}: the entries per slot of the sparse tables (Monolith's
// FidSlotCountSaverListener).
type ckptInfo struct {
	ps     *client.Client
	dir    string
	tables []string
}

func (i ckptInfo) BeforeSave(ctx context.Context, step int64) error {
	counts, err := i.ps.SlotCounts(ctx, i.tables)
	if err != nil {
		return fmt.Errorf("checkpoint info: %w", err)
	}
	return ckptstate.WriteCkptInfo(i.dir, step, counts)
}

func (ckptInfo) AfterSave(context.Context, int64) error { return nil }

func (i ckptInfo) String() string { return "FidSlotCountSaverListener(" + i.dir + ")" }

// sparseNames lists the FeatureConfigs' tables.
func sparseNames(cfg *featcfg.Config) []string {
	out := make([]string, len(cfg.Tables))
	for i, t := range cfg.Tables {
		out[i] = t.Name
	}
	return out
}
