package client

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/monolith-go/monolith/ps/pause"
	"github.com/monolith-go/monolith/schemas/pspb"
)

// GlobalStepState is GlobalStep with the whole response: the step and the state of
// shard 0's training barrier when the step was taken.
func (c *Client) GlobalStepState(ctx context.Context, increment int64, requestID string) (*pspb.GlobalStepResponse, error) {
	if increment < 0 {
		return nil, &InvalidConfigError{Msg: fmt.Sprintf("global step increment %d is negative", increment)}
	}
	return onShard(ctx, c, "GlobalStep", 0, func(ctx context.Context, s pspb.ParameterServerClient) (*pspb.GlobalStepResponse, error) {
		return s.GlobalStep(ctx, &pspb.GlobalStepRequest{Increment: increment, RequestId: requestID})
	})
}

// TrainingBarrier is the training barrier of shard 0 (package pause, served by the
// TrainingBarrier RPC): the controller's Place, Remove and Status, and the workers' Join,
// Wait and Leave.
type TrainingBarrier struct{ c *Client }

// TrainingBarrier returns the training barrier of the client's shard 0.
func (c *Client) TrainingBarrier() *TrainingBarrier { return &TrainingBarrier{c: c} }

// do sends one request; a worker index shard 0 does not know (it restarted since the
// worker joined) is an error wrapping pause.ErrNotJoined.
func (b *TrainingBarrier) do(ctx context.Context, req *pspb.TrainingBarrierRequest, timeout time.Duration) (*pspb.TrainingBarrierResponse, error) {
	set, err := b.c.acquire()
	if err != nil {
		return nil, err
	}
	defer set.release()
	if err := b.c.checkShard(set, 0); err != nil {
		return nil, err
	}
	r, err := call(ctx, b.c, set, "TrainingBarrier", 0, timeout, func(ctx context.Context, s pspb.ParameterServerClient) (*pspb.TrainingBarrierResponse, error) {
		return s.TrainingBarrier(ctx, req)
	})
	if status.Code(errors.Unwrap(err)) == codes.FailedPrecondition {
		return nil, fmt.Errorf("ps/client: training barrier: worker index %d: %w (%v)", req.GetIndex(), pause.ErrNotJoined, err)
	}
	return r, err
}

func pauseStatus(r *pspb.TrainingBarrierResponse) pause.Status {
	return pause.Status{Placed: r.GetPlaced(), Action: r.GetAction(), Blocked: r.GetBlockedIndices(), Unblocked: r.GetUnblockedIndices()}
}

// Join joins a worker and returns its index and the barrier's state.
func (b *TrainingBarrier) Join(ctx context.Context) (int, pause.Status, error) {
	r, err := b.do(ctx, &pspb.TrainingBarrierRequest{Op: pspb.TrainingBarrierRequest_JOIN}, b.c.opts.callTimeout)
	if err != nil {
		return 0, pause.Status{}, err
	}
	return int(r.GetIndex()), pauseStatus(r), nil
}

// Leave frees worker index i.
func (b *TrainingBarrier) Leave(ctx context.Context, i int) error {
	if i < 0 || i > math.MaxInt32 {
		return &InvalidConfigError{Msg: fmt.Sprintf("training barrier: worker index %d out of range", i)}
	}
	_, err := b.do(ctx, &pspb.TrainingBarrierRequest{Op: pspb.TrainingBarrierRequest_LEAVE, Index: int32(i)}, b.c.opts.callTimeout)
	return err
}

// Place places the barrier with action; an error wrapping pause.ErrAlreadyPlaced when
// it is placed.
func (b *TrainingBarrier) Place(ctx context.Context, action string) error {
	_, err := b.do(ctx, &pspb.TrainingBarrierRequest{Op: pspb.TrainingBarrierRequest_PLACE, Action: action}, b.c.opts.callTimeout)
	if status.Code(errors.Unwrap(err)) == codes.AlreadyExists {
		return fmt.Errorf("ps/client: training barrier: %w", pause.ErrAlreadyPlaced)
	}
	return err
}

// Remove removes the barrier.
func (b *TrainingBarrier) Remove(ctx context.Context) error {
	_, err := b.do(ctx, &pspb.TrainingBarrierRequest{Op: pspb.TrainingBarrierRequest_REMOVE}, b.c.opts.callTimeout)
	return err
}

// Status returns the barrier's state and the joined workers' block status.
func (b *TrainingBarrier) Status(ctx context.Context) (pause.Status, error) {
	r, err := b.do(ctx, &pspb.TrainingBarrierRequest{Op: pspb.TrainingBarrierRequest_STATUS}, b.c.opts.callTimeout)
	if err != nil {
		return pause.Status{}, err
	}
	return pauseStatus(r), nil
}

// waitHold is how long one WAIT call is held by the server.
const waitHold = 10 * time.Second

// WaitOnce pauses worker i for at most 10 s: it returns placed false once the barrier is
// removed (at once when it is not placed), else placed true and the current action; the
// worker then stays blocked until it waits again or leaves.
func (b *TrainingBarrier) WaitOnce(ctx context.Context, i int) (placed bool, action string, err error) {
	if i < 0 || i > math.MaxInt32 {
		return false, "", &InvalidConfigError{Msg: fmt.Sprintf("training barrier: worker index %d out of range", i)}
	}
	req := &pspb.TrainingBarrierRequest{Op: pspb.TrainingBarrierRequest_WAIT, Index: int32(i), TimeoutMs: waitHold.Milliseconds()}
	r, err := b.do(ctx, req, waitHold+barrierGrace)
	if err != nil {
		return false, "", err
	}
	return r.GetPlaced(), r.GetAction(), nil
}
