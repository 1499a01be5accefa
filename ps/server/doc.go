// Package server is one shard of the monolith-go parameter server: the ParameterServer gRPC
// service of schemas/proto/monolith/ps/ps.proto over the tables of package ps/table, with
// the contract of spec/ps.md §8 and decisions P1, P2 and P10.
//
// # Lifecycle
//
// New builds the tables of Options.Tables, restores the newest checkpoint of the shard's
// folder (CheckpointDir/shard-<I>-of-<N>) and listens; Serve serves gRPC, the standard gRPC
// health service (SERVING per service, NOT_SERVING from the start of shutdown) and, when
// MetricsListen is set, GET /metrics (see Metrics). Serve also writes a
// checkpoint every SaveEvery and runs expiry (Table.Evict) every
// feature_evict_every_n_hours on tables with enable_feature_eviction. When the context of
// Serve ends the server stops gracefully and writes a final checkpoint; Close instead stops
// at once without one. A checkpoint that cannot be restored fails New with its path: the
// server never starts empty over it.
//
// # Requests
//
//   - Lookup is read-only by default (zeros for absent fids, P1); create_if_missing creates
//     admitted fids. Counting is per position (§8.2).
//   - ApplyGradients validates the table, dim_size, the gradient count and the number of
//     learning rates (0 or one per segment) before touching anything; duplicates are summed
//     and each unique fid is stepped once (P2). Failed applies count in the statistics.
//     A request_id already applied answers duplicate (see Request ids).
//   - Batch RPCs validate and run each sub-request independently (concurrently); a failing
//     one answers status_code 1 in its own slot. Each sub-request counts as one lookup or
//     apply in the statistics.
//   - More fids than MaxFidsPerRequest in one request (summed over sub-requests) is
//     codes.ResourceExhausted; gRPC messages are bounded by MaxMessageBytes both ways.
//   - Messages are encoded by package ps/server/codec: the proto wire format, with a buffer
//     pool that does not clear buffers (gRPC's default one clears 1 MiB per large message).
//   - Response status codes: 0 OK, 1 failure with error_message, 2 barrier timeout.
//
// # Request ids
//
// ApplyGradients (and each BatchApplyGradients sub-request) and GlobalStep may carry a
// request_id, an idempotency key chosen by the client, so that a retry whose first attempt
// was applied (its answer lost) is not applied twice. The shard keeps a window of the
// Options.DedupWindow most recent ids per requester (default 16384, one window for both
// RPCs; negative disables it) as a map plus a FIFO ring: the oldest id is forgotten first.
// The requester is the part of the id before its first ':' or '/' (training's run id), at
// most Options.DedupRequesters of them (default 32, least recently used evicted). Each
// checkpoint saves the applied ids and a restore loads them, so a retry of an update the
// restored checkpoint holds is a duplicate, and one it lost is applied.
//
//   - The id is checked and reserved atomically after validation and before the table is
//     touched. A success keeps it; a failure (status_code 1, an error, a panic) releases
//     it, so a retry applies. A request rejected by validation never uses its id.
//   - An id in the window answers duplicate (ApplyGradients: duplicate=true, counts 0;
//     GlobalStep: the step the first attempt returned) without doing anything.
//   - A request whose id is in flight waits for that attempt: its success makes the
//     request a duplicate, its failure lets the request apply.
//   - Duplicates count in GetStats.duplicate_requests and
//     monolith_ps_duplicate_requests_total, and as ApplyGradients requests.
//
// Limits: ids applied after the last checkpoint are forgotten by a restart (their updates
// are lost with them), an id older than its requester's window applies again, and the id alone identifies a request (its contents are not compared). An
// apply that fails half-way through the table (a failing allocation) has stepped some fids
// before its id is released, so its retry steps those twice, as without an id.
//
// # Global step
//
// GlobalStep is Monolith's global_step variable, which lives on PS 0 (clients ask shard
// 0; every shard has its own counter). It adds a non-negative increment atomically and
// returns the new value; increment 0 reads it. The counter is the step a checkpoint
// records: ApplyGradients raises it to the largest global_step it sees, saves write it and
// New restores it, so increments survive a restart up to the last checkpoint.
//
// # Barriers
//
// Barrier follows §8.4: the first request of a barrier id fixes num_workers; each
// generation releases when all workers have arrived, then the barrier is reusable. A
// worker that times out leaves the arrived set (status 2) unless its generation was
// released meanwhile (then OK). Only the current generation is remembered per id, and at
// most 4096 idle ids are kept (least recently used ones are forgotten, which also forgets
// their num_workers).
//
// TrainingBarrier is the training job's pause barrier (package pause; spec/serving-and-
// control.md §2.2): the controller places and removes it, workers join, leave and WAIT
// (held at most a minute per call, released by REMOVE or shutdown). GlobalStep responses
// carry its state, so a worker notices a pause with the step it takes. HealthCheck's
// machine_health_result is Monolith's serialized MachineHealthResult: empty when healthy.
//
// Handlers never panic on input; a panic inside a table is turned into codes.Internal by
// the gRPC interceptor (direct calls of the handler methods do not recover).
//
// # Metrics
//
// The shard's metrics are Prometheus collectors (client_golang) registered on
// Options.Registry with the constant labels shard and num_shards, so that the shards of
// one process share a registry; they leave it when the server stops. Lookups, applies,
// barriers and saves have counters and latency histograms
// (monolith_ps_{lookup,apply,barrier}_latency_seconds, monolith_ps_checkpoint_save_seconds);
// the request limits are gauges (monolith_ps_request_limit{limit}) and their rejections
// counters (monolith_ps_rejected_requests_total{limit}); duplicates, the global step, the
// training barrier and every table's size and memory are reported too, the last ones read at
// scrape time. MetricsListen serves the registry, with the Go and process collectors when
// the server made it.
package server
