package train

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/monolith-go/monolith/internal/zktest"
	"github.com/monolith-go/monolith/ps/discovery"
)

// TestTwoWorkers runs two workers of one job side by side against shared shards (static
// discovery): each trains its half of the files, the chief waits for the other, then
// saves and evaluates; the other reports its own counts and no evaluation.
func TestTwoWorkers(t *testing.T) {
	dir := t.TempDir()
	base := plantedData(t, dir, 4000) // two training files
	base.Epochs = 1
	pr, err := Prepare(base)
	if err != nil {
		t.Fatal(err)
	}
	ps, err := StartLocalPS(context.Background(), 2, pr.Tables, LocalPSOptions{Seed: 1, CheckpointDir: dir + "/model", Keep: 3})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ps.Stop() })
	sums := make([]*Summary, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range 2 {
		c := *base
		c.PS.Addrs, c.PS.Shards = ps.Addrs(), 2
		c.Runner.Index, c.Runner.NumWorkers = i, 2
		if i == 0 {
			c.Checkpoint.Dir = dir + "/model"
		}
		if err := c.Normalize(); err != nil {
			t.Fatal(err)
		}
		if c.Discovery() != "static" {
			t.Fatalf("discovery %q, want static", c.Discovery())
		}
		wg.Go(func() {
			if i == 1 {
				time.Sleep(300 * time.Millisecond) // the chief must wait for a late worker
			}
			sums[i], errs[i] = Run(context.Background(), &c, Options{})
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	chief, other := sums[0], sums[1]
	if chief.Worker != 0 || other.Worker != 1 || chief.NumWorkers != 2 {
		t.Errorf("workers %d, %d of %d", chief.Worker, other.Worker, chief.NumWorkers)
	}
	if chief.Examples != 2000 || other.Examples != 2000 {
		t.Errorf("examples %d and %d, want 2000 each (one file each)", chief.Examples, other.Examples)
	}
	if chief.GlobalStep != chief.Steps+other.Steps {
		t.Errorf("chief's global step %d, want every worker's steps %d + %d", chief.GlobalStep, chief.Steps, other.Steps)
	}
	if chief.EvalAUC == nil || *chief.EvalAUC < 0.6 || chief.Checkpoint == "" || chief.EventFile == "" {
		t.Errorf("chief summary %+v: want an evaluation, a checkpoint and an event file", chief)
	}
	if other.EvalAUC != nil || other.Checkpoint != "" || other.EventFile != "" {
		t.Errorf("worker 1 summary %+v: evaluation, checkpoint and summaries are the chief's", other)
	}
}

// TestWorkerErrors: bad worker settings fail at start, naming what is wrong.
func TestWorkerErrors(t *testing.T) {
	dir := t.TempDir()
	base := plantedData(t, dir, 500)
	for _, tc := range []struct {
		name string
		edit func(c *Config)
		want string
	}{
		{"index out of range", func(c *Config) { c.PS.Addrs, c.Runner.Index, c.Runner.NumWorkers = []string{"127.0.0.1:1"}, 2, 2 }, "runner.index 2 outside [0, 2)"},
		{"workers without shared PS", func(c *Config) { c.Runner.NumWorkers = 2 }, "runner.num_workers 2 needs PS shards"},
		{"unreachable zk", func(c *Config) {
			c.Runner.DiscoveryType, c.Runner.ZKServer = "zk", "127.0.0.1:1"
			c.MarkRunnerSet("discovery_type")
		}, "discovery zk"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := *base
			tc.edit(&c)
			err := c.Normalize()
			if err == nil {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				_, err = Run(ctx, &c, Options{DiscoveryWait: 2 * time.Second})
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one with %q", err, tc.want)
			}
		})
	}
	c := *base
	c.Runner.NumWorkers = 3
	c.PS.Addrs = []string{"127.0.0.1:1"}
	if err := c.Normalize(); err != nil {
		t.Fatal(err)
	}
	if _, err := workerFiles([]string{"a", "b"}, 0, 3); err == nil || !strings.Contains(err.Error(), "2 files for 3 workers") {
		t.Errorf("workerFiles: %v", err)
	}
	if got, _ := workerFiles([]string{"a", "b", "c", "d", "e"}, 1, 2); strings.Join(got, ",") != "b,d" {
		t.Errorf("worker 1 of 2 reads %v, want b,d", got)
	}
	for _, tc := range []struct{ max, steps, start, want int64 }{
		{0, 0, 50, 0}, {100, 0, 50, 100}, {0, 10, 50, 60}, {55, 10, 50, 55}, {100, 10, 50, 60},
	} {
		if got := stepLimit(tc.max, tc.steps, tc.start); got != tc.want {
			t.Errorf("stepLimit(max_steps %d, steps %d, start %d) = %d, want %d", tc.max, tc.steps, tc.start, got, tc.want)
		}
	}
}

// TestFollowsMembership: a worker that found its shards through ZooKeeper follows a change
// of membership while it trains: ps.1 re-registered at another server gets the rest of the
// updates of shard 1.
func TestFollowsMembership(t *testing.T) {
	zk := zktest.Start(t)
	dir := t.TempDir()
	c := plantedData(t, dir, 4000)
	c.Epochs, c.EvalInput, c.PS.Shards = 12, "", 2
	_, first := localPS(t, c, 2)
	_, second := localPS(t, c, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	reg, err := discovery.NewZK(ctx, "follow", zk.Addr(), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	for i, addr := range first.Addrs() {
		if err := reg.Register(ctx, "ps", i, addr); err != nil {
			t.Fatal(err)
		}
	}
	c.Runner.DiscoveryType, c.Runner.ZKServer, c.Runner.DeepInsightName = "zk", zk.Addr(), "follow"
	c.MarkRunnerSet("discovery_type")
	if err := c.Normalize(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	var sum *Summary
	go func() {
		var err error
		sum, err = Run(ctx, c, Options{FollowEvery: 20 * time.Millisecond})
		done <- err
	}()
	// Once shard 1 of the first set has entries, move ps.1 to the second set.
	deadline := time.Now().Add(time.Minute)
	for first.Servers[1].Tables()[0].Size() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("shard 1 got no updates")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := reg.Register(ctx, "ps", 1, second.Addrs()[1]); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := second.Servers[1].Tables()[0].Size(); n == 0 {
		t.Errorf("the worker never reached the re-registered shard 1 (%d epochs, %d steps)", sum.Epochs, sum.Steps)
	}
	if n := second.Servers[0].Tables()[0].Size(); n != 0 {
		t.Errorf("the second set's shard 0, never registered, holds %d entries", n)
	}
}
