// Package avsc holds the Avro schemas of monolith-go's file formats.
// Row (row.avsc) is the record of one schemas/batch.Row in the io/avro files.
// The schemas are frozen: changing a field breaks files already written.
package avsc

import _ "embed"

// Row is the Avro record schema (JSON) of one batch.Row, as written by io/avro. Fids are
// uint64 values bit-cast to Avro long (int64), so a fid at or above 2^63 is stored as a
// negative long; data_source_key is a uint32 widened to long; kind is the batch.Kind number.
//
//go:embed row.avsc
var Row string
