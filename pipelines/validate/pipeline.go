package validate

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/metrics"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/monolith-go/monolith/internal/atomicfile"
	"github.com/monolith-go/monolith/runners"
	"github.com/monolith-go/monolith/schemas/examplepb"
	"github.com/monolith-go/monolith/transforms/beamio"
	"github.com/monolith-go/monolith/transforms/collect"
	_ "github.com/monolith-go/monolith/transforms/element" // the arrow.RecordBatch coder
)

func init() {
	register.DoFn4x1[context.Context, beam.EventTime, arrow.RecordBatch, func(beam.EventTime, []byte), error](&accumulateFn{})
	register.Emitter2[beam.EventTime, []byte]()
	register.Emitter1[[]byte]()
	register.Function2x2(mergeStates)
}

// stateFile is where the pipeline leaves the merged accumulator for the driver, in the
// output directory (or, with a --temp_location, a file of that name with a random suffix
// there); Run reads and removes it.
const stateFile = ".validate.state"

// The rows counter: Run checks that the merged state holds every row the workers read.
const (
	counterNamespace = "monolith.validate"
	counterRows      = "rows"
)

// progressEvery is the interval of the progress line on long inputs.
const progressEvery = 5 * time.Second

// Job is one validation run.
type Job struct {
	Inputs         Inputs                    // --input and the config paths, as reported
	FeatureConfigs *examplepb.FeatureConfigs // the parsed --feature-configs
	Options        Options
	Read           beamio.ReadConfig
	OutDir         string // the three reports go here (see Files)
	// StatePath is where the pipeline writes the merged state (default: stateFile in
	// OutDir); Run sets it. Workers and the driver must both reach it.
	StatePath string
	// Progress receives the final rows/s line; when set, every worker also prints a
	// progress line to its stderr every few seconds on long inputs.
	Progress io.Writer
}

// Pipeline builds the data-check pipeline of j: read every input file (j.Inputs.Files
// when set, else the files of j.Inputs.Pattern, expanded by a worker; files are split
// across workers), add each batch to a per-bundle Accumulator, merge the bundles'
// accumulators (small, per-feature counters: no batch is shuffled) and write the merged
// state to j.StatePath (default: in j.OutDir) for the driver.
func Pipeline(j Job) (*beam.Pipeline, error) {
	acc, err := NewAccumulator(j.FeatureConfigs, j.Options)
	if err != nil {
		return nil, err
	}
	empty, err := acc.MarshalBinary()
	if err != nil {
		return nil, err
	}
	p, s := beam.NewPipelineWithRoot()
	s = s.Scope("validate")
	var recs beam.PCollection
	if len(j.Inputs.Files) > 0 {
		recs = beamio.ReadFiles(s, beam.Reshuffle(s, beam.CreateList(s, j.Inputs.Files)), j.Read)
	} else {
		recs = beamio.Read(s, j.Inputs.Pattern, beamio.WithConfig(j.Read))
	}
	states := beam.ParDo(s, &accumulateFn{Empty: empty, Progress: j.Progress != nil}, recs)
	merged := beam.Combine(s, mergeStates, states)
	state := j.StatePath
	if state == "" {
		state = filepath.Join(j.OutDir, stateFile)
	}
	collect.WriteFile(s, merged, state)
	return p, nil
}

// statePath returns where the run's merged state goes: a fresh file in the runner's
// temp location when there is one, else stateFile in the output directory (both
// absolute, so that workers in other directories find them).
func statePath(outDir string, ro runners.Options) (string, error) {
	if ro.TempLocation == "" {
		return filepath.Join(outDir, stateFile), nil
	}
	if strings.Contains(ro.TempLocation, "://") {
		return "", fmt.Errorf("validate: --temp_location %s: the merged state goes through the local file system, which the workers of --runner=%s do not share", ro.TempLocation, ro.Runner)
	}
	if err := os.MkdirAll(ro.TempLocation, 0o755); err != nil {
		return "", fmt.Errorf("validate: --temp_location: %w", err)
	}
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("validate: %w", err)
	}
	return filepath.Join(ro.TempLocation, stateFile+"-"+hex.EncodeToString(b[:])), nil
}

// absFiles returns files as absolute paths: the workers may run in another directory.
func absFiles(files []string) ([]string, error) {
	abs := make([]string, len(files))
	for i, f := range files {
		a, err := filepath.Abs(f)
		if err != nil {
			return nil, fmt.Errorf("validate: %w", err)
		}
		abs[i] = a
	}
	return abs, nil
}

