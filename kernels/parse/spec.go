package parse

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/monolith-go/monolith/schemas/batch"
)

// ErrSpec reports an invalid Spec (NewSpec).
var ErrSpec = errors.New("kernels/parse: invalid spec")

// ErrInput reports a batch that Monolith's parser rejects: it would abort the process or
// return an error. The message names the feature and, where there is one, the row.
var ErrInput = errors.New("kernels/parse: input rejected")

// Reserved output names (io.md §4.2–§4.4): dense features with these names are filled from
// the sample's label and instance weight instead of a feature of that name alone.
const (
	NameLabel          = "label"
	NameInstanceWeight = "instance_weight"
)

// MaxDim bounds the dim of a dense or extra feature.
const MaxDim = 1 << 20

// MaxV1Slot is the largest v1 slot (10 bits, io.md §2.1).
const MaxV1Slot = 1023

// DType is the element type of a dense feature.
type DType uint8

// Dense element types. The zero value is Float32, the reference's default dtype.
const (
	Float32 DType = iota // float32 (tf.float32)
	Int64                // int64 (tf.int64)
	Bytes                // binary (tf.string)
)

func (d DType) String() string {
	switch d {
	case Float32:
		return "float32"
	case Int64:
		return "int64"
	case Bytes:
		return "bytes"
	}
	return "DType(" + strconv.Itoa(int(d)) + ")"
}

func (d DType) arrowType() arrow.DataType {
	switch d {
	case Int64:
		return arrow.PrimitiveTypes.Int64
	case Bytes:
		return arrow.BinaryTypes.Binary
	}
	return arrow.PrimitiveTypes.Float32
}

// SparseFeature requests one sparse (fid) feature.
//
// For Example and ExampleBatch batches it reads the feature column called Name. For Instance
// batches a fidv1 slot feature (FidV1) reads the top-level fids of v1 slot Slot (the batch's
// "fc_slot_<Slot>" column, as parse_instances' fidv1_features do); any other feature reads
// the Instance feature called Name (parse_instances' fidv2_features). NewSpec marks a feature
// named "slot_<n>" or "fc_slot_<n>" (n decimal, 0..1023) as the fidv1 feature of slot n.
type SparseFeature struct {
	Name  string
	FidV1 bool // Instance only: a fidv1 slot feature
	Slot  int  // the v1 slot of a FidV1 feature, 0..MaxV1Slot
}

// DenseFeature requests one dense feature of Dim values per row. "label" and
// "instance_weight" are filled from the sample's label and weight (see the package doc).
type DenseFeature struct {
	Name  string
	Dim   int
	DType DType
}

// ExtraFeature requests one LineId field (io.md §2.4) as a dense column of Dim values per
// row. Its type follows Monolith's mapping of §4.2: integer fields int64, float fields
// float32, string fields binary (see ExtraType).
type ExtraFeature struct {
	Name string
	Dim  int
}

// Spec is a validated parse request. It is immutable and safe for concurrent use.
type Spec struct {
	sparse  []SparseFeature
	dense   []DenseFeature
	extra   []ExtraFeature
	fields  []lineField // per extra
	hasV2   bool        // some sparse feature is not a fidv1 slot feature
	label   int         // index in dense of "label", or -1
	iw      int         // index in dense of "instance_weight", or -1
	byName  map[string]outRef
	schemas [4]*arrow.Schema
}

// outRef locates an output by name.
type outRef struct {
	i      int // index in its list
	sparse bool
	extra  bool
}

// lineKind is how a LineId field is stored.
type lineKind uint8

const (
	lkInt64 lineKind = iota // scalar integer
	lkFloat                 // scalar float
	lkBytes                 // scalar string
	lkInts                  // repeated int32
)

// lineField is one supported LineId field.
type lineField struct {
	num  int
	kind lineKind
}

// LineId fields an extra feature may name (io.md §2.4), by field number (batch.LineIDNum*).
// is_draw is a bool, which Monolith rejects.
var lineFields = map[string]lineField{
	"uid":                {batch.LineIDNumUID, lkInt64},
	"req_time":           {batch.LineIDNumReqTime, lkInt64},
	"item_id":            {batch.LineIDNumItemID, lkInt64},
	"actions":            {batch.LineIDNumActions, lkInts},
	"chnid":              {batch.LineIDNumChnid, lkInt64},
	"pre_actions":        {batch.LineIDNumPreActions, lkInts},
	"sample_rate":        {batch.LineIDNumSampleRate, lkFloat},
	"special_strategies": {batch.LineIDNumSpecialStrategies, lkInts},
	"device_type":        {batch.LineIDNumDeviceType, lkBytes},
	"cid":                {batch.LineIDNumCid, lkBytes},
	"user_id":            {batch.LineIDNumUserID, lkBytes},
	"rank":               {batch.LineIDNumRank, lkInt64},
	"data_source_name":   {batch.LineIDNumDataSourceName, lkBytes},
}

