package train

import (
	"fmt"
	"slices"
	"time"

	"github.com/monolith-go/monolith/kernels/featcfg"
	"github.com/monolith-go/monolith/ps/client"
	"github.com/monolith-go/monolith/transforms/beamio"
	"github.com/monolith-go/monolith/transforms/config"
	tmodel "github.com/monolith-go/monolith/transforms/model"
)

// Job is what every worker needs to train: plain values only, so that Beam serializes it
// with the DoFns.
type Job struct {
	Kernels  config.Kernels    // FeatureConfigs, PS shard count, version 5, unique
	Model    string            // a registered model (transforms/model): lr, fm, deepfm, …
	Bias     string            // bias layout
	Vec      string            // field-vector layout
	Hidden   []int             // DeepFM hidden widths
	MaxSteps int64             // 0: no limit
	PS       []string          // PS shard addresses, shard order
	RunID    string            // prefix of every request id
	Read     beamio.ReadConfig // how files are read (RowsPerBatch = batch size)
	Ops      []OpSpec          // the filters and label ops of the config, in order
	// Parallelism is the goroutines each step runs on per bundle (0: GOMAXPROCS); the
	// plain loop's goroutines.
	Parallelism int
	// ConnectRetries and RetryBackoff are the PS clients' retry policy (connect_retries,
	// retry_backoff_ms; zero: the client's defaults).
	ConnectRetries int
	RetryBackoff   time.Duration
	// CallTimeout is the PS clients' per-call deadline (max_rpc_deadline_millis; zero:
	// the client's default).
	CallTimeout time.Duration
	// SaveTimeout bounds each shard's save (checkpoint.save_timeout_secs; zero: the
	// client's default).
	SaveTimeout time.Duration
	// UnavailableWait is how long a PS call retries a shard that does not answer
	// (ps.unavailable_wait_secs; zero: only the retries).
	UnavailableWait time.Duration
}

// ModelSpec is the job's model as transforms/model takes it.
func (j *Job) ModelSpec() tmodel.Spec {
	return tmodel.Spec{Name: j.Model, Bias: j.Bias, Vec: j.Vec, Hidden: j.Hidden}
}

// clientOptions are the job's PS client options.
func (j *Job) clientOptions() []client.Option {
	var o []client.Option
	if j.ConnectRetries > 0 {
		o = append(o, client.WithRetries(j.ConnectRetries))
	}
	if j.SaveTimeout > 0 {
		o = append(o, client.WithSaveTimeout(j.SaveTimeout))
	}
	if j.UnavailableWait > 0 {
		o = append(o, client.WithUnavailableWait(j.UnavailableWait))
	}
	if j.CallTimeout > 0 {
		o = append(o, client.WithCallTimeout(j.CallTimeout))
	}
	if j.RetryBackoff > 0 {
		o = append(o, client.WithBackoff(j.RetryBackoff, max(j.RetryBackoff, client.DefaultMaxBackoff)))
	}
	return o
}

// Stats are training counters; they merge by addition.
type Stats struct {
	Examples int64   `json:"examples"`
	Steps    int64   `json:"steps"`
	Skipped  int64   `json:"skipped"`  // batches computed after max_steps or a stop, not applied
	LossSum  float64 `json:"loss_sum"` // summed log loss of the applied batches, before their update
}

// Add adds o to s.
func (s *Stats) Add(o Stats) {
	s.Examples += o.Examples
	s.Steps += o.Steps
	s.Skipped += o.Skipped
	s.LossSum += o.LossSum
}

// sparseTable is one embedding table of the FeatureConfigs as the PS serves it.
type sparseTable struct {
	name string
	dim  int
}

// sparseTables lists the FeatureConfigs' tables with their PS width: every feature of a
// table must have the same slice dims (the table's segments).
func sparseTables(cfg *featcfg.Config) ([]sparseTable, error) {
	out := make([]sparseTable, len(cfg.Tables))
	for i, tb := range cfg.Tables {
		if len(tb.Features) == 0 {
			return nil, fmt.Errorf("%w: table %q has no features", ErrConfig, tb.Name)
		}
		first := cfg.Features[tb.Features[0]]
		for _, f := range tb.Features[1:] {
			if !slices.Equal(cfg.Features[f].SliceDims, first.SliceDims) {
				return nil, fmt.Errorf("%w: table %q: features %q and %q have slice dims %v and %v; a PS table has one segment layout",
					ErrConfig, tb.Name, first.Name, cfg.Features[f].Name, first.SliceDims, cfg.Features[f].SliceDims)
			}
		}
		out[i] = sparseTable{name: tb.Name, dim: first.Dim}
	}
	return out, nil
}

// leaveTimeout bounds a worker's goodbye to the barrier.
const leaveTimeout = 5 * time.Second
