// Package child runs one benchmark measurement in a fresh process of the running
// executable, so that each measurement has its own peak RSS (rusage) and no heap left over
// from another, and it describes the machine a run was measured on.
package child

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Env names the environment variable that turns a process into a measurement child. It
// holds the JSON of a spec. An environment variable rather than a flag, so that a test
// binary (whose flags belong to package testing) can be a child too.
const Env = "MONOLITH_BENCH_CHILD"

// spec is what the parent hands a child.
type spec struct {
	Func string          // the key of the function in the child's table
	Job  json.RawMessage // its argument
	Out  string          // the file the child writes the function's JSON result to
}

// reply is what a child writes: its function's result and its own peak RSS.
type reply struct {
	Result  any
	PeakRSS int64 // VmHWM of /proc/self/status, bytes; 0 where unknown
}

// peakRSS is the high-water resident set size of this process since its exec (VmHWM).
// The rusage of a child is no substitute: Linux carries the forking parent's peak into
// the child's ru_maxrss across exec.
func peakRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err == nil {
				return kb * 1024
			}
		}
	}
	return 0
}

// Func is a measurement a child can run: job is the JSON its parent passed to Run; the
// result is marshalled to JSON for the parent.
type Func func(ctx context.Context, job json.RawMessage) (any, error)

// Serve runs the measurement the environment names, when there is one, and reports whether
// it did. funcs maps the names parents pass to Run to their functions. The caller exits
// afterwards, with status 1 if err is not nil.
func Serve(ctx context.Context, funcs map[string]Func) (bool, error) {
	raw, ok := os.LookupEnv(Env)
	if !ok {
		return false, nil
	}
	var s spec
	if err := json.Unmarshal([]byte(raw), &s); err != nil {
		return true, fmt.Errorf("bench child: %s: %w", Env, err)
	}
	fn := funcs[s.Func]
	if fn == nil {
		return true, fmt.Errorf("bench child: unknown measurement %q", s.Func)
	}
	if s.Out == "" {
		return true, fmt.Errorf("bench child %s: no output file", s.Func)
	}
	res, err := fn(ctx, s.Job)
	if err != nil {
		return true, fmt.Errorf("bench child %s: %w", s.Func, err)
	}
	b, err := json.Marshal(reply{Result: res, PeakRSS: peakRSS()})
	if err != nil {
		return true, fmt.Errorf("bench child %s: result: %w", s.Func, err)
	}
	if err := os.WriteFile(s.Out, b, 0o666); err != nil {
		return true, fmt.Errorf("bench child %s: result: %w", s.Func, err)
	}
	return true, nil
}

// Usage is what the parent measured of a child process.
type Usage struct {
	MaxRSS int64         // peak resident set size since exec (the child's VmHWM), bytes
	CPU    time.Duration // user + system time
	Wall   time.Duration // wall time of the whole process
	Others float64       // CPUs used by other processes meanwhile (-1: unknown)
}

// Run runs the function name of the child's table with job in a new process of this
// executable, decodes its result into res (a pointer) and returns the process's usage.
// tmp holds the result file while it exists.
func Run(ctx context.Context, tmp, name string, job, res any) (Usage, error) {
	exe, err := os.Executable()
	if err != nil {
		return Usage{}, fmt.Errorf("bench child %s: %w", name, err)
	}
	f, err := os.CreateTemp(tmp, "result-*.json")
	if err != nil {
		return Usage{}, fmt.Errorf("bench child %s: %w", name, err)
	}
	out := f.Name()
	f.Close()
	defer os.Remove(out)
	j, err := json.Marshal(job)
	if err != nil {
		return Usage{}, fmt.Errorf("bench child %s: job: %w", name, err)
	}
	s, err := json.Marshal(spec{Func: name, Job: j, Out: out})
	if err != nil {
		return Usage{}, fmt.Errorf("bench child %s: %w", name, err)
	}
	cmd := exec.CommandContext(ctx, exe)
	cmd.Env = append(os.Environ(), Env+"="+string(s))
	var logs bytes.Buffer
	var rep struct {
		Result  json.RawMessage
		PeakRSS int64
	}
	cmd.Stdout, cmd.Stderr = &logs, &logs
	busy0, ok0 := MachineBusy()
	start := time.Now()
	err = cmd.Run()
	wall := time.Since(start)
	busy1, ok1 := MachineBusy()
	if err != nil {
		return Usage{}, fmt.Errorf("bench child %s: %w\n%s", name, err, tail(logs.Bytes(), 4096))
	}
	b, err := os.ReadFile(out)
	if err != nil {
		return Usage{}, fmt.Errorf("bench child %s: result: %w", name, err)
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		return Usage{}, fmt.Errorf("bench child %s: result: %w", name, err)
	}
	if err := json.Unmarshal(rep.Result, res); err != nil {
		return Usage{}, fmt.Errorf("bench child %s: result: %w", name, err)
	}
	ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		return Usage{}, fmt.Errorf("bench child %s: no rusage", name)
	}
	if rep.PeakRSS <= 0 {
		return Usage{}, fmt.Errorf("bench child %s: no peak RSS (VmHWM of /proc/self/status)", name)
	}
	u := Usage{MaxRSS: rep.PeakRSS, CPU: time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), Wall: wall, Others: -1}
	if ok0 && ok1 && wall > 0 {
		u.Others = max(0, (busy1-busy0-u.CPU).Seconds()/wall.Seconds())
	}
	return u, nil
}

// MachineBusy returns the CPU time all processes of the machine have used since boot
// (every /proc/stat "cpu" field but idle and iowait), or false where there is no
// /proc/stat.
func MachineBusy() (time.Duration, bool) {
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
		b0, ok := MachineBusy()
		if !ok {
			return -1, nil
		}
		t0 := time.Now()
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(time.Second):
		}
		b1, _ := MachineBusy()
		cores := (b1 - b0).Seconds() / time.Since(t0).Seconds()
		if cores < maxCores || time.Now().After(deadline) {
			return cores, nil
		}
	}
}

// Machine describes the CPU and memory from /proc (Linux), with the Go version and
// GOMAXPROCS.
func Machine() string {
	model, mem := "unknown CPU", "unknown RAM"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "MemTotal:"); ok {
				if kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64); err == nil {
					mem = fmt.Sprintf("%.1f GiB RAM", float64(kb)/(1<<20))
				}
			}
		}
	}
	return fmt.Sprintf("%d CPUs %q, %s, %s %s/%s, GOMAXPROCS %d", runtime.NumCPU(), model, mem,
		runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.GOMAXPROCS(0))
}

// tail returns the last n bytes of b.
func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}