func (k lineKind) dtype() DType {
	switch k {
	case lkFloat:
		return Float32
	case lkBytes:
		return Bytes
	}
	return Int64
}

// ExtraType returns the output type of the LineId field name, or an error when an extra
// feature cannot name it.
func ExtraType(name string) (DType, error) {
	f, ok := lineFields[name]
	if !ok {
		if name == "is_draw" {
			return 0, fmt.Errorf("%w: LineId field %q is a bool; Monolith's parsers reject bool fields", ErrSpec, name)
		}
		return 0, fmt.Errorf("%w: %q is not a LineId field", ErrSpec, name)
	}
	return f.kind.dtype(), nil
}

// slotOfName returns n for "slot_<n>" and "fc_slot_<n>" (n decimal, at most MaxV1Slot),
// else -1.
func slotOfName(name string) int {
	rest, ok := strings.CutPrefix(name, "fc_slot_")
	if !ok {
		if rest, ok = strings.CutPrefix(name, "slot_"); !ok {
			return -1
		}
	}
	if rest == "" || len(rest) > 4 {
		return -1
	}
	n := 0
	for _, c := range []byte(rest) {
		if c < '0' || c > '9' {
			return -1
		}
		n = n*10 + int(c-'0')
	}
	if n > MaxV1Slot {
		return -1
	}
	return n
}

// SlotFeature returns the fidv1 feature of a v1 slot under Monolith's default output name
// "slot_<slot>".
func SlotFeature(slot int) SparseFeature {
	return SparseFeature{Name: "slot_" + strconv.Itoa(slot), FidV1: true, Slot: slot}
}

// NewSpec validates a parse request. Names must be non-empty and unique across the three
// lists (Monolith asserts this). "__LABEL__" and "__LINE_ID__" cannot be requested (the
// parsers consume them); "label" and "instance_weight" may only be float32 dense features,
// and "instance_weight" has dim 1. Dims are 1..MaxDim; bytes dense features have dim 1.
// Fidv1 slots are 0..MaxV1Slot and distinct. Extra features name LineId fields other than
// the bool is_draw.
func NewSpec(sparse []SparseFeature, dense []DenseFeature, extra []ExtraFeature) (*Spec, error) {
	s := &Spec{
		sparse: append([]SparseFeature(nil), sparse...),
		dense:  append([]DenseFeature(nil), dense...),
		extra:  append([]ExtraFeature(nil), extra...),
		label:  -1, iw: -1,
	}
	seen := make(map[string]string, len(sparse)+len(dense)+len(extra))
	name := func(n, what string) error {
		switch {
		case n == "":
			return fmt.Errorf("%w: a %s feature has no name", ErrSpec, what)
		case n == batch.ListLabel || n == batch.ListLineID:
			return fmt.Errorf("%w: %s feature %q: the name is reserved", ErrSpec, what, n)
		}
		if prev, dup := seen[n]; dup {
			return fmt.Errorf("%w: %q is requested as a %s and as a %s feature", ErrSpec, n, prev, what)
		}
		seen[n] = what
		return nil
	}
	slots := map[int]string{}
	for i := range s.sparse {
		f := &s.sparse[i]
		if err := name(f.Name, "sparse"); err != nil {
			return nil, err
		}
		if f.Name == NameLabel || f.Name == NameInstanceWeight {
			return nil, fmt.Errorf("%w: %q can only be a float32 dense feature", ErrSpec, f.Name)
		}
		if !f.FidV1 {
			if n := slotOfName(f.Name); n >= 0 {
				f.FidV1, f.Slot = true, n
			}
		}
		if !f.FidV1 {
			f.Slot = 0
			s.hasV2 = true
			continue
		}
		if f.Slot < 0 || f.Slot > MaxV1Slot {
			return nil, fmt.Errorf("%w: sparse feature %q: v1 slot %d is outside 0..%d", ErrSpec, f.Name, f.Slot, MaxV1Slot)
		}
		if prev, dup := slots[f.Slot]; dup {
			return nil, fmt.Errorf("%w: sparse features %q and %q both read v1 slot %d", ErrSpec, prev, f.Name, f.Slot)
		}
		slots[f.Slot] = f.Name
	}
	for i, f := range s.dense {
		if err := name(f.Name, "dense"); err != nil {
			return nil, err
		}
		if f.Dim < 1 || f.Dim > MaxDim {
			return nil, fmt.Errorf("%w: dense feature %q: dim %d is outside 1..%d", ErrSpec, f.Name, f.Dim, MaxDim)
		}
		switch f.DType {
		case Float32, Int64:
		case Bytes:
			if f.Dim != 1 {
				return nil, fmt.Errorf("%w: dense feature %q: bytes features have dim 1, not %d", ErrSpec, f.Name, f.Dim)
			}
		default:
			return nil, fmt.Errorf("%w: dense feature %q: unknown dtype %s", ErrSpec, f.Name, f.DType)
		}
		switch f.Name {
		case NameLabel:
			s.label = i
		case NameInstanceWeight:
			s.iw = i
			if f.Dim != 1 {
				return nil, fmt.Errorf("%w: %q has dim 1, not %d", ErrSpec, f.Name, f.Dim)
			}
		default:
			continue
		}
		if f.DType != Float32 {
			return nil, fmt.Errorf("%w: %q is float32, not %s", ErrSpec, f.Name, f.DType)
		}
	}
	for _, f := range s.extra {
		if err := name(f.Name, "extra"); err != nil {
			return nil, err
		}
		if _, err := ExtraType(f.Name); err != nil {
			return nil, err
		}
		if f.Dim < 1 || f.Dim > MaxDim {
			return nil, fmt.Errorf("%w: extra feature %q: dim %d is outside 1..%d", ErrSpec, f.Name, f.Dim, MaxDim)
		}
		s.fields = append(s.fields, lineFields[f.Name])
	}
	s.byName = make(map[string]outRef, len(seen))
	for i, f := range s.sparse {
		s.byName[f.Name] = outRef{i: i, sparse: true}
	}
	for i, f := range s.dense {
		s.byName[f.Name] = outRef{i: i}
	}
	for i, f := range s.extra {
		s.byName[f.Name] = outRef{i: i, extra: true}
	}
	for _, src := range []batch.Source{batch.SourceExampleBatch, batch.SourceExample, batch.SourceInstance} {
		s.schemas[src] = s.buildSchema(src)
	}
	return s, nil
}

