// Package filter is frequency admission for embedding tables (spec/ps.md §5.1–§5.5 with
// decisions P4 and P5): a write may create a fid only after it has been seen more than its
// slot's occurrence threshold. One filter serves one table (P5); New builds it from config.
//
// Thresholds are a dense table over the 32768 v2 slots (§1): default_occurrence_threshold,
// overridden per configured slot (a repeated slot keeps its last value). A threshold of 0
// always admits and is not counted. When no slot has a threshold above 0, New returns the
// none filter whatever the configured type.
//
// # Kinds
//
//   - sliding_hash: Monolith's sliding counting hash filter (§5.3). A ring of
//     S' = max(split_num, 5) open-addressing counting sub-filters of capacity/(S'−1) fids
//     each, 1.2 cells per fid, linear probing over 16 cells. A fid is searched forward in
//     sub-filters head and head+1; a fid new there takes its count from the newest of the
//     min(slides, S'−2) older sub-filters that holds it. When filters[head] is full the
//     ring slides: head advances and the sub-filter after it is cleared, forgetting the
//     oldest counts.
//   - probabilistic: stateless random admission (§5.4), from a SplitMix64 sequence seeded
//     with FilterConfig.seed (reproducible for a given order of calls).
//   - none: admits everything.
//
// # Decisions
//
//   - Counter width (P4). Cells are uint32 = signature<<16 | count with a 16-bit
//     saturating count (Monolith: uint16 cells with a 12-bit signature and a 4-bit count,
//     so thresholds >= 16 never admitted). Thresholds up to 65535 (MaxThreshold) work; a
//     larger one is an ErrInvalidConfig naming the slot, never a silent "never admit".
//   - Batched counts. Admit(fid, c) adds c at once; it admits iff before+c > T, where
//     before is the count before adding: the request is judged like c single occurrences
//     in a row and admitted iff its last one would be. With c = 1 this is Monolith's rule
//     (before >= T: the first T occurrences are rejected, the (T+1)-th admits), and since
//     the PS sums duplicates first (P2) it reproduces the admission steps of Monolith's
//     default per-occurrence path. Monolith's dedup path (before >= T with the summed c)
//     admits up to one request later. A count of 0 counts as 1.
//   - Hash. Probe start and signature come from one fixed 64-bit mixer (SplitMix64 of
//     fid + 0x9e3779b97f4a7c15: the high bits give the start, the low 16 bits the
//     signature). Monolith uses Abseil's implementation-defined hash, so dumps are not
//     compatible with Monolith's in either direction (§11 item 13). The mixer is frozen:
//     changing it invalidates saved dumps.
//   - Probe failure. When neither forward sub-filter has a usable cell, the count before
//     adding is reported as 65535, which admits any threshold, as Monolith does (15 there);
//     the failure is counted (failure_count in dumps).
//   - Storage. A sub-filter has total_size+16 cells (Monolith: +64) so probes never wrap.
//     Capacity 0 means DefaultCapacity (1<<20, where Monolith's training default is 300M),
//     smaller than 300 is raised to 300 and split_num below 5 to 5 (as Monolith); above
//     MaxCapacity or MaxSplitNum, or with fewer than 2 fids per sub-filter, it is an error.
//   - split_num in dumps is the number of sub-filters actually present (S'), not the
//     requested value (§11 item 14).
//   - Concurrency. Admit holds a sync.RWMutex for reading and updates cells with
//     compare-and-swap loops on atomic uint32s (a lost race re-runs the search); a slide,
//     Save and Restore take the write lock. Save copies the cells under the lock and writes
//     after releasing it, so a save briefly needs the filter's memory twice. Counts of
//     concurrent Admits of one fid are exact; which of them is admitted first is not fixed.
//
// # Dumps
//
// Save writes one stream: for each sub-filter in ring order, a HashFilterSplitMetaDump
// (with the SlidingHashFilterMetaDump repeated in each) and then HashFilterSplitDataDumps
// of at most 10000 cells, {offset, data}, covering all cells in offset order (Monolith
// writes one file per sub-filter with the same records). Restore reads the whole stream
// and validates every record (geometry, steps, head, total_size, fill_rate, offsets, cell
// counts, empty-cell encoding, num_elements against the cells) before it replaces the
// state: a rejected dump is a *DumpError naming the record index and field, and leaves the
// filter unchanged. The probabilistic and none filters write nothing; their Restore reads
// the stream to its end and ignores its records, so a checkpoint of a sliding filter
// restores into a table reconfigured to a stateless filter (a corrupt stream is still an
// error).
package filter
