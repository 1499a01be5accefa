// Package tfevents reads and writes TensorBoard event files (events.out.tfevents.*),
// the files TensorFlow's summary writers produce and TensorBoard reads.
// It writes scalar summaries the way Monolith's BaseRunner.write_summary does, and reads scalars back.
//
// Wire format (frozen; TensorFlow's): an event file is a TFRecord file (io/tfrecord)
// whose every record payload is one serialized tensorflow.Event (schemas/tfcorepb):
//
//	record 0:  | len u64 LE | masked crc32c(len) | Event{wall_time, file_version: "brain.Event:2"} | masked crc32c(payload) |
//	record 1…: | len u64 LE | masked crc32c(len) | Event{wall_time, step, summary: Summary{value: [...]}}   | masked crc32c(payload) |
//
// Event fields: wall_time = 1 (double, seconds since the epoch), step = 2 (int64),
// file_version = 3 (string), summary = 5 (tensorflow.Summary). A Summary holds repeated
// value = 1, each Value with tag = 1 and, for TF1 scalars, simple_value = 2 (float32);
// TF2 scalars are tensor = 8 values holding a rank-0 TensorProto. Nothing precedes the
// first record and nothing follows the last.
//
// EOF contract: Reader.Next returns io.EOF only when the input ends exactly after a
// record; a partial record, a checksum mismatch or a payload that is not an Event is a
// *tfrecord.CorruptError naming the file and the byte offset of the record.
//
// A Writer is safe for concurrent use (a mutex orders its records); a Reader is not.
package tfevents
