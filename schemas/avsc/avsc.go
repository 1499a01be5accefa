// Package avsc holds the Avro schemas of monolith-go's file formats.
// Row (row.avsc) is the record of one schemas/batch.Row in the io/avro files; EntryDump
// (entry_dump.avsc) is one embedding-table entry in the ps/export Avro files.
// The schemas are frozen: changing a field breaks files already written.
package avsc

import _ "embed"

// Row is the Avro record schema (JSON) of one batch.Row, as written by io/avro. Fids are
// uint64 values bit-cast to Avro long (int64), so a fid at or above 2^63 is stored as a
// negative long; data_source_key is a uint32 widened to long; kind is the batch.Kind number.
//
//go:embed row.avsc
var Row string

// EntryDump is the Avro record schema (JSON) of one embedding-table entry, a Monolith
// hash_table.EntryDump plus its table name, as ps/export writes it. The fid (id) is a
// uint64 bit-cast to Avro long (int64), so a fid at or above 2^63 is stored as a negative
// long. Floats keep their exact bits. Optional proto fields are ["null", T] unions, so
// their presence survives; the optimizer state of a segment is an OptimizerState record
// whose kind names the SingleOptimizerDump oneof member and whose other fields are empty.
//
//go:embed entry_dump.avsc
var EntryDump string
