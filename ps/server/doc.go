// Package server is one shard of the monolith-go parameter server: the ParameterServer gRPC
// service of schemas/proto/monolith/ps/ps.proto over the tables of package ps/table, with
// the contract of spec/ps.md §8 and decisions P1, P2 and P10.
//
// # Lifecycle
//
// New builds the tables of Options.Tables, restores the newest checkpoint of the shard's
// folder (CheckpointDir/shard-<I>-of-<N>) and listens; Serve serves gRPC, the standard gRPC
// health service (SERVING per service, NOT_SERVING from the start of shutdown) and, when
// MetricsListen is set, GET /metrics in the Prometheus text format. Serve also writes a
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
//   - Batch RPCs validate and run each sub-request independently (concurrently); a failing
//     one answers status_code 1 in its own slot. Each sub-request counts as one lookup or
//     apply in the statistics.
//   - More fids than MaxFidsPerRequest in one request (summed over sub-requests) is
//     codes.ResourceExhausted; gRPC messages are bounded by MaxMessageBytes both ways.
//   - Messages are encoded by package ps/server/codec: the proto wire format, with a buffer
//     pool that does not clear buffers (gRPC's default one clears 1 MiB per large message).
//   - Response status codes: 0 OK, 1 failure with error_message, 2 barrier timeout.
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
// Handlers never panic on input; a panic inside a table is turned into codes.Internal by
// the gRPC interceptor (direct calls of the handler methods do not recover).
package server
