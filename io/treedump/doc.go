// Package treedump reads and writes the flattened "tree dump" text form of protobuf
// messages that Monolith's serving tests use for Instances (inst.dump, io.md §6.4).
//
// The format has no indentation: nesting is implied by the schema and the order of lines.
//
// # Format
//
// One "key: value" pair per line. The first line may be `"root":`. A key is a quoted
// field name (proto or JSON name) or a bare list index; the value is a scalar or empty,
// and an empty value opens a container (a message or a repeated field):
//
//	"root":
//	"feature":        ← repeated message field: a list opens
//	0:                ← element 0 opens
//	"fid":            ← repeated scalar field inside feature[0]
//	0: "1"            ← fid[0] (64-bit integers are quoted, as in protobuf JSON)
//	"name": "fc_a"    ← ends the fid list; name belongs to feature[0]
//	1:                ← ends feature[0]; element 1 of the feature list
//	…
//	"label":          ← not a Feature field: back to the root
//	0: 0
//
// Scalars are written as in protobuf JSON: 32-bit integers, floats and booleans bare,
// 64-bit integers, strings, bytes (base64) and enum names quoted. NaN and infinities are
// "NaN", "Infinity" and "-Infinity".
//
// # Decoding
//
// Monolith's InstanceFormater.from_dump rebuilds the nesting with a heuristic over the
// untyped JSON tree. This decoder instead walks the message schema with a stack of open
// messages and lists:
//
//   - A named key belongs to the innermost open message that has a field of that name
//     which has not been given yet in that message (and whose oneof, if any, is still
//     free). Inner messages and lists that cannot take the key are closed. This is the
//     reference's rule for feature[i] elements (a Feature field name not yet present stays
//     in the element, any other key returns to the root), applied at every level.
//   - An index key continues the innermost open list that expects exactly that index next
//     and the right kind of element (an empty value for a list of messages, a scalar for
//     a list of scalars); inner lists and messages are closed on the way.
//   - Surrounding quotes of keys are stripped leniently, so the fixture's `label":` line
//     (missing its opening quote) reads as "label". A string value that is a valid JSON
//     string literal is decoded as one; otherwise surrounding quotes are stripped, as the
//     reference does.
//
// Differences from the reference decoder, all of which only reject or fix inputs it
// would misread: list indices must be consecutive from 0; a field may appear once per
// message (the reference silently overwrote a repeated key); keys unknown to the schema
// are errors naming the line; numeric-looking strings stay strings for string fields
// (the reference turned them into integers and then failed); a quoted empty string ""
// is an empty string rather than a container; blank lines are skipped; "root" is only
// skipped on the first line; map fields are not supported.
//
// # Encoding
//
// [Encode] and [WriteInstance] write fields in alphabetical order of their proto names,
// the order of the fixture. The format cannot express every message unambiguously (for
// example a nameless Feature whose last field is a nested list, followed by another
// element), nor unknown fields, extensions or maps. Encode therefore decodes its own
// output and returns an error wrapping [ErrNotRepresentable] unless the result equals the
// input (proto.Equal), so everything Encode writes reads back identically.
//
// All functions are safe for concurrent use on distinct messages.
package treedump
