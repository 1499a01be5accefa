package datadef

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/monolith-go/monolith/internal/pytext"
)

// ErrSyntax reports input that Python's json.loads would reject (or a lone surrogate
// escape, which a Go string cannot hold).
var ErrSyntax = errors.New("serving/datadef: invalid JSON")

// ErrFieldType reports a well-formed document whose top level is not an object or
// one of whose fields has a type or value the field cannot hold.
var ErrFieldType = errors.New("serving/datadef: wrong field type")

// ErrNullPathPart reports a path helper called on a value whose path component is null.
var ErrNullPathPart = errors.New("serving/datadef: null path component")

// Null is a value that may be absent: Python's None, JSON null. The zero value is
// null. Null[T] is comparable when T is.
type Null[T any] struct {
	V     T    // the value; meaningful only when Valid
	Valid bool // false for null
}

// Some returns a non-null Null holding v.
func Some[T any](v T) Null[T] { return Null[T]{V: v, Valid: true} }

// Get returns the value and whether it is non-null.
func (n Null[T]) Get() (T, bool) { return n.V, n.Valid }

// ModelState is TF Serving's ModelVersionStatus.State, stored as ReplicaMeta.stat.
type ModelState int64

// TF Serving model version states.
const (
	ModelStateUnknown   ModelState = 0
	ModelStateStart     ModelState = 10
	ModelStateLoading   ModelState = 20
	ModelStateAvailable ModelState = 30
	ModelStateUnloading ModelState = 40
	ModelStateEnd       ModelState = 50
)

// PublishType is PublishMeta.ptype: serialized as its integer value.
type PublishType int64

// Publish types; no other value decodes.
const (
	PublishLoad   PublishType = 1
	PublishUnload PublishType = 2
)

// String returns the Python enum member name, or the number for an unknown value.
func (t PublishType) String() string {
	switch t {
	case PublishLoad:
		return "LOAD"
	case PublishUnload:
		return "UNLOAD"
	}
	return "PublishType(" + strconv.FormatInt(int64(t), 10) + ")"
}

// ---- ModelMeta ----

// ModelMeta is a model's portal node (/{bzid}/portal/{model}). The zero value is not
// Python's default; use NewModelMeta.
type ModelMeta struct {
	ModelName    Null[string] // model_name, default null
	ModelDir     Null[string] // model_dir, default null
	Ckpt         Null[string] // ckpt, default null
	NumShard     int64        // num_shard, default -1
	Action       string       // action, default "NONE"
	SpecReplicas []int64      // spec_replicas, default []; nil and empty both write [], [] decodes as nil
}

// NewModelMeta returns a ModelMeta holding Python's defaults.
func NewModelMeta() ModelMeta { return ModelMeta{NumShard: -1, Action: "NONE"} }

// Serialize returns the UTF-8 bytes of the value's Python to_json text.
func (m ModelMeta) Serialize() []byte {
	w := newObjWriter()
	w.nstr("model_name", m.ModelName)
	w.nstr("model_dir", m.ModelDir)
	w.nstr("ckpt", m.Ckpt)
	w.int("num_shard", m.NumShard)
	w.str("action", m.Action)
	w.ints("spec_replicas", m.SpecReplicas)
	return w.done()
}

// DeserializeModelMeta decodes what ModelMeta.serialize (Python or Go) writes. Missing
// keys take Python's defaults; unknown keys are ignored.
func DeserializeModelMeta(b []byte) (ModelMeta, error) {
	m := NewModelMeta()
	r, err := readObject("ModelMeta", b)
	if err != nil {
		return ModelMeta{}, err
	}
	if err := errors.Join(
		r.nstr("model_name", &m.ModelName),
		r.nstr("model_dir", &m.ModelDir),
		r.nstr("ckpt", &m.Ckpt),
		r.int("num_shard", &m.NumShard),
		r.str("action", &m.Action),
		r.ints("spec_replicas", &m.SpecReplicas),
	); err != nil {
		return ModelMeta{}, err
	}
	return m, nil
}

// Path returns os.path.join(base, model_name); an error if the model name is null.
func (m ModelMeta) Path(base string) (string, error) {
	if !m.ModelName.Valid {
		return "", fmt.Errorf("%w: ModelMeta.model_name", ErrNullPathPart)
	}
	return pytext.PathJoin(base, m.ModelName.V), nil
}

