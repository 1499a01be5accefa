// Package client is the Go client of the monolith-go parameter server (spec/ps.md §8.7).
//
// A Client holds one lazily dialled gRPC connection per shard and routes fid f to shard
// uint64(f) % N (decision P10). Lookup and Apply (ApplyGradients) split a request by
// shard, call the involved shards concurrently and reassemble the answers in request order
// through an explicit (shard, local index) map per position (a request whose fids all live
// on one shard is sent and answered as it is); duplicates are sent as they are, so the
// per-position counting of §8.2 and the server-side summation of §8.3 hold across shards.
// LookupTables and ApplyTables do the same for several tables in one round: each involved
// shard gets one RPC with its part of every table (BatchLookup, BatchApplyGradients; the
// plain RPC when it holds one part; several past the server's 1024 sub-requests per
// batch), which is how training sends a batch's lookups and applies.
// Barrier uses shard 0 as its coordinator, BarrierOnShard another one; GlobalStep, the
// global step counter (Monolith's global_step variable on PS 0), always asks shard 0;
// HealthCheck and GetStats ask shard 0, their *Shard variants shard k and their *All
// variants every shard in parallel.
//
// # Request ids
//
// Apply (ApplyRequest.RequestID) and GlobalStep take an optional request id, an
// idempotency key: each shard remembers its recently applied ids (ps/server's
// Options.DedupWindow) and answers a repeated one as a duplicate without applying it
// again. Apply sends the same id to every shard its fids live on; each shard deduplicates
// on its own, and ApplyResult.Duplicates counts the shards that answered duplicate. A
// repeated GlobalStep returns the step its first attempt returned. Use one id per logical
// update (for example worker, table and step) and reuse it only for retries of that
// update: a shard does not compare the contents of requests with the same id.
//
// # Errors
//
//   - *InvalidConfigError: a request rejected before sending (dim, gradient count, barrier
//     timeout, worker or shard range), a barrier answered with status 1, or a closed client.
//   - *TimeoutError: a barrier that timed out on the server (status 2), or, wrapped in an
//     *RPCError, an RPC past its deadline; use errors.As.
//   - *StatusError: a shard answering Lookup or ApplyGradients with a non-zero status.
//   - *RPCError: any other RPC failure, wrapping the gRPC status error.
//
// Calls failing with codes.Unavailable are retried (3 times by default) with exponential
// backoff; nothing else is retried. A retry sends the same request, request id included,
// so with a request id an Unavailable answer after the server applied the update (a lost
// response) is answered duplicate instead of being applied twice. Without one (and with
// ApplyGradients, which sends none) such a retry applies the update again. Apply across
// shards is not atomic: when a shard fails, the other shards' updates stand, and
// repeating the call with the same request id applies it only where it was not.
//
// A Client is safe for concurrent use: calls hold a reference to the current shard set and
// take no client-wide lock, so SetShards (membership changes) and Close never cut running
// calls short.
package client
