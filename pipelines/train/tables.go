package train

import (
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/monolith-go/monolith/kernels/featcfg"
	"github.com/monolith-go/monolith/kernels/model"
	"github.com/monolith-go/monolith/schemas/hashtablepb"
	"github.com/monolith-go/monolith/schemas/pspb"
	tmodel "github.com/monolith-go/monolith/transforms/model"
)

// TablesConfig returns the PS tables a run needs: one per FeatureConfigs table (segments
// from its features' slice dims, initializers and optimizers from Sparse.Segments) and one
// dense table per model parameter ("dense_<name>", Cols wide, fids 0..Rows-1, optimizer
// Dense.Optimizer). Tables entries replace the generated spec of their name. Every table
// admits every fid (filter NONE) unless an override says otherwise.
func (c *Config) TablesConfig(cfg *featcfg.Config, params []model.Param) (*pspb.TablesConfig, error) {
	over, err := c.tableOverrides()
	if err != nil {
		return nil, err
	}
	tables, err := sparseTables(cfg)
	if err != nil {
		return nil, err
	}
	out := &pspb.TablesConfig{}
	none := &pspb.FilterConfig{Type: pspb.FilterConfig_NONE}
	for ti, tb := range tables {
		dims := cfg.Features[cfg.Tables[ti].Features[0]].SliceDims
		entry := &hashtablepb.EntryConfig{}
		for i, d := range dims {
			seg := c.Sparse.Segments[min(i, len(c.Sparse.Segments)-1)]
			s, err := seg.build(d)
			if err != nil {
				return nil, fmt.Errorf("%w: table %q segment %d: %v", ErrConfig, tb.name, i, err)
			}
			entry.Segments = append(entry.Segments, s)
		}
		out.Tables = append(out.Tables, &pspb.TableSpec{Name: tb.name, Config: tableConfig(entry), Filter: none})
	}
	dopt, err := optimizer(c.Dense.Optimizer)
	if err != nil {
		return nil, fmt.Errorf("%w: dense.optimizer: %v", ErrConfig, err)
	}
	for _, p := range params {
		init := &hashtablepb.InitializerConfig{Type: &hashtablepb.InitializerConfig_Zeros{Zeros: &hashtablepb.ZerosInitializerConfig{}}}
		if p.Init == model.Uniform {
			init.Type = &hashtablepb.InitializerConfig_RandomUniform{RandomUniform: &hashtablepb.RandomUniformInitializerConfig{
				Minval: ptr(-p.Scale), Maxval: ptr(p.Scale)}}
		}
		entry := &hashtablepb.EntryConfig{Segments: []*hashtablepb.EntryConfig_Segment{{
			DimSize: ptr(int32(p.Cols)), InitConfig: init, OptConfig: proto.Clone(dopt).(*hashtablepb.OptimizerConfig)}}}
		out.Tables = append(out.Tables, &pspb.TableSpec{Name: tmodel.ParamTable(p), Config: tableConfig(entry), Filter: none})
	}
	seen := map[string]bool{}
	for i, t := range out.Tables {
		if seen[t.GetName()] {
			return nil, fmt.Errorf("%w: two tables are named %q", ErrConfig, t.GetName())
		}
		seen[t.GetName()] = true
		if o, ok := over[t.GetName()]; ok {
			out.Tables[i] = o
			delete(over, t.GetName())
		}
	}
	for name := range over {
		return nil, fmt.Errorf("%w: tables: %q is neither a FeatureConfigs table nor a dense parameter table", ErrConfig, name)
	}
	return out, nil
}

func tableConfig(entry *hashtablepb.EntryConfig) *hashtablepb.EmbeddingHashTableConfig {
	return &hashtablepb.EmbeddingHashTableConfig{EntryConfig: entry,
		Type: &hashtablepb.EmbeddingHashTableConfig_Cuckoo{Cuckoo: &hashtablepb.CuckooEmbeddingHashTableConfig{}}}
}
