// Package synth generates synthetic Monolith training data: ExampleBatch, Example or
// Instance files of sparse fid features with Zipf-distributed fids, dense features, labels
// and LineIds, in any framing and codec, and the FeatureConfigs that embeds their features.
// It is pure Go and deterministic: the same Config gives byte-identical files.
//
// # Data
//
// A data set has Config.Rows rows split evenly over Config.Files files. Rows come in
// groups of Config.BatchRows consecutive rows (a "request"): one ExampleBatch record per
// group, one Example or Instance record per row. In every row:
//
//   - Config.Features individual sparse features, named "f_<slot>" or "fc_slot_<slot>"
//     (Config.Naming), one slot per feature starting at Config.FirstSlot, each cell holding
//     FidsMin..FidsMax fids (uniform count, drawn independently, so a cell may repeat a
//     fid). ExampleBatch and Example cells are fid_v1_list or fid_v2_list (Config.FidVersion)
//     with the slot as list or feature id; Instances put v1 fids in the top-level fid
//     field (they read back as "fc_slot_<slot>") and v2 fids in named features.
//   - Config.Shared shared sparse features, drawn once per group: SHARED lists in an
//     ExampleBatch, the same cell repeated in every row of the group otherwise.
//   - Optionally one dense float_list feature ("f_dense" / "fc_dense") of Config.Dense
//     uniform [0, 1) values (an Instance named feature with float_value).
//   - Config.Tasks labels, drawn by Config.Labeler (default RandomLabeler, positive with
//     probability Config.PositiveRate): the __LABEL__ list of an ExampleBatch, the label
//     field of an Example or Instance.
//   - A LineId (the __LINE_ID__ list of an ExampleBatch, the line_id field otherwise) with
//     uid and user_id (one user of Config.Users per group; user_id is the uid in decimal),
//     req_time = ReqTimeBase + row index, actions = {t+1 : label t > 0}, chnid (one of
//     Config.Channels per group) and sample_rate.
//
// Each feature's vocabulary has Config.Vocab fids; the rank-k fid (Fid) is drawn with
// probability proportional to k^-Config.Zipf. The Zipf sampler is our own, not
// math/rand/v2's Zipf (which needs an exponent above 1 and draws (v+k)^-s): an exact
// rejection sampler whose hat is one Vose alias table over the first ranks (their own
// weights) and geometric bands of the rest (each band's largest weight), valid for every
// exponent >= 0, O(1) per draw and O(log Vocab) in memory. Fid signatures are a bijection
// of the rank within a slot and do not depend on the seed.
//
// # Planted labels
//
// Planted is a Labeler that draws the labels from a known logistic-regression or
// factorization-machine model over the row's fids (parameters hashed from a seed, nothing
// stored), and PlantedFeatureConfigs is the FeatureConfigs of that model family, so that a
// trained model can be judged against the Bayes-optimal AUC (monolith gen --planted).
//
// # Determinism
//
// Randomness comes from math/rand/v2 PCG streams, three per file (features, labels, LineId
// fields) seeded from Config.Seed and the file index, used through our own bounded-integer
// and float conversions. The streams are consumed in an order that does not depend on the
// message type, framing, codec or parallelism, so the three message types of one Config
// carry the same rows, and a Labeler change does not move the features. Record bytes are
// written directly in protobuf's canonical encoding (what proto.Marshal gives), without
// building messages; tests check them against proto.Marshal.
//
// # Resources
//
// Generation streams records to recordio writers; memory is one group of buffers per file
// in progress, reused from group to group (no allocation per fid or per record), whatever
// the size of the data set. Files are generated Config.Parallel at a time.
package synth
