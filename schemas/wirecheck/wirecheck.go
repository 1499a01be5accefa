// Package wirecheck tells, without building a message, whether serialized bytes parse as
// a given protobuf message type with every field known to it: what proto.Unmarshal into
// that type would accept and keep no unknown field for. Readers sniff record types with it.
package wirecheck

import (
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// maxDepth bounds nested messages, as proto.Unmarshal's default recursion limit does.
const maxDepth = 10000

// Known reports whether b parses as a message of md (proto.Unmarshal succeeds) and
// neither it nor any message inside it keeps an unknown field, except messages whose full
// name exempt reports (nil: none), where unknown fields are allowed but must still be
// well formed. As in proto.Unmarshal, a field whose wire type does not fit its declared
// type counts as unknown; unknown fields inside a map entry are dropped, not kept; and
// any enum value is accepted, closed enums included (Go's protobuf keeps undeclared
// values in the field). Groups and required fields, which the message path
// handles but no record type of ours has, make Known answer false.
func Known(b []byte, md protoreflect.MessageDescriptor, exempt func(protoreflect.FullName) bool) bool {
	return known(b, md, exempt, maxDepth)
}

func known(b []byte, md protoreflect.MessageDescriptor, exempt func(protoreflect.FullName) bool, depth int) bool {
	if depth <= 0 {
		return false
	}
	if md.RequiredNumbers().Len() > 0 {
		return false
	}
	loose := md.IsMapEntry() || (exempt != nil && exempt(md.FullName()))
	fields := md.Fields()
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return false
		}
		b = b[n:]
		m := protowire.ConsumeFieldValue(num, typ, b)
		if m < 0 {
			return false
		}
		v := b[:m]
		b = b[m:]
		fd := fields.ByNumber(num)
		if fd == nil {
			if !loose {
				return false
			}
			continue
		}
		if ok, fits := value(v, typ, fd, exempt, depth); !ok || (!fits && !loose) {
			return false
		}
	}
	return true
}

// value checks the field value v (its bytes after the tag, of wire type typ) of fd. ok is
// false when the message path fails on it; fits is false when that path keeps it as an
// unknown field.
func value(v []byte, typ protowire.Type, fd protoreflect.FieldDescriptor, exempt func(protoreflect.FullName) bool, depth int) (ok, fits bool) {
	k := fd.Kind()
	if fd.IsList() && typ == protowire.BytesType && packable(k) {
		p, _ := protowire.ConsumeBytes(v)
		for len(p) > 0 {
			n := scalar(p, wireType(k))
			if n < 0 {
				return false, false
			}
			p = p[n:]
		}
		return true, true
	}
	if typ != wireType(k) {
		return true, false
	}
	switch k {
	case protoreflect.GroupKind:
		return false, false
	case protoreflect.MessageKind:
		p, _ := protowire.ConsumeBytes(v)
		return known(p, fd.Message(), exempt, depth-1), true
	case protoreflect.StringKind:
		p, _ := protowire.ConsumeBytes(v)
		if utf8Enforced(fd) && !utf8.Valid(p) {
			return false, false
		}
		return true, true
	case protoreflect.BytesKind:
		return true, true
	}
	return true, true // a scalar's value: ConsumeFieldValue has checked it
}

// scalar returns the length of one scalar of wire type typ at the start of b (< 0 when
// malformed).
func scalar(b []byte, typ protowire.Type) int {
	switch typ {
	case protowire.VarintType:
		_, n := protowire.ConsumeVarint(b)
		return n
	case protowire.Fixed32Type:
		_, n := protowire.ConsumeFixed32(b)
		return n
	}
	_, n := protowire.ConsumeFixed64(b)
	return n
}

// packable reports whether a repeated field of kind k may come packed.
func packable(k protoreflect.Kind) bool {
	switch k {
	case protoreflect.StringKind, protoreflect.BytesKind, protoreflect.MessageKind, protoreflect.GroupKind:
		return false
	}
	return true
}

// wireType is the wire type of one value of kind k.
func wireType(k protoreflect.Kind) protowire.Type {
	switch k {
	case protoreflect.Fixed32Kind, protoreflect.Sfixed32Kind, protoreflect.FloatKind:
		return protowire.Fixed32Type
	case protoreflect.Fixed64Kind, protoreflect.Sfixed64Kind, protoreflect.DoubleKind:
		return protowire.Fixed64Type
	case protoreflect.StringKind, protoreflect.BytesKind, protoreflect.MessageKind:
		return protowire.BytesType
	case protoreflect.GroupKind:
		return protowire.StartGroupType
	}
	return protowire.VarintType
}

// utf8Enforced reports whether the message path rejects invalid UTF-8 in the string field
// fd: proto3 strings, and strings of editions files that ask for it.
func utf8Enforced(fd protoreflect.FieldDescriptor) bool {
	if e, ok := fd.(interface{ EnforceUTF8() bool }); ok {
		return e.EnforceUTF8()
	}
	return fd.Syntax() == protoreflect.Proto3
}
