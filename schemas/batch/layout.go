package batch

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/monolith-go/monolith/schemas/fid"
)

// LayoutVersion is the value of the schema metadata key MetaLayout. Frozen: bump it when
// the layout changes incompatibly.
const LayoutVersion = "1"

// Reserved column names.
const (
	ColLabel          = "__label__"
	ColInstanceWeight = "__instance_weight__"
	ColLineID         = "__line_id__"
	ColDataSourceKey  = "__data_source_key__"
	ColExtra          = "__extra__"
	ColFidOrder       = "__fid_order__"
	v1hiPrefix        = "__v1hi__:"
	cellPrefix        = "__cell__:"
	lineIDFieldPrefix = "__line_id__."
)

// Names of the reserved ExampleBatch lists and Example named features (io.md §2.6).
const (
	ListLineID         = "__LINE_ID__"
	ListLabel          = "__LABEL__"
	ListInstanceWeight = "instance_weight"
)

// Metadata keys. Schema level: MetaLayout, MetaSource, MetaExtra. Field level: the rest.
const (
	MetaLayout   = "monolith.layout"
	MetaSource   = "monolith.source"
	MetaExtra    = "monolith.extra" // base64 wire bytes of batch-level unmodelled fields
	MetaRole     = "monolith.role"  // Role of the column; absent for features
	MetaKind     = "monolith.kind"  // Kind name of every non-null cell, or "mixed"
	MetaNull     = "monolith.null"  // "unset" or "absent": what a null cell means
	MetaID       = "monolith.id"    // NamedFeatureList.id / NamedFeature.id
	MetaSortedID = "monolith.sorted_id"
	MetaOf       = "monolith.of"       // the feature a companion column belongs to
	MetaList     = "monolith.list"     // original ExampleBatch list name of a canonical column
	MetaInstance = "monolith.instance" // Instance origin: "fid" (slot group) or "value"
)

// Role says what a column holds.
type Role string

// Column roles.
const (
	RoleFeature        Role = ""
	RoleLabel          Role = "label"
	RoleInstanceWeight Role = "instance_weight"
	RoleLineID         Role = "line_id"
	RoleDataSourceKey  Role = "data_source_key"
	RoleExtra          Role = "extra"
	RoleLineIDField    Role = "line_id_field"
	RoleV1Hi           Role = "v1hi"
	RoleCell           Role = "cell"
	RoleFidOrder       Role = "fid_order"
)

// Source is the message type a batch was built from.
type Source uint8

// Sources. The zero value is invalid.
const (
	SourceExampleBatch Source = iota + 1
	SourceExample
	SourceInstance
)

var sourceNames = [...]string{SourceExampleBatch: "examplebatch", SourceExample: "example", SourceInstance: "instance"}

func (s Source) String() string {
	if s >= SourceExampleBatch && s <= SourceInstance {
		return sourceNames[s]
	}
	return "Source(" + strconv.Itoa(int(s)) + ")"
}

// ParseSource parses "examplebatch" (also "example_batch"), "example" or "instance".
func ParseSource(s string) (Source, error) {
	switch s {
	case "examplebatch", "example_batch", "ExampleBatch":
		return SourceExampleBatch, nil
	case "example", "Example":
		return SourceExample, nil
	case "instance", "Instance":
		return SourceInstance, nil
	}
	return 0, fmt.Errorf("schemas/batch: unknown message type %q (want examplebatch, example or instance)", s)
}

// Kind is the kind of one feature cell: the field number of the Monolith Feature oneof
// member that holds its value, or KindUnset / KindAbsent.
type Kind uint8

// Cell kinds. The values 1..16 are the Feature oneof field numbers and are frozen.
const (
	KindUnset       Kind = 0 // the cell exists with no value (a Feature whose oneof is unset)
	KindFidV1List   Kind = 1
	KindFidV2List   Kind = 2
	KindFloatList   Kind = 3
	KindDoubleList  Kind = 4
	KindInt64List   Kind = 5
	KindBytesList   Kind = 6
	KindFidV2Lists  Kind = 7
	KindFloatLists  Kind = 8
	KindDoubleLists Kind = 9
	KindInt64Lists  Kind = 10
	KindBytesLists  Kind = 11
	KindInt64Value  Kind = 12
	KindFloatValue  Kind = 13
	KindDoubleValue Kind = 14
	KindBytesValue  Kind = 15
	KindFidV1Lists  Kind = 16
	KindNoFeature   Kind = 254 // an Example NamedFeature without a Feature message
	KindAbsent      Kind = 255 // the row has no such feature
)

var kindNames = map[Kind]string{
	KindUnset: "unset", KindFidV1List: "fid_v1_list", KindFidV2List: "fid_v2_list",
	KindFloatList: "float_list", KindDoubleList: "double_list", KindInt64List: "int64_list",
	KindBytesList: "bytes_list", KindFidV2Lists: "fid_v2_lists", KindFloatLists: "float_lists",
	KindDoubleLists: "double_lists", KindInt64Lists: "int64_lists", KindBytesLists: "bytes_lists",
	KindInt64Value: "int64_value", KindFloatValue: "float_value", KindDoubleValue: "double_value",
	KindBytesValue: "bytes_value", KindFidV1Lists: "fid_v1_lists", KindNoFeature: "no_feature", KindAbsent: "absent",
}

