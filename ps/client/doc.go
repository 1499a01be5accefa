// Package client is the Go client of the monolith-go parameter server (spec/ps.md §8.7).
//
// A Client holds one lazily dialled gRPC connection per shard and routes fid f to shard
// uint64(f) % N (decision P10). Lookup and ApplyGradients split a request by shard, call the
// involved shards concurrently and reassemble the answers in request order through an
// explicit (shard, local index) map per position (a request whose fids all live on one
// shard is sent and answered as it is); duplicates are sent as they are, so the
// per-position counting of §8.2 and the server-side summation of §8.3 hold across shards.
// Barrier uses shard 0 as its coordinator, BarrierOnShard another one; HealthCheck and
// GetStats ask shard 0, their *Shard variants shard k and their *All variants every shard in
// parallel.
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
// backoff; nothing else is retried. A retried ApplyGradients is not deduplicated by the
// server, so an Unavailable answer after the server applied the update would apply it twice;
// gRPC reports Unavailable only when the connection failed, which in practice is before the
// request reached the handler. ApplyGradients across shards is not atomic: when a shard
// fails, the other shards' updates stand.
//
// A Client is safe for concurrent use: calls hold a reference to the current shard set and
// take no client-wide lock, so SetShards (membership changes) and Close never cut running
// calls short.
package client
