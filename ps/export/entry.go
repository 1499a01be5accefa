package export

import (
	"bytes"
	"fmt"
	"math"
	"strconv"

	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/monolith-go/monolith/schemas/hashtablepb"
)

// optKind is the SingleOptimizerDump oneof member, in the order of the OptimizerKind enum
// of schemas/avsc.EntryDump (field-number order, "none" first). Frozen.
type optKind uint8

const (
	kindNone optKind = iota
	kindAdagrad
	kindSgd
	kindFtrl
	kindDynamicWdAdagrad
	kindAdadelta
	kindAdam
	kindAmsgrad
	kindMomentum
	kindRmsprop
	kindRmspropV2
	kindGroupFtrl
	kindBatchSoftmax
	kindGroupAdagrad
	numKinds
)

var kindNames = [numKinds]string{"none", "adagrad", "sgd", "ftrl", "dynamic_wd_adagrad", "adadelta", "adam",
	"amsgrad", "momentum", "rmsprop", "rmspropv2", "group_ftrl", "batch_softmax", "group_adagrad"}

func (k optKind) String() string {
	if k < numKinds {
		return kindNames[k]
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// kindOf parses a kind name.
func kindOf(s string) (optKind, bool) {
	for k, n := range kindNames {
		if n == s {
			return optKind(k), true
		}
	}
	return 0, false
}

// The fields of an OptimizerState, in schema order after kind: float lists, optional
// floats, optional longs.
const (
	listNorm = iota
	listZero
	listAccum
	listAccumUpdate
	listM
	listV
	listVhat
	listN
	numLists
)

const (
	f32Beta1Power = iota
	f32Beta2Power
	f32GradSquareSum
	numF32
)

const (
	i64LastUpdateStep = iota
	i64GlobalStep
	numI64
)

var (
	listNames = [numLists]string{"norm", "zero", "accum", "accum_update", "m", "v", "vhat", "n"}
	f32Names  = [numF32]string{"beta1_power", "beta2_power", "grad_square_sum"}
	i64Names  = [numI64]string{"last_update_step", "global_step"}
)

// kindFields are the fields each kind uses, as bit masks over the lists, the optional
// floats and the optional longs.
var kindFields = [numKinds]struct{ lists, f32, i64 uint16 }{
	kindAdagrad:          {lists: 1 << listNorm},
	kindFtrl:             {lists: 1<<listZero | 1<<listNorm},
	kindDynamicWdAdagrad: {lists: 1 << listNorm, i64: 1 << i64LastUpdateStep},
	kindAdadelta:         {lists: 1<<listAccum | 1<<listAccumUpdate},
	kindAdam:             {lists: 1<<listM | 1<<listV, f32: 1<<f32Beta1Power | 1<<f32Beta2Power},
	kindAmsgrad:          {lists: 1<<listM | 1<<listV | 1<<listVhat, f32: 1<<f32Beta1Power | 1<<f32Beta2Power},
	kindMomentum:         {lists: 1 << listN},
	kindRmsprop:          {lists: 1 << listN},
	kindRmspropV2:        {lists: 1 << listN},
	kindGroupFtrl:        {lists: 1<<listZero | 1<<listNorm},
	kindBatchSoftmax:     {i64: 1 << i64GlobalStep},
	kindGroupAdagrad:     {f32: 1 << f32GradSquareSum},
}

// optState is a SingleOptimizerDump laid out as the OptimizerState record: the kind, then
// every field any kind has, the unused ones empty. Lists alias the proto's slices.
type optState struct {
	kind  optKind
	lists [numLists][]float32
	f32   [numF32]float32
	hasF  [numF32]bool
	i64   [numI64]int64
	hasI  [numI64]bool
}

func (s *optState) setF(i int, p *float32) {
	if p != nil {
		s.f32[i], s.hasF[i] = *p, true
	}
}

func (s *optState) setI(i int, p *int64) {
	if p != nil {
		s.i64[i], s.hasI[i] = *p, true
	}
}

// flatten lays out a SingleOptimizerDump as an optState.
func flatten(d *hashtablepb.SingleOptimizerDump) optState {
	var s optState
	switch x := d.GetType().(type) {
	case *hashtablepb.SingleOptimizerDump_Adagrad:
		s.kind = kindAdagrad
		s.lists[listNorm] = x.Adagrad.GetNorm()
	case *hashtablepb.SingleOptimizerDump_Sgd:
		s.kind = kindSgd
	case *hashtablepb.SingleOptimizerDump_Ftrl:
		s.kind = kindFtrl
		s.lists[listZero], s.lists[listNorm] = x.Ftrl.GetZero(), x.Ftrl.GetNorm()
	case *hashtablepb.SingleOptimizerDump_DynamicWdAdagrad:
		s.kind = kindDynamicWdAdagrad
		s.lists[listNorm] = x.DynamicWdAdagrad.GetNorm()
		if x.DynamicWdAdagrad != nil {
			s.setI(i64LastUpdateStep, x.DynamicWdAdagrad.LastUpdateStep)
		}
	case *hashtablepb.SingleOptimizerDump_Adadelta:
		s.kind = kindAdadelta
		s.lists[listAccum], s.lists[listAccumUpdate] = x.Adadelta.GetAccum(), x.Adadelta.GetAccumUpdate()
	case *hashtablepb.SingleOptimizerDump_Adam:
		s.kind = kindAdam
		s.lists[listM], s.lists[listV] = x.Adam.GetM(), x.Adam.GetV()
		if x.Adam != nil {
			s.setF(f32Beta1Power, x.Adam.Beta1Power)
			s.setF(f32Beta2Power, x.Adam.Beta2Power)
		}
	case *hashtablepb.SingleOptimizerDump_Amsgrad:
		s.kind = kindAmsgrad
		s.lists[listM], s.lists[listV], s.lists[listVhat] = x.Amsgrad.GetM(), x.Amsgrad.GetV(), x.Amsgrad.GetVhat()
		if x.Amsgrad != nil {
			s.setF(f32Beta1Power, x.Amsgrad.Beta1Power)
			s.setF(f32Beta2Power, x.Amsgrad.Beta2Power)
		}
	case *hashtablepb.SingleOptimizerDump_Momentum:
		s.kind = kindMomentum
		s.lists[listN] = x.Momentum.GetN()
	case *hashtablepb.SingleOptimizerDump_Rmsprop:
		s.kind = kindRmsprop
		s.lists[listN] = x.Rmsprop.GetN()
	case *hashtablepb.SingleOptimizerDump_Rmspropv2:
		s.kind = kindRmspropV2
		s.lists[listN] = x.Rmspropv2.GetN()
	case *hashtablepb.SingleOptimizerDump_GroupFtrl:
		s.kind = kindGroupFtrl
		s.lists[listZero], s.lists[listNorm] = x.GroupFtrl.GetZero(), x.GroupFtrl.GetNorm()
	case *hashtablepb.SingleOptimizerDump_BatchSoftmax:
		s.kind = kindBatchSoftmax
		if x.BatchSoftmax != nil {
			s.setI(i64GlobalStep, x.BatchSoftmax.GlobalStep)
		}
	case *hashtablepb.SingleOptimizerDump_GroupAdagrad:
		s.kind = kindGroupAdagrad
		if x.GroupAdagrad != nil {
			s.setF(f32GradSquareSum, x.GroupAdagrad.GradSquareSum)
		}
	}
	return s
}

// check reports a field set that the kind does not have.
func (s *optState) check() error {
	if s.kind >= numKinds {
		return fmt.Errorf("optimizer kind %d", s.kind)
	}
	m := kindFields[s.kind]
	for i := range numLists {
		if m.lists&(1<<i) == 0 && len(s.lists[i]) > 0 {
			return fmt.Errorf("optimizer kind %s has %d %s values, a field of another kind", s.kind, len(s.lists[i]), listNames[i])
		}
	}
	for i := range numF32 {
		if m.f32&(1<<i) == 0 && s.hasF[i] {
			return fmt.Errorf("optimizer kind %s has %s set, a field of another kind", s.kind, f32Names[i])
		}
	}
	for i := range numI64 {
		if m.i64&(1<<i) == 0 && s.hasI[i] {
			return fmt.Errorf("optimizer kind %s has %s set, a field of another kind", s.kind, i64Names[i])
		}
	}
	return nil
}

func (s *optState) fptr(i int) *float32 {
	if !s.hasF[i] {
		return nil
	}
	v := s.f32[i]
	return &v
}

func (s *optState) iptr(i int) *int64 {
	if !s.hasI[i] {
		return nil
	}
	v := s.i64[i]
	return &v
}

// proto rebuilds the SingleOptimizerDump; fields the kind does not have are an error. The
// result aliases the lists.
func (s *optState) proto() (*hashtablepb.SingleOptimizerDump, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	l := &s.lists
	d := &hashtablepb.SingleOptimizerDump{}
	switch s.kind {
	case kindNone:
	case kindAdagrad:
		d.Type = &hashtablepb.SingleOptimizerDump_Adagrad{Adagrad: &hashtablepb.AdagradOptimizerDump{Norm: l[listNorm]}}
	case kindSgd:
		d.Type = &hashtablepb.SingleOptimizerDump_Sgd{Sgd: &hashtablepb.SgdOptimizerDump{}}
	case kindFtrl:
		d.Type = &hashtablepb.SingleOptimizerDump_Ftrl{Ftrl: &hashtablepb.FtrlOptimizerDump{Zero: l[listZero], Norm: l[listNorm]}}
	case kindDynamicWdAdagrad:
		d.Type = &hashtablepb.SingleOptimizerDump_DynamicWdAdagrad{DynamicWdAdagrad: &hashtablepb.DynamicWdAdagradOptimizerDump{
			Norm: l[listNorm], LastUpdateStep: s.iptr(i64LastUpdateStep)}}
	case kindAdadelta:
		d.Type = &hashtablepb.SingleOptimizerDump_Adadelta{Adadelta: &hashtablepb.AdadeltaOptimizerDump{
			Accum: l[listAccum], AccumUpdate: l[listAccumUpdate]}}
	case kindAdam:
		d.Type = &hashtablepb.SingleOptimizerDump_Adam{Adam: &hashtablepb.AdamOptimizerDump{M: l[listM], V: l[listV],
			Beta1Power: s.fptr(f32Beta1Power), Beta2Power: s.fptr(f32Beta2Power)}}
	case kindAmsgrad:
		d.Type = &hashtablepb.SingleOptimizerDump_Amsgrad{Amsgrad: &hashtablepb.AmsgradOptimizerDump{M: l[listM], V: l[listV],
			Vhat: l[listVhat], Beta1Power: s.fptr(f32Beta1Power), Beta2Power: s.fptr(f32Beta2Power)}}
	case kindMomentum:
		d.Type = &hashtablepb.SingleOptimizerDump_Momentum{Momentum: &hashtablepb.MomentumOptimizerDump{N: l[listN]}}
	case kindRmsprop:
		d.Type = &hashtablepb.SingleOptimizerDump_Rmsprop{Rmsprop: &hashtablepb.RmspropOptimizerDump{N: l[listN]}}
	case kindRmspropV2:
		d.Type = &hashtablepb.SingleOptimizerDump_Rmspropv2{Rmspropv2: &hashtablepb.RmspropV2OptimizerDump{N: l[listN]}}
	case kindGroupFtrl:
		d.Type = &hashtablepb.SingleOptimizerDump_GroupFtrl{GroupFtrl: &hashtablepb.GroupFtrlOptimizerDump{Zero: l[listZero], Norm: l[listNorm]}}
	case kindBatchSoftmax:
		d.Type = &hashtablepb.SingleOptimizerDump_BatchSoftmax{BatchSoftmax: &hashtablepb.BatchSoftmaxOptimizerDump{GlobalStep: s.iptr(i64GlobalStep)}}
	case kindGroupAdagrad:
		d.Type = &hashtablepb.SingleOptimizerDump_GroupAdagrad{GroupAdagrad: &hashtablepb.GroupAdaGradOptimizerDump{GradSquareSum: s.fptr(f32GradSquareSum)}}
	}
	return d, nil
}

// storable checks that the Avro and Parquet layouts can hold d exactly: it has an id and
// no proto fields unknown to this build (they would be dropped).
func storable(d *hashtablepb.EntryDump) error {
	if d.Id == nil {
		return fmt.Errorf("%w: the entry has no id", ErrUnsupported)
	}
	if hasUnknown(d.ProtoReflect()) {
		return fmt.Errorf("%w: fid %d: the entry has proto fields unknown to this build (only the entrydump format keeps them)", ErrUnsupported, uint64(d.GetId()))
	}
	return nil
}

// hasUnknown reports unknown fields in m or any message inside it.
func hasUnknown(m protoreflect.Message) bool {
	if len(m.GetUnknown()) > 0 {
		return true
	}
	found := false
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.Message() == nil || fd.IsMap():
		case fd.IsList():
			for i, l := 0, v.List(); i < l.Len() && !found; i++ {
				found = hasUnknown(l.Get(i).Message())
			}
		default:
			found = hasUnknown(v.Message())
		}
		return !found
	})
	return found
}

