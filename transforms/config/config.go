// Package config is the serializable kernel configuration the sharding and layout
// transforms carry inside a pipeline: the FeatureConfigs (wire-encoded, so any worker can
// rebuild it), the number of PS shards, the op version and the dedup mode.
package config

import (
	"errors"
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/monolith-go/monolith/io/pbtext"
	"github.com/monolith-go/monolith/kernels/featcfg"
	kshard "github.com/monolith-go/monolith/kernels/shard"
	"github.com/monolith-go/monolith/schemas/examplepb"
)

// ErrConfig is wrapped by every error of this package.
var ErrConfig = errors.New("transforms/config: invalid kernel configuration")

// Kernels configures sharding_sparse_fids and fused_embedding_to_layout. It holds plain
// values only, so Beam can serialize it with a DoFn.
type Kernels struct {
	FeatureConfigs []byte // wire-encoded examplepb.FeatureConfigs
	PS             int    // number of PS shards; 0 means 1
	Version        int    // op version 1..5; 0 means 5
	Unique         bool   // deduplicate fids per feature (training mode)
	Parallel       int    // goroutines per kernel call; ≤ 1 runs serially
}

// New validates fc and returns its kernel configuration.
func New(fc *examplepb.FeatureConfigs, ps, version int) (Kernels, error) {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(fc)
	if err != nil {
		return Kernels{}, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	k := Kernels{FeatureConfigs: b, PS: ps, Version: version}
	if _, err := k.Build(); err != nil {
		return Kernels{}, err
	}
	return k, nil
}

// Load reads a FeatureConfigs file (protobuf text or JSON) and returns its configuration.
func Load(path string, ps, version int) (Kernels, error) {
	fc, err := pbtext.ReadFeatureConfigsFile(path)
	if err != nil {
		return Kernels{}, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	k, err := New(fc, ps, version)
	if err != nil {
		return Kernels{}, fmt.Errorf("%s: %w", path, err)
	}
	return k, nil
}

// Normalize fills in the defaults and checks the ranges.
func (k *Kernels) Normalize() error {
	if k.PS == 0 {
		k.PS = 1
	}
	if k.Version == 0 {
		k.Version = 5
	}
	if k.PS < 0 || k.PS > kshard.MaxPS {
		return fmt.Errorf("%w: ps_num %d out of range [1, %d]", ErrConfig, k.PS, kshard.MaxPS)
	}
	if k.Version < 1 || k.Version > 5 {
		return fmt.Errorf("%w: version %d is not 1..5", ErrConfig, k.Version)
	}
	return nil
}

// Build normalizes k and rebuilds the preprocessed config.
func (k *Kernels) Build() (*featcfg.Config, error) {
	if err := k.Normalize(); err != nil {
		return nil, err
	}
	fc := &examplepb.FeatureConfigs{}
	if err := proto.Unmarshal(k.FeatureConfigs, fc); err != nil {
		return nil, fmt.Errorf("%w: FeatureConfigs: %v", ErrConfig, err)
	}
	cfg, err := featcfg.New(fc)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	if len(cfg.Tables) == 0 {
		return nil, fmt.Errorf("%w: the FeatureConfigs has no features", ErrConfig)
	}
	return cfg, nil
}