func (k Kind) String() string {
	if s, ok := kindNames[k]; ok {
		return s
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// ParseKind is the inverse of Kind.String.
func ParseKind(s string) (Kind, error) {
	for k, n := range kindNames {
		if n == s {
			return k, nil
		}
	}
	return 0, fmt.Errorf("schemas/batch: unknown cell kind %q", s)
}

// IsValue reports whether k is a value kind (not unset or absent).
func (k Kind) IsValue() bool { return k >= KindFidV1List && k <= KindFidV1Lists }

// IsFid reports whether k is a flat fid list (the sparse features the kernels shard).
func (k Kind) IsFid() bool { return k == KindFidV1List || k == KindFidV2List }

// family groups kinds that share one Arrow type and so can share a column.
type family uint8

const (
	famNone family = iota
	famFid
	famFloat
	famDouble
	famInt64
	famBytes
	famFidLists
	famFloatLists
	famDoubleLists
	famInt64Lists
	famBytesLists
	famInt64Value
	famFloatValue
	famDoubleValue
	famBytesValue
	famFidV1Lists
)

func (k Kind) family() family {
	switch k {
	case KindFidV1List, KindFidV2List:
		return famFid
	case KindFloatList:
		return famFloat
	case KindDoubleList:
		return famDouble
	case KindInt64List:
		return famInt64
	case KindBytesList:
		return famBytes
	case KindFidV2Lists:
		return famFidLists
	case KindFloatLists:
		return famFloatLists
	case KindDoubleLists:
		return famDoubleLists
	case KindInt64Lists:
		return famInt64Lists
	case KindBytesLists:
		return famBytesLists
	case KindInt64Value:
		return famInt64Value
	case KindFloatValue:
		return famFloatValue
	case KindDoubleValue:
		return famDoubleValue
	case KindBytesValue:
		return famBytesValue
	case KindFidV1Lists:
		return famFidV1Lists
	}
	return famNone
}

// arrowType is the Arrow type of a column of family f.
func (f family) arrowType() arrow.DataType {
	switch f {
	case famFid:
		return arrow.ListOf(arrow.PrimitiveTypes.Uint64)
	case famFloat:
		return arrow.ListOf(arrow.PrimitiveTypes.Float32)
	case famDouble:
		return arrow.ListOf(arrow.PrimitiveTypes.Float64)
	case famInt64:
		return arrow.ListOf(arrow.PrimitiveTypes.Int64)
	case famBytes:
		return arrow.ListOf(arrow.BinaryTypes.Binary)
	case famFidLists, famFidV1Lists:
		return arrow.ListOf(arrow.ListOf(arrow.PrimitiveTypes.Uint64))
	case famFloatLists:
		return arrow.ListOf(arrow.ListOf(arrow.PrimitiveTypes.Float32))
	case famDoubleLists:
		return arrow.ListOf(arrow.ListOf(arrow.PrimitiveTypes.Float64))
	case famInt64Lists:
		return arrow.ListOf(arrow.ListOf(arrow.PrimitiveTypes.Int64))
	case famBytesLists:
		return arrow.ListOf(arrow.ListOf(arrow.BinaryTypes.Binary))
	case famInt64Value:
		return arrow.PrimitiveTypes.Int64
	case famFloatValue:
		return arrow.PrimitiveTypes.Float32
	case famDoubleValue:
		return arrow.PrimitiveTypes.Float64
	case famBytesValue:
		return arrow.BinaryTypes.Binary
	}
	return arrow.Null
}

// ErrLayout reports a record that does not follow the batch layout.
var ErrLayout = errors.New("schemas/batch: record does not follow the batch layout")

// ErrUnrepresentable reports input that the batch (or the requested target message type)
// cannot hold without losing data.
var ErrUnrepresentable = errors.New("schemas/batch: not representable without loss")

// SourceOf returns the Source recorded in the record's schema.
func SourceOf(s *arrow.Schema) (Source, error) {
	md := s.Metadata()
	if v, ok := md.GetValue(MetaLayout); !ok || v != LayoutVersion {
		return 0, fmt.Errorf("%w: schema metadata %s=%q, want %q", ErrLayout, MetaLayout, v, LayoutVersion)
	}
	v, _ := md.GetValue(MetaSource)
	src, err := ParseSource(v)
	if err != nil {
		return 0, fmt.Errorf("%w: %v", ErrLayout, err)
	}
	return src, nil
}

// RoleOf returns the role of a field.
func RoleOf(f arrow.Field) Role {
	v, _ := f.Metadata.GetValue(MetaRole)
	return Role(v)
}

// FeatureKind returns the column-level kind of a feature field and whether its cells mix
// kinds (then the per-cell kinds are in its "__cell__" companion).
func FeatureKind(f arrow.Field) (k Kind, mixed bool, err error) {
	v, ok := f.Metadata.GetValue(MetaKind)
	if !ok {
		return 0, false, fmt.Errorf("%w: feature %q has no %s", ErrLayout, f.Name, MetaKind)
	}
	if v == "mixed" {
		return 0, true, nil
	}
	k, err = ParseKind(v)
	if err != nil {
		return 0, false, fmt.Errorf("%w: feature %q: %v", ErrLayout, f.Name, err)
	}
	return k, false, nil
}

// IsFeature reports whether the field is a feature column.
func IsFeature(f arrow.Field) bool { return RoleOf(f) == RoleFeature }

// fidV2Mask keeps the 48 signature bits of a v2 fid.
const fidV2Mask = fid.V2SigMask

// V1ToV2 converts a v1 fid to v2 (io.md §2.1); see schemas/fid.
func V1ToV2(v1 uint64) uint64 { return fid.V1ToV2(v1) }