// innerUnknown returns the unknown fields of the oneof member of d.
func innerUnknown(d *hashtablepb.SingleOptimizerDump) []byte {
	m := d.ProtoReflect()
	fd := m.WhichOneof(m.Descriptor().Oneofs().ByName("type"))
	if fd == nil {
		return nil
	}
	return m.Get(fd).Message().GetUnknown()
}

// difference is the first field where two entries differ.
type difference struct {
	field, got, want string
}

func fmtFloat(v float32) string {
	return fmt.Sprintf("%v (bits %#08x)", v, math.Float32bits(v))
}

func fmtPresent(ok bool, v string) string {
	if !ok {
		return "none"
	}
	return v
}

// diffFloats compares two float slices bit for bit.
func diffFloats(field string, got, want []float32) (difference, bool) {
	if len(got) != len(want) {
		return difference{field + " length", strconv.Itoa(len(got)), strconv.Itoa(len(want))}, true
	}
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			return difference{fmt.Sprintf("%s[%d]", field, i), fmtFloat(got[i]), fmtFloat(want[i])}, true
		}
	}
	return difference{}, false
}

func diffUnknown(field string, got, want []byte) (difference, bool) {
	if !bytes.Equal(got, want) {
		return difference{field + " unknown fields", fmt.Sprintf("%d bytes %x", len(got), got), fmt.Sprintf("%d bytes %x", len(want), want)}, true
	}
	return difference{}, false
}

