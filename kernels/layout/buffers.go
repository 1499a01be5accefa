package layout

import (
	"fmt"

	"github.com/monolith-go/monolith/kernels/featcfg"
	"github.com/monolith-go/monolith/kernels/shard"
)

// SyntheticValue is element k of the synthetic embedding of fid f: f%1009/64 + k/8. It is
// the formula the CLI's `--embeddings synthetic` uses, so independent implementations can
// reproduce the same inputs.
func SyntheticValue(f uint64, k int) float32 { return float32(f%1009)/64 + float32(k)/8 }

// ListBuffers returns one buffer per (table, shard) list k = t*P+p, each holding, for the
// fids of the list in order, D_f floats of the fid's feature f, filled with value(fid, k).
// This is the layout of the v3 and v5 embeddings and of every version's gradients.
func ListBuffers(cfg *featcfg.Config, r *shard.Result, value func(fid uint64, k int) float32) [][]float32 {
	P := r.PS
	out := make([][]float32, len(cfg.Tables)*P)
	for t := range cfg.Tables {
		for p := 0; p < P; p++ {
			list := r.List(t, p)
			buf := make([]float32, r.EmbSize[t*P+p])
			pos, i := 0, 0
			for _, f := range cfg.Tables[t].Features {
				d := cfg.Features[f].Dim
				for range r.Counts[f*P+p] {
					for k := 0; k < d; k++ {
						buf[pos+k] = value(list[i], k)
					}
					pos += d
					i++
				}
			}
			out[t*P+p] = buf
		}
	}
	return out
}

// Arrange lays per-list buffers (ListBuffers' layout) out as the Embedding of the version:
// v2, v3 and v5 take them as they are, v1 as [rows, D] tensors (every feature of a table
// must then have the same width D), v4 as one flat buffer in ps-major order.
func Arrange(version int, cfg *featcfg.Config, r *shard.Result, bufs [][]float32) (Embedding, error) {
	P, T := r.PS, len(cfg.Tables)
	switch version {
	case 1:
		dims := make([]int, T*P)
		for t := range cfg.Tables {
			d := cfg.Features[cfg.Tables[t].Features[0]].Dim
			for _, f := range cfg.Tables[t].Features {
				if cfg.Features[f].Dim != d {
					return Embedding{}, fmt.Errorf("kernels/layout: version 1 needs one width per table; table %q has features of width %d and %d",
						cfg.Tables[t].Name, d, cfg.Features[f].Dim)
				}
			}
			for p := 0; p < P; p++ {
				dims[t*P+p] = d
			}
		}
		return Embedding{Tensors: bufs, Dims: dims}, nil
	case 4:
		var flat []float32
		for p := 0; p < P; p++ {
			for t := 0; t < T; t++ {
				flat = append(flat, bufs[t*P+p]...)
			}
		}
		return Embedding{Flat: flat}, nil
	}
	return Embedding{Tensors: bufs}, nil
}

// Lists is the inverse of Arrange: the per-list buffers (views) of an Embedding.
func Lists(version int, cfg *featcfg.Config, r *shard.Result, e Embedding) [][]float32 {
	if version != 4 {
		return e.Tensors
	}
	P, T := r.PS, len(cfg.Tables)
	out := make([][]float32, T*P)
	pos := 0
	for p := 0; p < P; p++ {
		for t := 0; t < T; t++ {
			n := int(r.EmbSize[t*P+p])
			out[t*P+p] = e.Flat[pos : pos+n]
			pos += n
		}
	}
	return out
}

// Zeros returns a zeroed Embedding shaped like e (for gradients).
func Zeros(e Embedding) Embedding {
	z := Embedding{Dims: e.Dims}
	for _, t := range e.Tensors {
		z.Tensors = append(z.Tensors, make([]float32, len(t)))
	}
	if e.Flat != nil {
		z.Flat = make([]float32, len(e.Flat))
	}
	return z
}

// Outputs returns zeroed output tensors for a batch of rows.
func (l *Layouter) Outputs(rows int) [][]float32 {
	out := make([][]float32, len(l.sizes))
	for i, n := range l.OutputSizes(rows) {
		out[i] = make([]float32, n)
	}
	return out
}