// Run validates j on the engine ro selects: the static checks here, the data checks as a
// Beam pipeline. It writes the three reports and returns the report; Report.Failed says
// whether the run failed. Errors are for runs that could not validate (unreadable or
// corrupt input, a failed pipeline), not for failed checks.
//
// The driver expands the input and hands the workers absolute file names; the merged
// state comes back through a file in j.OutDir, or in ro.TempLocation when set (which
// lets a driver-local OutDir work with remote workers that share only the temp
// location). Nothing goes through a driver-local temporary directory.
func Run(ctx context.Context, j Job, ro runners.Options) (*Report, error) {
	if err := ro.Validate(); err != nil {
		return nil, fmt.Errorf("validate: %w", err)
	}
	files, err := beamio.Files(ctx, j.Inputs.Pattern)
	if err != nil {
		return nil, fmt.Errorf("validate: --input %s: %w", j.Inputs.Pattern, err)
	}
	j.Inputs.Files = files
	if j.OutDir, err = filepath.Abs(j.OutDir); err != nil {
		return nil, fmt.Errorf("validate: %w", err)
	}
	if err := os.MkdirAll(j.OutDir, 0o755); err != nil {
		return nil, fmt.Errorf("validate: %w", err)
	}
	state, err := statePath(j.OutDir, ro)
	if err != nil {
		return nil, err
	}
	if err := collect.Prepare(state); err != nil {
		return nil, fmt.Errorf("validate: %w", err)
	}
	pj := j
	if pj.Inputs.Files, err = absFiles(files); err != nil {
		return nil, err
	}
	pj.StatePath = state
	p, err := Pipeline(pj)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	res, err := runners.Run(ctx, p, ro)
	if err != nil {
		return nil, fmt.Errorf("validate: %w", err)
	}
	acc := &Accumulator{}
	b, ok, err := collect.ReadFile(state)
	switch {
	case err != nil:
		return nil, fmt.Errorf("validate: %w", err)
	case !ok:
		// No bundle saw a batch: the input holds no rows.
		if acc, err = NewAccumulator(j.FeatureConfigs, j.Options); err != nil {
			return nil, err
		}
	default:
		if err := acc.UnmarshalBinary(b); err != nil {
			return nil, fmt.Errorf("validate: %s: %w", state, err)
		}
	}
	read, ok := rowsRead(res)
	if ok && read != acc.Rows() {
		return nil, fmt.Errorf("validate: the workers read %d rows but the merged result holds %d: the runner lost data", read, acc.Rows())
	}
	if j.Progress != nil {
		el := time.Since(start)
		fmt.Fprintf(j.Progress, "validate: %d rows in %d batches, %s, %.0f rows/s\n", acc.Rows(), acc.Batches(), el.Round(time.Millisecond), float64(acc.Rows())/el.Seconds())
	}
	rep, err := Build(j.Inputs, j.FeatureConfigs, j.Options, acc)
	if err != nil {
		return nil, err
	}
	return rep, WriteReports(rep, j.OutDir)
}

// rowsRead returns the rows counter of a finished run, when the runner reports metrics.
func rowsRead(res beam.PipelineResult) (int64, bool) {
	if res == nil {
		return 0, false
	}
	q := res.Metrics().Query(func(r metrics.SingleResult) bool {
		return r.Namespace() == counterNamespace && r.Name() == counterRows
	})
	cs := q.Counters()
	if len(cs) == 0 {
		return 0, false
	}
	var n int64
	for _, c := range cs {
		n += c.Result()
	}
	return n, true
}

// WriteReports writes the JSON, text and HTML reports of rep into dir (see Files), each
// atomically.
func WriteReports(rep *Report, dir string) error {
	jp, tp, hp := Files(dir)
	for _, f := range []struct {
		path  string
		write func(io.Writer) error
	}{{jp, rep.WriteJSON}, {tp, rep.WriteText}, {hp, rep.WriteHTML}} {
		out, err := atomicfile.Create(f.path)
		if err != nil {
			return fmt.Errorf("validate: %w", err)
		}
		if err := f.write(out); err != nil {
			_ = out.Abort()
			return fmt.Errorf("validate: %s: %w", f.path, err)
		}
		if err := out.Commit(); err != nil {
			return fmt.Errorf("validate: %w", err)
		}
	}
	return nil
}

// accumulateFn adds the batches of a bundle to one Accumulator and emits its state at the
// end of the bundle.
type accumulateFn struct {
	Empty    []byte // MarshalBinary of the run's empty accumulator (it carries the config)
	Progress bool

	acc *Accumulator
	rt  *runtime       // built from Empty for the first bundle and shared by the later ones
	ts  beam.EventTime // of the bundle's last batch; the state is emitted with it

	rowsSeen beam.Counter
	rows     int64
	start    time.Time
	last     time.Time
}

func (f *accumulateFn) Setup() {
	f.start, f.last = time.Now(), time.Now()
	f.rowsSeen = beam.NewCounter(counterNamespace, counterRows)
}

func (f *accumulateFn) StartBundle(context.Context, func(beam.EventTime, []byte)) error {
	acc := &Accumulator{}
	if err := acc.UnmarshalBinary(f.Empty); err != nil {
		return err
	}
	// The runtime (per-feature readers, sharder, layouter) depends on the config only:
	// build it once per DoFn instance, not once per bundle.
	if f.rt == nil {
		if err := acc.ensure(); err != nil {
			return err
		}
		f.rt = acc.rt
	}
	acc.rt = f.rt
	f.acc = acc
	return nil
}

func (f *accumulateFn) ProcessElement(ctx context.Context, ts beam.EventTime, rec arrow.RecordBatch, _ func(beam.EventTime, []byte)) error {
	f.ts = ts
	f.rowsSeen.Inc(ctx, rec.NumRows())
	if err := f.acc.Add(rec); err != nil {
		return err
	}
	f.rows += rec.NumRows()
	if f.Progress && time.Since(f.last) >= progressEvery {
		f.last = time.Now()
		el := f.last.Sub(f.start).Seconds()
		fmt.Fprintf(os.Stderr, "validate: worker %p: %d rows, %.0f rows/s\n", f, f.rows, float64(f.rows)/el)
	}
	return nil
}

func (f *accumulateFn) FinishBundle(_ context.Context, emit func(beam.EventTime, []byte)) error {
	if f.acc == nil || f.acc.Batches() == 0 {
		return nil
	}
	b, err := f.acc.MarshalBinary()
	if err != nil {
		return err
	}
	f.acc = nil
	emit(f.ts, b)
	return nil
}

// mergeStates merges two accumulator states.
func mergeStates(a, b []byte) ([]byte, error) {
	var x, y Accumulator
	if err := x.UnmarshalBinary(a); err != nil {
		return nil, err
	}
	if err := y.UnmarshalBinary(b); err != nil {
		return nil, err
	}
	if err := x.Merge(&y); err != nil {
		return nil, err
	}
	return x.MarshalBinary()
}
