// Package export exports the trained embedding tables of a parameter-server checkpoint
// (ps/checkpoint) to files other tools read: Monolith EntryDump TFRecords, Avro or Parquet.
// Every format round-trips a table exactly: the same fids, the same float bits, every field.
//
// # Formats
//
// One file per table, named FileName(table, format): the table name with runs of
// characters other than [A-Za-z0-9_.-] replaced by '_', then the format's extension.
//
//	entrydump  <table>.entries  TFRecord of hashtablepb.EntryDump protos, one record per
//	                            entry: Monolith's single-table save format (uncompressed).
//	                            Export copies the checkpoint's records byte for byte, and
//	                            EntryDumpWriter re-marshals, so unknown proto fields survive.
//	avro       <table>.avro     Avro object container file of schemas/avsc.EntryDump
//	                            records; header metadata avro.schema, avro.codec (deflate
//	                            by default, null or snappy), MetaTable and MetaDim.
//	parquet    <table>.parquet  Parquet, one row per entry and one row group per
//	                            WithRowGroupSize (65536 rows or 64 MiB), zstd pages,
//	                            MetaTable and MetaDim in the key-value metadata.
//
// Avro records (schemas/avsc.EntryDump) have these fields:
//
//	table               string   the table name, on every record
//	id                  long     the fid: a uint64 stored bit for bit, so a fid ≥ 2^63
//	                             reads as a negative long
//	embedding           [float]  EntryDump.num
//	last_update_ts_sec  long?    null when the dump does not set it
//	opt                 [OptimizerState]?  EntryDump.opt.dump; null when there is no opt
//	  kind              enum: the SingleOptimizerDump oneof member: none, adagrad, sgd,
//	                    ftrl, dynamic_wd_adagrad, adadelta, adam, amsgrad, momentum,
//	                    rmsprop, rmspropv2, group_ftrl, batch_softmax, group_adagrad
//	  norm zero accum accum_update m v vhat n                       [float]
//	  beta1_power beta2_power grad_square_sum                       float?
//	  last_update_step global_step                                  long?
//	                    the fields of every kind; those the kind lacks are empty or null
//	                    (a reader rejects a file where they are not).
//
// Parquet rows (ParquetSchema) have the same columns with the optimizer state as parallel
// lists, one element per SingleOptimizerDump, instead of a list of structs:
//
//	table string, id uint64 (INT64 annotated UINT_64), embedding list<float>,
//	last_update_ts_sec int64?, opt_kind list<string>?, opt_norm ... opt_n
//	list<list<float>>?, opt_beta1_power opt_beta2_power opt_grad_square_sum
//	list<float?>?, opt_last_update_step opt_global_step list<int64?>?
//
// The opt_ columns of a row are all null (no opt message) or all lists of the length of
// opt_kind. arrow-go reads struct columns on goroutines of its own, where a decoder panic
// on a damaged file could not be recovered; plain lists are read on the caller's.
//
// Floats keep their exact bits (NaN payloads, infinities, -0): the Avro encoder here
// writes math.Float32bits, and the Parquet writer turns dictionary encoding off for float
// columns (Parquet dictionaries fold all NaNs into one). Avro and Parquet cannot hold an
// entry without id or with proto fields unknown to this build; writing one is an error
// wrapping ErrUnsupported.
//
// # Checkpoint resolution
//
// Resolve(DIR) accepts, in this order of precedence:
//
//   - a checkpoint folder (DIR/MANIFEST.json exists): that checkpoint;
//   - a checkpoint root (DIR/LATEST exists): the checkpoint LATEST names;
//   - a multi-shard root (DIR/shard-I-of-N/ folders, ps/server.ShardDir): the newest
//     checkpoint (LATEST) of every shard. All folders must agree on N, shards 0..N-1 must
//     all be there with a checkpoint, and each manifest must say it is shard I of N. The
//     shards may have saved at different steps (Source.Steps tells).
//
// Tables are merged by name over the shards: every shard must hold the same tables with
// the same dims, and a table's entries are shard 0's, then shard 1's, and so on, each in
// file order. Every checkpoint file is checked while it is read (size, CRC-32C, entry count
// against the manifest), so a damaged checkpoint fails the export, whose file is then not
// created.
//
// # Contracts
//
// Export streams: it holds one entry at a time for EntryDump, one block (WithAvroBlockSize,
// 1 MiB) for Avro and one row group for Parquet, and writes each file atomically
// (internal/atomicfile). Verify reads the files back and compares them with the checkpoint
// entry by entry; the first difference is a *MismatchError naming table, file, entry, fid
// and field. Readers return (nil, io.EOF) after the last entry; a damaged file is a
// *CorruptError naming the file, the entry and its offset (Avro block, TFRecord record) or
// row group (Parquet), and readers never panic on bad input (arrow-go decoder panics are
// recovered). Writers and readers are not safe for concurrent use.
package export