// diffEntry returns the first difference between got and want: every field, the presence
// of every optional field, floats by their bits, and unknown fields byte for byte.
func diffEntry(got, want *hashtablepb.EntryDump) (difference, bool) {
	if (got.Id == nil) != (want.Id == nil) || got.GetId() != want.GetId() {
		return difference{"id", fmtPresent(got.Id != nil, strconv.FormatUint(uint64(got.GetId()), 10)),
			fmtPresent(want.Id != nil, strconv.FormatUint(uint64(want.GetId()), 10))}, true
	}
	if d, ok := diffFloats("embedding", got.GetNum(), want.GetNum()); ok {
		return d, true
	}
	if (got.LastUpdateTsSec == nil) != (want.LastUpdateTsSec == nil) || got.GetLastUpdateTsSec() != want.GetLastUpdateTsSec() {
		return difference{"last_update_ts_sec", fmtPresent(got.LastUpdateTsSec != nil, strconv.FormatInt(got.GetLastUpdateTsSec(), 10)),
			fmtPresent(want.LastUpdateTsSec != nil, strconv.FormatInt(want.GetLastUpdateTsSec(), 10))}, true
	}
	if d, ok := diffUnknown("entry", got.ProtoReflect().GetUnknown(), want.ProtoReflect().GetUnknown()); ok {
		return d, true
	}
	if (got.Opt == nil) != (want.Opt == nil) {
		return difference{"opt", fmtPresent(got.Opt != nil, "an opt message"), fmtPresent(want.Opt != nil, "an opt message")}, true
	}
	if got.Opt == nil {
		return difference{}, false
	}
	if d, ok := diffUnknown("opt", got.Opt.ProtoReflect().GetUnknown(), want.Opt.ProtoReflect().GetUnknown()); ok {
		return d, true
	}
	gd, wd := got.Opt.GetDump(), want.Opt.GetDump()
	if len(gd) != len(wd) {
		return difference{"opt length", strconv.Itoa(len(gd)), strconv.Itoa(len(wd))}, true
	}
	for i := range wd {
		g, w := flatten(gd[i]), flatten(wd[i])
		at := fmt.Sprintf("opt[%d]", i)
		if g.kind != w.kind {
			return difference{at + ".kind", g.kind.String(), w.kind.String()}, true
		}
		at += "." + w.kind.String()
		for j := range numLists {
			if d, ok := diffFloats(at+"."+listNames[j], g.lists[j], w.lists[j]); ok {
				return d, true
			}
		}
		for j := range numF32 {
			if g.hasF[j] != w.hasF[j] || math.Float32bits(g.f32[j]) != math.Float32bits(w.f32[j]) {
				return difference{at + "." + f32Names[j], fmtPresent(g.hasF[j], fmtFloat(g.f32[j])), fmtPresent(w.hasF[j], fmtFloat(w.f32[j]))}, true
			}
		}
		for j := range numI64 {
			if g.hasI[j] != w.hasI[j] || g.i64[j] != w.i64[j] {
				return difference{at + "." + i64Names[j], fmtPresent(g.hasI[j], strconv.FormatInt(g.i64[j], 10)),
					fmtPresent(w.hasI[j], strconv.FormatInt(w.i64[j], 10))}, true
			}
		}
		if d, ok := diffUnknown(at, gd[i].ProtoReflect().GetUnknown(), wd[i].ProtoReflect().GetUnknown()); ok {
			return d, true
		}
		if d, ok := diffUnknown(at+" member", innerUnknown(gd[i]), innerUnknown(wd[i])); ok {
			return d, true
		}
	}
	return difference{}, false
}
