package synth

import (
	"fmt"

	"github.com/monolith-go/monolith/schemas/examplepb"
)

// LayoutOptions shapes the FeatureConfigs built by FeatureConfigs.
type LayoutOptions struct {
	// Dim is the width of every feature's embedding vector: each feature has slice_dims
	// [1, Dim], a bias column then the vector. 0 means 8.
	Dim int
	// TableSize is the number of individual features per embedding table. 0 means 8.
	TableSize int
}

// FeatureConfigs returns a FeatureConfigs for the sparse features of c, so that the
// sharding and layout kernels (and monolith shard, layout and validate) run on the data
// Generate writes:
//
//   - individual feature i goes to table "t<i/TableSize>" (two digits at least), shared
//     features to table "shared"; every feature has slice_dims [1, Dim]; individual
//     features with i%4 == 3 pool with MEAN, the others with SUM;
//   - layout "bias": ADDN of column [0, 1) of every feature, shape [-1, 1];
//   - layout "deep": CONCAT of columns [1, 1+Dim) of the individual features, shape
//     [-1, Features·Dim] (when Features > 0);
//   - layout "shared": NONE, one [-1, Dim] tensor of columns [1, 1+Dim) per shared feature
//     (when Shared > 0).
//
// The dense feature has no embedding and is not listed.
func FeatureConfigs(c Config, o LayoutOptions) (*examplepb.FeatureConfigs, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if o.Dim < 0 || o.TableSize < 0 {
		return nil, fmt.Errorf("%w: layout dim %d and table size %d must not be negative", ErrConfig, o.Dim, o.TableSize)
	}
	if o.Dim == 0 {
		o.Dim = 8
	}
	if o.TableSize == 0 {
		o.TableSize = 8
	}
	fc := &examplepb.FeatureConfigs{
		FeatureConfigs: map[string]*examplepb.FeatureConfig{},
		OutConfigs:     map[string]*examplepb.OutConfig{},
	}
	bias := &examplepb.OutConfig{OutType: examplepb.OutType_ADDN, Shape: []*examplepb.TensorShape{{Dims: []int32{-1, 1}}}}
	deep := &examplepb.OutConfig{OutType: examplepb.OutType_CONCAT}
	shared := &examplepb.OutConfig{OutType: examplepb.OutType_NONE}
	vec := func(name string) *examplepb.SliceConfig {
		return &examplepb.SliceConfig{FeatureName: name, Start: 1, End: int32(1 + o.Dim)}
	}
	for i, f := range c.SparseFeatures() {
		cfg := &examplepb.FeatureConfig{Table: "shared", SliceDims: []int32{1, int32(o.Dim)}}
		if f.Shared {
			shared.SliceConfigs = append(shared.SliceConfigs, vec(f.Name))
			shared.Shape = append(shared.Shape, &examplepb.TensorShape{Dims: []int32{-1, int32(o.Dim)}})
		} else {
			cfg.Table = fmt.Sprintf("t%02d", i/o.TableSize)
			if i%4 == 3 {
				cfg.PoolingType = examplepb.PoolingType_MEAN
			}
			deep.SliceConfigs = append(deep.SliceConfigs, vec(f.Name))
		}
		fc.FeatureConfigs[f.Name] = cfg
		bias.SliceConfigs = append(bias.SliceConfigs, &examplepb.SliceConfig{FeatureName: f.Name, Start: 0, End: 1})
	}
	fc.OutConfigs["bias"] = bias
	if c.Features > 0 {
		deep.Shape = []*examplepb.TensorShape{{Dims: []int32{-1, int32(c.Features * o.Dim)}}}
		fc.OutConfigs["deep"] = deep
	}
	if c.Shared > 0 {
		fc.OutConfigs["shared"] = shared
	}
	return fc, nil
}