// ---- ResourceSpec ----

// ResourceSpec is a serving host's resource node (/{bzid}/resource/{shard}:{replica}).
// The zero value is not Python's default; use NewResourceSpec.
type ResourceSpec struct {
	Address   Null[string] // address "host:port", default null
	ShardID   Null[int64]  // shard_id, default null
	ReplicaID Null[int64]  // replica_id, default null
	Memory    Null[int64]  // memory in bytes, default null
	CPU       float64      // cpu, default -1.0
	Network   float64      // network, default -1.0
	WorkLoad  float64      // work_load, default -1.0
}

// NewResourceSpec returns a ResourceSpec holding Python's defaults.
func NewResourceSpec() ResourceSpec { return ResourceSpec{CPU: -1, Network: -1, WorkLoad: -1} }

// Serialize returns the UTF-8 bytes of the value's Python to_json text.
func (s ResourceSpec) Serialize() []byte {
	w := newObjWriter()
	w.nstr("address", s.Address)
	w.nint("shard_id", s.ShardID)
	w.nint("replica_id", s.ReplicaID)
	w.nint("memory", s.Memory)
	w.float("cpu", s.CPU)
	w.float("network", s.Network)
	w.float("work_load", s.WorkLoad)
	return w.done()
}

// DeserializeResourceSpec decodes what ResourceSpec.serialize writes. Missing keys
// take Python's defaults; unknown keys are ignored; an integer in a float field is
// converted.
func DeserializeResourceSpec(b []byte) (ResourceSpec, error) {
	s := NewResourceSpec()
	r, err := readObject("ResourceSpec", b)
	if err != nil {
		return ResourceSpec{}, err
	}
	if err := errors.Join(
		r.nstr("address", &s.Address),
		r.nint("shard_id", &s.ShardID),
		r.nint("replica_id", &s.ReplicaID),
		r.nint("memory", &s.Memory),
		r.float("cpu", &s.CPU),
		r.float("network", &s.Network),
		r.float("work_load", &s.WorkLoad),
	); err != nil {
		return ResourceSpec{}, err
	}
	return s, nil
}

// Path returns os.path.join(base, "{shard_id}:{replica_id}"); an error if either is
// null (Python would write "None").
func (s ResourceSpec) Path(base string) (string, error) {
	if !s.ShardID.Valid || !s.ReplicaID.Valid {
		return "", fmt.Errorf("%w: ResourceSpec.shard_id or replica_id", ErrNullPathPart)
	}
	return pytext.PathJoin(base, strconv.FormatInt(s.ShardID.V, 10)+":"+strconv.FormatInt(s.ReplicaID.V, 10)), nil
}

// ---- PublishMeta ----

// SubModel is one entry of PublishMeta.sub_models: a sub-model name (entry, ps_{n},
// dense) and its version path.
type SubModel struct {
	Name        string
	VersionPath string
}

// PublishMeta is a publish node (/{bzid}/publish/{shard}:{replica}:{model}). The zero
// value is not Python's default; use NewPublishMeta.
type PublishMeta struct {
	ShardID         Null[int64]  // shard_id, default null
	ReplicaID       int64        // replica_id, default -1
	ModelName       Null[string] // model_name, default null
	NumPS           Null[int64]  // num_ps, default null
	TotalPublishNum int64        // total_publish_num, default 1
	// SubModels is sub_models, a JSON object in this order (Python dicts keep order);
	// default null. A non-null empty slice writes {}.
	SubModels Null[[]SubModel]
	PType     PublishType // ptype, default PublishLoad
	IsSpec    bool        // is_spec, default false
}

// NewPublishMeta returns a PublishMeta holding Python's defaults.
func NewPublishMeta() PublishMeta {
	return PublishMeta{ReplicaID: -1, TotalPublishNum: 1, PType: PublishLoad}
}

