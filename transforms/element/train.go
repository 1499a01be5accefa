package element

import (
	"encoding/binary"
	"fmt"
	"math"
)

// TrainState is the training state of one batch, filled by the steps of a training
// pipeline as the batch goes through them (pipelines/train's Lookup and Apply,
// transforms/layout, transforms/model, transforms/aggregate). It rides in Sharded.Train,
// so that the steps stay separate transforms that a runner fuses into one stage.
//
//	ID         the batch's id; the PS request ids of its step derive from it
//	Emb        after Lookup: the embedding rows of every (table, PS shard) fid list of the
//	           sharding result, list k = table×P + shard, rows in list order
//	Params     after Lookup: the model's dense parameters, in the model's order
//	ParamGrads after ForwardBackward: their gradients
//	Grads      after LayoutGrad (attached): the embedding gradients of every list, one row
//	           per fid of the list; after AggregateGrads: one summed row per distinct fid
//	Rows, Loss after ForwardBackward: the rows and the summed log loss of the batch
//	Preds, Labels after ForwardBackward: every row's probability before the update and
//	           its label (for the training AUC)
//
// Encoding: "MTS2", uvarint-prefixed ID, Emb, Params, ParamGrads and the scores (none, or
// the two lists Preds and Labels) as a uvarint count of float lists (each a uvarint length
// and little-endian floats), a uvarint count of Grads (each uvarint-prefixed
// EncodeTableGrads), uvarint Rows, Loss as float64 bits.
type TrainState struct {
	ID         string
	Emb        [][]float32
	Params     [][]float32
	ParamGrads [][]float32
	Grads      []TableGrads
	Rows       int
	Loss       float64
	Preds      []float32
	Labels     []float32
}

// magicTrainState starts an encoded TrainState.
const magicTrainState = "MTS2"

// scores is the fourth list group of the encoding.
func (t *TrainState) scores() [][]float32 {
	if t.Preds == nil && t.Labels == nil {
		return nil
	}
	return [][]float32{t.Preds, t.Labels}
}

// EncodeTrainState encodes t.
func EncodeTrainState(t *TrainState) ([]byte, error) {
	n := 32 + len(t.ID)
	groups := [][][]float32{t.Emb, t.Params, t.ParamGrads, t.scores()}
	for _, ls := range groups {
		for _, l := range ls {
			n += 5 + 4*len(l)
		}
	}
	out := make([]byte, 0, n)
	out = append(out, magicTrainState...)
	out = binary.AppendUvarint(out, uint64(len(t.ID)))
	out = append(out, t.ID...)
	for _, ls := range groups {
		out = binary.AppendUvarint(out, uint64(len(ls)))
		for _, l := range ls {
			out = binary.AppendUvarint(out, uint64(len(l)))
			for _, v := range l {
				out = binary.LittleEndian.AppendUint32(out, math.Float32bits(v))
			}
		}
	}
	out = binary.AppendUvarint(out, uint64(len(t.Grads)))
	for i := range t.Grads {
		g, err := EncodeTableGrads(t.Grads[i])
		if err != nil {
			return nil, fmt.Errorf("transforms/element: encode TrainState grads %d: %w", i, err)
		}
		out = binary.AppendUvarint(out, uint64(len(g)))
		out = append(out, g...)
	}
	out = binary.AppendUvarint(out, uint64(t.Rows))
	out = binary.LittleEndian.AppendUint64(out, math.Float64bits(t.Loss))
	return out, nil
}

// DecodeTrainState decodes an encoded TrainState. Every length is checked against the
// input before anything is allocated.
func DecodeTrainState(b []byte) (*TrainState, error) {
	if len(b) < 4 || string(b[:4]) != magicTrainState {
		return nil, fmt.Errorf("%w: TrainState: bad magic", ErrCorrupt)
	}
	d := decoder{b: b, off: 4, what: "TrainState"}
	t := &TrainState{}
	if n := d.count(1); d.err == nil {
		t.ID = string(d.bytes(n))
	}
	var scores [][]float32
	for _, dst := range []*[][]float32{&t.Emb, &t.Params, &t.ParamGrads, &scores} {
		lists := d.count(1) // each list takes at least its length byte
		if d.err != nil || lists == 0 {
			continue
		}
		*dst = make([][]float32, lists)
		for i := range *dst {
			m := d.count(4)
			if d.err != nil {
				break
			}
			l := make([]float32, m)
			for j := range l {
				l[j] = math.Float32frombits(binary.LittleEndian.Uint32(d.bytes(4)))
			}
			(*dst)[i] = l
		}
	}
	switch {
	case d.err != nil:
	case len(scores) == 2:
		t.Preds, t.Labels = scores[0], scores[1]
	case len(scores) != 0:
		d.err = fmt.Errorf("%w: TrainState: %d score lists, want 0 or 2", ErrCorrupt, len(scores))
	}
	if grads := d.count(1); d.err == nil && grads > 0 {
		t.Grads = make([]TableGrads, grads)
		for i := range t.Grads {
			m := d.count(1)
			if d.err != nil {
				break
			}
			g, err := DecodeTableGrads(d.bytes(m))
			if err != nil {
				return nil, fmt.Errorf("%w: TrainState grads %d: %v", ErrCorrupt, i, err)
			}
			t.Grads[i] = g
		}
	}
	t.Rows = d.count(0)
	if d.err == nil {
		if len(b)-d.off != 8 {
			return nil, fmt.Errorf("%w: TrainState: %d bytes after the rows, want 8", ErrCorrupt, len(b)-d.off)
		}
		t.Loss = math.Float64frombits(binary.LittleEndian.Uint64(b[d.off:]))
	}
	if d.err != nil {
		return nil, d.err
	}
	return t, nil
}

// decoder reads uvarint-prefixed parts with bounds checks; the first error sticks.
type decoder struct {
	b    []byte
	off  int
	what string
	err  error
}

// count reads a uvarint n that must not exceed the bytes left divided by size (size 0: no
// limit but int32).
func (d *decoder) count(size int) int {
	if d.err != nil {
		return 0
	}
	v, k := binary.Uvarint(d.b[d.off:])
	if k <= 0 || v > math.MaxInt32 || (size > 0 && v > uint64(len(d.b)-d.off-k)/uint64(size)) {
		d.err = fmt.Errorf("%w: %s: bad length at offset %d", ErrCorrupt, d.what, d.off)
		return 0
	}
	d.off += k
	return int(v)
}

// bytes returns the next n bytes (count checked that they exist).
func (d *decoder) bytes(n int) []byte {
	if d.err != nil || n > len(d.b)-d.off {
		if d.err == nil {
			d.err = fmt.Errorf("%w: %s: %d bytes past the end at offset %d", ErrCorrupt, d.what, n, d.off)
		}
		return nil
	}
	p := d.b[d.off : d.off+n]
	d.off += n
	return p
}
