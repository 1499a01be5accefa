package train

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	"github.com/monolith-go/monolith/pipelines/train/controller"
	"github.com/monolith-go/monolith/ps/client"
	"github.com/monolith-go/monolith/ps/pause"
	"github.com/monolith-go/monolith/schemas/trainingpb"
)

// ErrPSUnhealthy is wrapped by the error of a run stopped by the PS health check.
var ErrPSUnhealthy = errors.New("PS are not healthy")

// defaultHealthEvery is the period of the PS health checks (Monolith's 30 s).
const defaultHealthEvery = 30 * time.Second

// healthChecker polls every PS shard's HealthCheck (spec §2.3, PsHealthCheckerHook). On
// the first unhealthy answer it logs the report once, places the training barrier with
// controller.ActionStop (every worker stops at its next step boundary) and stops polling;
// failure then returns the report. A shard that cannot be reached is logged and polled
// again: training itself fails on it.
type healthChecker struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	err    error
}

func startHealth(ctx context.Context, ps *client.Client, barrier controller.Barrier, every time.Duration, log *slog.Logger) *healthChecker {
	ctx, cancel := context.WithCancel(ctx)
	h := &healthChecker{cancel: cancel}
	if every == 0 {
		every = defaultHealthEvery
	}
	if every < 0 {
		return h
	}
	h.wg.Go(func() {
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			lines, err := checkPS(ctx, ps)
			if err != nil {
				if ctx.Err() == nil {
					log.Warn("PS health check failed", "err", err)
				}
				continue
			}
			if len(lines) == 0 {
				continue
			}
			log.Error(ErrPSUnhealthy.Error() + ":\n" + strings.Join(lines, "\n"))
			h.mu.Lock()
			h.err = fmt.Errorf("%w: %s", ErrPSUnhealthy, strings.Join(lines, "; "))
			h.mu.Unlock()
			stopWorkers(ctx, barrier, log)
			return
		}
	})
	return h
}

// checkPS asks every shard and returns Monolith's report lines of the unhealthy ones,
// "PS {i}: {one-line text of the MachineHealthResult}" (none when all are healthy).
func checkPS(ctx context.Context, ps *client.Client) ([]string, error) {
	resps, err := ps.HealthCheckAll(ctx, "ps")
	if err != nil {
		return nil, err
	}
	var lines []string
	for i, r := range resps {
		if len(r.GetMachineHealthResult()) == 0 {
			continue
		}
		var m trainingpb.MachineHealthResult
		if err := proto.Unmarshal(r.GetMachineHealthResult(), &m); err != nil {
			return nil, fmt.Errorf("PS %d: machine_health_result: %w", i, err)
		}
		lines = append(lines, fmt.Sprintf("PS %d: %s", i, prototext.MarshalOptions{}.Format(&m)))
	}
	return lines, nil
}

// stopWorkers places the barrier with ActionStop. A barrier an operator placed is
// replaced (Monolith's checker raised there and stopped checking).
func stopWorkers(ctx context.Context, barrier controller.Barrier, log *slog.Logger) {
	err := barrier.Place(ctx, controller.ActionStop)
	if errors.Is(err, pause.ErrAlreadyPlaced) {
		if err = barrier.Remove(ctx); err == nil {
			err = barrier.Place(ctx, controller.ActionStop)
		}
	}
	if err != nil && ctx.Err() == nil {
		log.Error("PS health check: cannot stop the workers", "err", err)
	}
}

// stop ends the polling.
func (h *healthChecker) stop() {
	h.cancel()
	h.wg.Wait()
}

// failure is the report of an unhealthy PS, or nil.
func (h *healthChecker) failure() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.err
}
