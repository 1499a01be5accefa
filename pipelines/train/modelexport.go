package train

import (
	"context"
	"fmt"

	"google.golang.org/protobuf/encoding/prototext"

	"github.com/monolith-go/monolith/io/pbtext"
	"github.com/monolith-go/monolith/ps/export"
	"github.com/monolith-go/monolith/ps/servingmodel"
)

// ExportedModel is what ExportModel wrote.
type ExportedModel struct {
	Checkpoint string // the model.ckpt-{step} exported
	Version    int64
	servingmodel.Result
}

// ExportModel writes the checkpoint ckpt of c's model directory (found as Restore finds
// it: "" is the newest the checkpoint state names) as version of model name under base, in
// serving form (ps/servingmodel): the model spec (model, layouts, feature configs, shard
// count, step), the sparse and dense tables stored as their compressors say, and the
// manifest; then it reads the version back against the checkpoint. version < 0 takes the
// checkpoint's global step.
func ExportModel(ctx context.Context, c *Config, ckpt, base, name string, version int64) (*ExportedModel, error) {
	at, err := locate(c, ckpt, nil)
	if err != nil {
		return nil, err
	}
	src, err := export.ResolveShards(at.path, at.folders)
	if err != nil {
		return nil, fmt.Errorf("%w %s: %v", ErrCheckpoint, at.path, err)
	}
	fc, err := pbtext.ReadFeatureConfigsFile(c.FeatureConfigs)
	if err != nil {
		return nil, fmt.Errorf("%w: feature_configs: %v", ErrConfig, err)
	}
	fcText, err := prototext.MarshalOptions{Multiline: true}.Marshal(fc)
	if err != nil {
		return nil, err
	}
	j := at.pr.Job
	spec := servingmodel.Spec{Model: j.Model, Bias: j.Bias, Vec: j.Vec, Hidden: j.Hidden, Unique: *c.Unique,
		Shards: len(at.folders), FeatureConfigs: string(fcText), GlobalStep: at.step}
	if version < 0 {
		version = at.step
	}
	res, err := servingmodel.Write(ctx, base, name, version, spec, src)
	if err != nil {
		return nil, err
	}
	if err := servingmodel.Verify(ctx, res.Dir, src); err != nil {
		return nil, err
	}
	return &ExportedModel{Checkpoint: at.path, Version: version, Result: res}, nil
}
