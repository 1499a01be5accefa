package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// childEnv names the environment variable that turns a process into a measurement child:
// it holds the JSON of the Job to run. An environment variable rather than a flag, so
// that the test binary (whose flags belong to package testing) can be a child too.
const childEnv = "MONOLITH_PIPELINE_BENCH_JOB"

// MaybeChild runs the job named by the environment, when there is one, and reports
// whether it did. The caller exits afterwards, with status 1 if err is not nil.
func MaybeChild(ctx context.Context) (bool, error) {
	spec, ok := os.LookupEnv(childEnv)
	if !ok {
		return false, nil
	}
	var job Job
	if err := json.Unmarshal([]byte(spec), &job); err != nil {
		return true, fmt.Errorf("benchmarks/pipeline: child job: %w", err)
	}
	if job.Out == "" {
		return true, fmt.Errorf("benchmarks/pipeline: child job has no output file")
	}
	if job.CPUProfile != "" {
		f, err := os.Create(job.CPUProfile)
		if err != nil {
			return true, fmt.Errorf("benchmarks/pipeline: cpu profile: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return true, fmt.Errorf("benchmarks/pipeline: cpu profile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	res, err := Run(ctx, job)
	if err != nil {
		return true, err
	}
	b, err := json.Marshal(res)
	if err != nil {
		return true, fmt.Errorf("benchmarks/pipeline: child result: %w", err)
	}
	if err := os.WriteFile(job.Out, b, 0o666); err != nil {
		return true, fmt.Errorf("benchmarks/pipeline: child result: %w", err)
	}
	return true, nil
}

// RunChild runs job in a new process of this executable and returns its result with the
// process's peak RSS and CPU time from its rusage. tmp holds the result file.
func RunChild(ctx context.Context, job Job, tmp string) (Result, error) {
	exe, err := os.Executable()
	if err != nil {
		return Result{}, fmt.Errorf("benchmarks/pipeline: %w", err)
	}
	f, err := os.CreateTemp(tmp, "result-*.json")
	if err != nil {
		return Result{}, fmt.Errorf("benchmarks/pipeline: %w", err)
	}
	job.Out = f.Name()
	f.Close()
	defer os.Remove(job.Out)
	spec, err := json.Marshal(job)
	if err != nil {
		return Result{}, fmt.Errorf("benchmarks/pipeline: %w", err)
	}
	cmd := exec.CommandContext(ctx, exe)
	cmd.Env = append(os.Environ(), childEnv+"="+string(spec))
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	busy0, statOK := machineBusy()
	start := time.Now()
	err = cmd.Run()
	wall := time.Since(start)
	busy1, statOK1 := machineBusy()
	if err != nil {
		return Result{}, fmt.Errorf("benchmarks/pipeline: %s child (%d files): %w\n%s", job.Mode, len(job.Files), err, tail(logs.Bytes(), 4096))
	}
	b, err := os.ReadFile(job.Out)
	if err != nil {
		return Result{}, fmt.Errorf("benchmarks/pipeline: %s child result: %w", job.Mode, err)
	}
	var res Result
	if err := json.Unmarshal(b, &res); err != nil {
		return Result{}, fmt.Errorf("benchmarks/pipeline: %s child result %s: %w", job.Mode, filepath.Base(job.Out), err)
	}
	ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		return Result{}, fmt.Errorf("benchmarks/pipeline: no rusage for the %s child", job.Mode)
	}
	res.MaxRSS = ru.Maxrss * 1024 // kilobytes on Linux
	res.CPU = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	res.ProcRun = wall
	res.Others = -1
	if statOK && statOK1 && wall > 0 {
		res.Others = max(0, (busy1-busy0-res.CPU).Seconds()/wall.Seconds())
	}
	return res, nil
}

// machineBusy returns the CPU time all processes of the machine have used since boot
// (every /proc/stat "cpu" field but idle and iowait), or false where there is no
// /proc/stat.
func machineBusy() (time.Duration, bool) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, false
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 8 || f[0] != "cpu" {
		return 0, false
	}
	var busy int64
	for i, v := range f[1:] {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, false
		}
		if i != 3 && i != 4 && i < 8 { // idle, iowait; guest time is already in user
			busy += n
		}
	}
	return time.Duration(busy) * time.Second / clockTicks, true
}

// clockTicks is USER_HZ, the unit of /proc/stat: 100 on every Linux architecture Go
// supports.
const clockTicks = 100

// WaitQuiet waits until the other processes of the machine use less than maxCores CPUs
// over a one-second window, or until timeout; it returns the last window's figure (-1
// without /proc/stat).
func WaitQuiet(ctx context.Context, maxCores float64, timeout time.Duration) (float64, error) {
	deadline := time.Now().Add(timeout)
	for {
		b0, ok := machineBusy()
		if !ok {
			return -1, nil
		}
		t0 := time.Now()
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("benchmarks/pipeline: %w", ctx.Err())
		case <-time.After(time.Second):
		}
		b1, _ := machineBusy()
		cores := (b1 - b0).Seconds() / time.Since(t0).Seconds()
		if cores < maxCores || time.Now().After(deadline) {
			return cores, nil
		}
	}
}

// tail returns the last n bytes of b.
func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}
