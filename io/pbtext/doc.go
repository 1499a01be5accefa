// Package pbtext reads protobuf messages written as text: the protobuf text format and
// protobuf JSON, as used by Monolith's fixtures (example_batch.pbtxt, inst.pbtext,
// inst.json) for ExampleBatch, Example and Instance messages.
//
// It is a thin layer over google.golang.org/protobuf/encoding/prototext and protojson
// that adds file handling, format selection by file extension and errors that name the
// file and, where the protobuf library reports it, the line and column ([Error]).
//
// # Behaviour
//
//   - Text format: fields may be separated by newlines, blanks, "," or ";" (so the
//     one-line form `fid: 1, fid: 2, line_id { actions: 1 }` reads like inst.pbtext), and
//     a missing trailing newline is fine. Unknown field names are errors.
//   - JSON: both proto field names ("line_id") and JSON names ("lineId") are accepted;
//     64-bit integers may be numbers or strings. Unknown field names are errors.
//   - Unknown fields inside bytes values (for example the LineId fields 11, 20 and 163 of
//     example_batch.pbtxt's __LINE_ID__ cells) are opaque bytes here; decoding them into
//     a message keeps them as unknown fields (decision I3).
//
// Reading replaces the content of the destination message (it is reset first). The
// functions are safe for concurrent use on distinct messages.
package pbtext