// Serialize returns the UTF-8 bytes of the value's Python to_json text.
func (m PublishMeta) Serialize() []byte {
	w := newObjWriter()
	w.nint("shard_id", m.ShardID)
	w.int("replica_id", m.ReplicaID)
	w.nstr("model_name", m.ModelName)
	w.nint("num_ps", m.NumPS)
	w.int("total_publish_num", m.TotalPublishNum)
	if m.SubModels.Valid {
		w.key("sub_models")
		sub := newObjWriter()
		for _, s := range m.SubModels.V {
			sub.str(s.Name, s.VersionPath)
		}
		w.b = append(w.b, sub.done()...)
	} else {
		w.null("sub_models")
	}
	w.int("ptype", int64(m.PType))
	w.bool("is_spec", m.IsSpec)
	return w.done()
}

// DeserializePublishMeta decodes what PublishMeta.serialize writes. Missing keys take
// Python's defaults; unknown keys are ignored. A sub-model named twice keeps its first
// position and its last value, as a Python dict does.
func DeserializePublishMeta(b []byte) (PublishMeta, error) {
	m := NewPublishMeta()
	r, err := readObject("PublishMeta", b)
	if err != nil {
		return PublishMeta{}, err
	}
	ptype := int64(m.PType)
	if err := errors.Join(
		r.nint("shard_id", &m.ShardID),
		r.int("replica_id", &m.ReplicaID),
		r.nstr("model_name", &m.ModelName),
		r.nint("num_ps", &m.NumPS),
		r.int("total_publish_num", &m.TotalPublishNum),
		r.subModels("sub_models", &m.SubModels),
		r.int("ptype", &ptype),
		r.bool("is_spec", &m.IsSpec),
	); err != nil {
		return PublishMeta{}, err
	}
	if t := PublishType(ptype); t != PublishLoad && t != PublishUnload {
		return PublishMeta{}, r.fail("ptype", fmt.Errorf("%w: %d is not a PublishType", ErrFieldType, ptype))
	}
	m.PType = PublishType(ptype)
	return m, nil
}

func (r fieldReader) subModels(name string, dst *Null[[]SubModel]) error {
	v, ok := r.m[name]
	switch {
	case !ok:
		return nil
	case v.kind == jNull:
		*dst = Null[[]SubModel]{}
		return nil
	case v.kind != jObject:
		return r.wrong(name, "object or null", v)
	}
	out := make([]SubModel, 0, len(v.obj))
	pos := make(map[string]int, len(v.obj))
	for _, mb := range v.obj {
		if mb.val.kind != jString {
			return r.wrong(name+"."+mb.key, "string", mb.val)
		}
		if i, dup := pos[mb.key]; dup {
			out[i].VersionPath = mb.val.s
			continue
		}
		pos[mb.key] = len(out)
		out = append(out, SubModel{Name: mb.key, VersionPath: mb.val.s})
	}
	*dst = Some(out)
	return nil
}

// Path returns os.path.join(base, "{shard_id}:{replica_id}:{model_name}"); an error if
// the shard id or model name is null (Python would write "None").
func (m PublishMeta) Path(base string) (string, error) {
	if !m.ShardID.Valid || !m.ModelName.Valid {
		return "", fmt.Errorf("%w: PublishMeta.shard_id or model_name", ErrNullPathPart)
	}
	return pytext.PathJoin(base, strconv.FormatInt(m.ShardID.V, 10)+":"+strconv.FormatInt(m.ReplicaID, 10)+":"+m.ModelName.V), nil
}

// ---- ReplicaMeta ----

// ReplicaMeta is a serving replica's service node
// (/{bzid}/service/{model}[/{idc}:{cluster}]/{server_type}:{task}/{replica}). The zero
// value is not Python's default; use NewReplicaMeta.
type ReplicaMeta struct {
	Address           Null[string] // address "host:port", default null
	AddressIPv6       Null[string] // address_ipv6 "[host]:port", default null
	Stat              ModelState   // stat, default ModelStateUnknown
	ModelName         Null[string] // model_name, default null
	ServerType        Null[string] // server_type, default null
	Task              int64        // task, default -1
	Replica           int64        // replica, default -1
	ArchonAddress     Null[string] // archon_address, default null
	ArchonAddressIPv6 Null[string] // archon_address_ipv6, default null
}

// NewReplicaMeta returns a ReplicaMeta holding Python's defaults.
func NewReplicaMeta() ReplicaMeta { return ReplicaMeta{Task: -1, Replica: -1} }

