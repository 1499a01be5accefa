package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime/pprof"

	"github.com/monolith-go/monolith/benchmarks/internal/child"
)

// ChildFunc is the name under which Child is served to child processes (child.Serve).
const ChildFunc = "pipeline"

// Child runs the JSON Job of a child process: the child.Func of this package.
func Child(ctx context.Context, spec json.RawMessage) (any, error) {
	var job Job
	if err := json.Unmarshal(spec, &job); err != nil {
		return nil, fmt.Errorf("benchmarks/pipeline: child job: %w", err)
	}
	if job.CPUProfile != "" {
		f, err := os.Create(job.CPUProfile)
		if err != nil {
			return nil, fmt.Errorf("benchmarks/pipeline: cpu profile: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return nil, fmt.Errorf("benchmarks/pipeline: cpu profile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	return Run(ctx, job)
}

// MaybeChild serves this package's measurements when the process is a benchmark child
// (child.Serve), and reports whether it was.
func MaybeChild(ctx context.Context) (bool, error) {
	return child.Serve(ctx, map[string]child.Func{ChildFunc: Child})
}

// RunChild runs job in a new process of this executable and returns its result with the
// process's peak RSS and CPU time from its rusage. tmp holds the result file.
func RunChild(ctx context.Context, job Job, tmp string) (Result, error) {
	var res Result
	u, err := child.Run(ctx, tmp, ChildFunc, job, &res)
	if err != nil {
		return Result{}, fmt.Errorf("benchmarks/pipeline: %s (%d files): %w", job.Mode, len(job.Files), err)
	}
	res.MaxRSS, res.CPU, res.ProcRun, res.Others = u.MaxRSS, u.CPU, u.Wall, u.Others
	return res, nil
}
