package client

import (
	"context"
	"fmt"
	"time"
)

// TimeoutError is a call or barrier that did not complete in time. It wraps
// context.DeadlineExceeded.
type TimeoutError struct {
	Op    string        // "Lookup", "Barrier", ...
	After time.Duration // the timeout that expired (0 when the caller's context deadline did)
}

func (e *TimeoutError) Error() string {
	if e.After > 0 {
		return fmt.Sprintf("ps/client: %s timed out after %v", e.Op, e.After)
	}
	return fmt.Sprintf("ps/client: %s timed out", e.Op)
}

// Unwrap returns context.DeadlineExceeded.
func (e *TimeoutError) Unwrap() error { return context.DeadlineExceeded }

// InvalidConfigError is a request or client configuration the client or the server
// rejected: an empty shard list, an out-of-range shard or worker, a bad timeout, or a
// barrier answered with status 1 (mismatched num_workers, duplicate arrival).
type InvalidConfigError struct {
	Msg string
}

func (e *InvalidConfigError) Error() string { return "ps/client: invalid config: " + e.Msg }

// RPCError is a failed RPC to one shard; Err is the gRPC status error (status.Code works
// through it).
type RPCError struct {
	Op    string
	Shard int
	Err   error
}

func (e *RPCError) Error() string {
	return fmt.Sprintf("ps/client: %s on shard %d: %v", e.Op, e.Shard, e.Err)
}

// Unwrap returns the cause.
func (e *RPCError) Unwrap() error { return e.Err }

// StatusError is a Lookup or ApplyGradients answered with a non-zero status_code by one
// shard (unknown table, dim_size or gradient count mismatch, a failing table).
type StatusError struct {
	Op    string
	Shard int
	Code  int32
	Msg   string
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("ps/client: %s on shard %d: status %d: %s", e.Op, e.Shard, e.Code, e.Msg)
}