// Serialize returns the UTF-8 bytes of the value's Python to_json text.
func (m ReplicaMeta) Serialize() []byte {
	w := newObjWriter()
	w.nstr("address", m.Address)
	w.nstr("address_ipv6", m.AddressIPv6)
	w.int("stat", int64(m.Stat))
	w.nstr("model_name", m.ModelName)
	w.nstr("server_type", m.ServerType)
	w.int("task", m.Task)
	w.int("replica", m.Replica)
	w.nstr("archon_address", m.ArchonAddress)
	w.nstr("archon_address_ipv6", m.ArchonAddressIPv6)
	return w.done()
}

// DeserializeReplicaMeta decodes what ReplicaMeta.serialize writes. Missing keys take
// Python's defaults; unknown keys are ignored; stat may be any integer.
func DeserializeReplicaMeta(b []byte) (ReplicaMeta, error) {
	m := NewReplicaMeta()
	r, err := readObject("ReplicaMeta", b)
	if err != nil {
		return ReplicaMeta{}, err
	}
	stat := int64(m.Stat)
	if err := errors.Join(
		r.nstr("address", &m.Address),
		r.nstr("address_ipv6", &m.AddressIPv6),
		r.int("stat", &stat),
		r.nstr("model_name", &m.ModelName),
		r.nstr("server_type", &m.ServerType),
		r.int("task", &m.Task),
		r.int("replica", &m.Replica),
		r.nstr("archon_address", &m.ArchonAddress),
		r.nstr("archon_address_ipv6", &m.ArchonAddressIPv6),
	); err != nil {
		return ReplicaMeta{}, err
	}
	m.Stat = ModelState(stat)
	return m, nil
}

// Path returns "/{bzid}/service/{model_name}/{server_type}:{task}/{replica}" (the v2
// layout, without a location level); an error if the model name or server type is
// null.
func (m ReplicaMeta) Path(bzid string) (string, error) {
	if !m.ModelName.Valid || !m.ServerType.Valid {
		return "", fmt.Errorf("%w: ReplicaMeta.model_name or server_type", ErrNullPathPart)
	}
	return "/" + bzid + "/service/" + m.ModelName.V + "/" + m.ServerType.V + ":" +
		strconv.FormatInt(m.Task, 10) + "/" + strconv.FormatInt(m.Replica, 10), nil
}

// AddressFamily selects IPv4 or IPv6 addresses; its values are the reference's strings.
type AddressFamily string

// Address families.
const (
	IPv4 AddressFamily = "ipv4"
	IPv6 AddressFamily = "ipv6"
)

// GetAddress picks the replica's gRPC (or, with useArchon, archon) address for family:
// an IPv4 value starting "0.0.0.0" and an IPv6 value starting "[::]" count as absent, as
// do null and ""; IPv4 prefers the IPv4 value and falls back to IPv6, IPv6 the reverse.
// The result is null when the fallback is null. An unknown family is an error.
func (m ReplicaMeta) GetAddress(useArchon bool, family AddressFamily) (Null[string], error) {
	v4, v6 := m.Address, m.AddressIPv6
	if useArchon {
		v4, v6 = m.ArchonAddress, m.ArchonAddressIPv6
	}
	if v4.Valid && len(v4.V) >= 7 && v4.V[:7] == "0.0.0.0" {
		v4 = Null[string]{}
	}
	if v6.Valid && len(v6.V) >= 4 && v6.V[:4] == "[::]" {
		v6 = Null[string]{}
	}
	first, second := v4, v6
	switch family {
	case IPv4:
	case IPv6:
		first, second = v6, v4
	default:
		return Null[string]{}, fmt.Errorf("serving/datadef: ReplicaMeta.GetAddress: unknown address family %q", string(family))
	}
	if first.Valid && first.V != "" {
		return first, nil
	}
	return second, nil
}

// ---- SavedModelDeployConfig ----

// SavedModelDeployConfig is a declared saved model's node
// (/{bzid}/saved_models/{model}/{sub_graph}). Both fields default to null.
type SavedModelDeployConfig struct {
	ModelBasePath Null[string] // model_base_path: the folder holding version folders
	VersionPolicy Null[string] // version_policy: "latest", "latest_once", "all" …
}