// Sparse returns the sparse features, with the fidv1 slots NewSpec inferred from names.
func (s *Spec) Sparse() []SparseFeature { return append([]SparseFeature(nil), s.sparse...) }

// Dense returns the dense features.
func (s *Spec) Dense() []DenseFeature { return append([]DenseFeature(nil), s.dense...) }

// Extra returns the extra (LineId) features.
func (s *Spec) Extra() []ExtraFeature { return append([]ExtraFeature(nil), s.extra...) }

// Metadata keys of the output schema.
const (
	MetaSource = "monolith.parse.source" // schema: the batch.Source of the input
	MetaRole   = "monolith.parse.role"   // field: "sparse", "dense" or "extra"
	MetaFid    = "monolith.parse.fid"    // sparse field: "v2", or "v1" for raw v1 fids
)

// FidV1Raw reports whether Parse outputs the fidv1 slot features of an Instance batch as raw
// v1 fids: Monolith converts them to v2 only when some fidv2 feature is requested too.
func (s *Spec) FidV1Raw() bool { return !s.hasV2 }

// Schema returns the schema of Parse's output for batches of source src (nil for an invalid
// source).
func (s *Spec) Schema(src batch.Source) *arrow.Schema {
	if src < batch.SourceExampleBatch || src > batch.SourceInstance {
		return nil
	}
	return s.schemas[src]
}

func (s *Spec) buildSchema(src batch.Source) *arrow.Schema {
	fields := make([]arrow.Field, 0, len(s.sparse)+len(s.dense)+len(s.extra))
	for _, f := range s.sparse {
		ver := "v2"
		if src == batch.SourceInstance && f.FidV1 && !s.hasV2 {
			ver = "v1"
		}
		fields = append(fields, arrow.Field{Name: f.Name, Type: arrow.ListOf(arrow.PrimitiveTypes.Uint64),
			Metadata: arrow.NewMetadata([]string{MetaRole, MetaFid}, []string{"sparse", ver})})
	}
	for _, f := range s.dense {
		fields = append(fields, arrow.Field{Name: f.Name, Type: arrow.FixedSizeListOf(int32(f.Dim), f.DType.arrowType()),
			Metadata: arrow.NewMetadata([]string{MetaRole}, []string{"dense"})})
	}
	for i, f := range s.extra {
		fields = append(fields, arrow.Field{Name: f.Name, Type: arrow.FixedSizeListOf(int32(f.Dim), s.fields[i].kind.dtype().arrowType()),
			Metadata: arrow.NewMetadata([]string{MetaRole}, []string{"extra"})})
	}
	md := arrow.NewMetadata([]string{MetaSource}, []string{src.String()})
	return arrow.NewSchema(fields, &md)
}