// Serialize returns the UTF-8 bytes of the value's Python to_json text.
func (c SavedModelDeployConfig) Serialize() []byte {
	w := newObjWriter()
	w.nstr("model_base_path", c.ModelBasePath)
	w.nstr("version_policy", c.VersionPolicy)
	return w.done()
}

// DeserializeSavedModelDeployConfig decodes what SavedModelDeployConfig.serialize
// writes. Missing keys are null; unknown keys are ignored.
func DeserializeSavedModelDeployConfig(b []byte) (SavedModelDeployConfig, error) {
	var c SavedModelDeployConfig
	r, err := readObject("SavedModelDeployConfig", b)
	if err != nil {
		return SavedModelDeployConfig{}, err
	}
	if err := errors.Join(
		r.nstr("model_base_path", &c.ModelBasePath),
		r.nstr("version_policy", &c.VersionPolicy),
	); err != nil {
		return SavedModelDeployConfig{}, err
	}
	return c, nil
}

// ---- ContainerServiceInfo ----

// ContainerServiceInfo is a serving container's node
// (/{bzid}/container_service/{ctx_cluster}:{ctx_id}). Every field defaults to null.
type ContainerServiceInfo struct {
	GRPC   Null[string] // grpc "ip:port"
	HTTP   Null[string] // http "ip:port"
	Archon Null[string] // archon "ip:port"
	Agent  Null[string] // agent "ip:port"
	IDC    Null[string] // idc: data-center name
	// DebugInfo is JSON text; AgentV3 writes ContainerDebugInfo.Serialize.
	DebugInfo Null[string]
}

// Serialize returns the UTF-8 bytes of the value's Python to_json text.
func (c ContainerServiceInfo) Serialize() []byte {
	w := newObjWriter()
	w.nstr("grpc", c.GRPC)
	w.nstr("http", c.HTTP)
	w.nstr("archon", c.Archon)
	w.nstr("agent", c.Agent)
	w.nstr("idc", c.IDC)
	w.nstr("debug_info", c.DebugInfo)
	return w.done()
}

// DeserializeContainerServiceInfo decodes what ContainerServiceInfo.serialize writes.
// Missing keys are null; unknown keys are ignored.
func DeserializeContainerServiceInfo(b []byte) (ContainerServiceInfo, error) {
	var c ContainerServiceInfo
	r, err := readObject("ContainerServiceInfo", b)
	if err != nil {
		return ContainerServiceInfo{}, err
	}
	if err := errors.Join(
		r.nstr("grpc", &c.GRPC),
		r.nstr("http", &c.HTTP),
		r.nstr("archon", &c.Archon),
		r.nstr("agent", &c.Agent),
		r.nstr("idc", &c.IDC),
		r.nstr("debug_info", &c.DebugInfo),
	); err != nil {
		return ContainerServiceInfo{}, err
	}
	return c, nil
}

// ContainerDebugInfo is the JSON text AgentV3 stores in ContainerServiceInfo.DebugInfo:
// json.dumps({"layout_path": …, "layout_filters": ["{match};{cond}", …]}).
type ContainerDebugInfo struct {
	LayoutPath    string
	LayoutFilters []string // nil and empty both write [], [] decodes as nil
}

// Serialize returns the Python json.dumps text.
func (d ContainerDebugInfo) Serialize() string {
	w := newObjWriter()
	w.str("layout_path", d.LayoutPath)
	w.strs("layout_filters", d.LayoutFilters)
	return string(w.done())
}

// DeserializeContainerDebugInfo decodes ContainerDebugInfo text; unknown keys are ignored.
func DeserializeContainerDebugInfo(s string) (ContainerDebugInfo, error) {
	var d ContainerDebugInfo
	r, err := readObject("ContainerDebugInfo", []byte(s))
	if err != nil {
		return ContainerDebugInfo{}, err
	}
	if err := errors.Join(
		r.str("layout_path", &d.LayoutPath),
		r.strs("layout_filters", &d.LayoutFilters),
	); err != nil {
		return ContainerDebugInfo{}, err
	}
	return d, nil
}
