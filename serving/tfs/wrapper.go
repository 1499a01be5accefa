package tfs

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// EnvBinary is the environment variable naming the TF Serving binary (§0).
const EnvBinary = "MONOLITH_TFS_BINARY"

// ErrNoBinary is NewWrapperFromEnv's error when MONOLITH_TFS_BINARY is unset (S11).
var ErrNoBinary = errors.New("TF Serving binary not available: set MONOLITH_TFS_BINARY")

// DefaultStopTimeout is how long Stop waits after SIGTERM before it kills the child.
const DefaultStopTimeout = 10 * time.Second

// WrapperOptions configure a Wrapper.
type WrapperOptions struct {
	// Binary is the program to run (required).
	Binary string
	// Args are its arguments (the TF Serving flags the agent computes).
	Args []string
	// Dir is the working directory ("" = the current one); the agent's relative paths
	// (conf/...) are relative to it.
	Dir string
	// Env is the child's environment (nil: inherited).
	Env []string
	// LogFile receives the child's stdout and stderr, truncated at Start (the reference's
	// TFSWrapper) or appended to with AppendLog (its v1 agent's ServingLog). When empty,
	// each line goes to Logger at level Info with attribute "tfs".
	LogFile   string
	AppendLog bool
	// StopTimeout is the time between SIGTERM and SIGKILL (default 10 s).
	StopTimeout time.Duration
	// Logger receives lifecycle logs and, without LogFile, the child's output (default
	// slog.Default()).
	Logger *slog.Logger
}

// Wrapper runs one TF Serving process (TFSWrapper of §1.12). Start it once; its methods
// are safe for concurrent use.
type Wrapper struct {
	opts    WrapperOptions
	log     *slog.Logger
	fromEnv bool // the binary came from MONOLITH_TFS_BINARY

	mu      sync.Mutex
	cmd     *exec.Cmd
	logFile *os.File
	done    chan struct{} // closed when the child has exited
	waitErr error         // set before done is closed
}

// NewWrapper checks opts and returns an unstarted Wrapper.
func NewWrapper(opts WrapperOptions) (*Wrapper, error) {
	if opts.Binary == "" {
		return nil, fmt.Errorf("%w: wrapper: no binary", ErrInvalidOptions)
	}
	if opts.StopTimeout < 0 {
		return nil, fmt.Errorf("%w: wrapper: stop timeout %v is negative", ErrInvalidOptions, opts.StopTimeout)
	}
	if opts.StopTimeout == 0 {
		opts.StopTimeout = DefaultStopTimeout
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Wrapper{opts: opts, log: opts.Logger, done: make(chan struct{})}, nil
}

// NewWrapperFromEnv is NewWrapper with the binary taken from MONOLITH_TFS_BINARY through
// getenv (os.LookupEnv in production). The value is split on whitespace, as the
// reference splits its command line: the first field is the binary and the others come
// before args. Unset or blank, it returns ErrNoBinary. opts.Binary is ignored.
func NewWrapperFromEnv(getenv func(string) (string, bool), args []string, opts WrapperOptions) (*Wrapper, error) {
	bin, lead, err := BinaryFromEnv(getenv)
	if err != nil {
		return nil, err
	}
	opts.Binary = bin
	opts.Args = append(lead, args...)
	w, err := NewWrapper(opts)
	if err != nil {
		return nil, err
	}
	w.fromEnv = true
	return w, nil
}

// BinaryFromEnv splits MONOLITH_TFS_BINARY (read through getenv) into the binary and the
// arguments that come before TF Serving's flags ("/bin/monolith fake-tfserving"). Unset or
// blank, it returns ErrNoBinary.
func BinaryFromEnv(getenv func(string) (string, bool)) (binary string, leading []string, err error) {
	v, ok := getenv(EnvBinary)
	fields := strings.Fields(v)
	if !ok || len(fields) == 0 {
		return "", nil, ErrNoBinary
	}
	return fields[0], fields[1:len(fields):len(fields)], nil
}

// Command is the command line the Wrapper runs, binary first.
func (w *Wrapper) Command() []string {
	return append([]string{w.opts.Binary}, w.opts.Args...)
}

// Start starts the child. The end of ctx stops it as Stop does (SIGTERM, then SIGKILL
// after StopTimeout). Start may be called once.
func (w *Wrapper) Start(ctx context.Context) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cmd != nil {
		return errors.New("serving/tfs: wrapper: Start called twice")
	}
	cmd := exec.CommandContext(ctx, w.opts.Binary, w.opts.Args...)
	cmd.Dir, cmd.Env = w.opts.Dir, w.opts.Env
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = w.opts.StopTimeout
	var out io.Writer
	if w.opts.LogFile != "" {
		flags := os.O_WRONLY | os.O_CREATE | os.O_TRUNC
		if w.opts.AppendLog {
			flags = os.O_WRONLY | os.O_CREATE | os.O_APPEND
		}
		f, err := os.OpenFile(w.opts.LogFile, flags, 0o644)
		if err != nil {
			return fmt.Errorf("serving/tfs: wrapper: open TF Serving log: %w", err)
		}
		w.logFile, out = f, f
	} else {
		out = &lineLogger{log: w.log}
	}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		if w.logFile != nil {
			w.logFile.Close()
		}
		from := ""
		if w.fromEnv {
			from = " (from " + EnvBinary + ")" // S11: a missing binary names the variable
		}
		return fmt.Errorf("serving/tfs: start TF Serving %q%s: %w", w.opts.Binary, from, err)
	}
	w.cmd = cmd
	w.log.Info("TF Serving started", "pid", cmd.Process.Pid, "cmd", strings.Join(w.Command(), " "), "dir", w.opts.Dir)
	go w.reap(out)
	return nil
}

// reap waits for the child and records how it ended.
func (w *Wrapper) reap(out io.Writer) {
	err := w.cmd.Wait()
	if ll, ok := out.(*lineLogger); ok {
		ll.flush()
	}
	if w.logFile != nil {
		if cerr := w.logFile.Close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("close TF Serving log: %w", cerr))
		}
	}
	if err != nil {
		err = fmt.Errorf("serving/tfs: TF Serving %q (pid %d): %w", w.opts.Binary, w.cmd.Process.Pid, err)
	}
	w.waitErr = err
	w.log.Info("TF Serving exited", "pid", w.cmd.Process.Pid, "state", w.cmd.ProcessState.String())
	close(w.done)
}

// Pid is the child's process id (0 before Start).
func (w *Wrapper) Pid() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cmd == nil {
		return 0
	}
	return w.cmd.Process.Pid
}

// Done is closed when the child has exited.
func (w *Wrapper) Done() <-chan struct{} { return w.done }

// Poll is the reference's poll(): the exit code and true once the child has exited (-1
// when a signal ended it), or false while it runs or before Start.
func (w *Wrapper) Poll() (int, bool) {
	select {
	case <-w.done:
		return w.cmd.ProcessState.ExitCode(), true
	default:
		return 0, false
	}
}

// Wait waits for the child to exit and returns how it ended (nil for exit code 0), or
// the error of ctx if ctx ends first (the child keeps running).
func (w *Wrapper) Wait(ctx context.Context) error {
	if w.Pid() == 0 {
		return errors.New("serving/tfs: wrapper: Wait before Start")
	}
	select {
	case <-w.done:
		return w.waitErr
	case <-ctx.Done():
		return fmt.Errorf("serving/tfs: wait for TF Serving: %w", ctx.Err())
	}
}

// Stop sends SIGTERM to the child, waits for it to exit for at most StopTimeout (or
// until ctx ends) and then kills it. It returns nil once the child is gone, whatever its
// exit status (Wait reports that), and is idempotent. Stop before Start does nothing.
func (w *Wrapper) Stop(ctx context.Context) error {
	w.mu.Lock()
	cmd := w.cmd
	w.mu.Unlock()
	if cmd == nil {
		return nil
	}
	select {
	case <-w.done:
		return nil
	default:
	}
	w.log.Info("stopping TF Serving", "pid", cmd.Process.Pid)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("serving/tfs: signal TF Serving (pid %d): %w", cmd.Process.Pid, err)
	}
	t := time.NewTimer(w.opts.StopTimeout)
	defer t.Stop()
	select {
	case <-w.done:
		return nil
	case <-t.C:
	case <-ctx.Done():
	}
	w.log.Warn("TF Serving did not stop after SIGTERM; killing it", "pid", cmd.Process.Pid)
	if err := cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("serving/tfs: kill TF Serving (pid %d): %w", cmd.Process.Pid, err)
	}
	<-w.done
	return nil
}

// maxLogLine bounds a line of the child's output held while waiting for its newline; a
// longer one is logged in pieces of this size.
const maxLogLine = 64 << 10

// lineLogger logs each complete line written to it.
type lineLogger struct {
	log *slog.Logger
	mu  sync.Mutex
	buf []byte
}

func (l *lineLogger) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			if len(l.buf) < maxLogLine {
				break
			}
			l.log.Info("TF Serving", "tfs", string(l.buf[:maxLogLine]))
			l.buf = l.buf[maxLogLine:]
			continue
		}
		l.log.Info("TF Serving", "tfs", string(l.buf[:i]))
		l.buf = l.buf[i+1:]
	}
	if len(l.buf) == 0 {
		l.buf = l.buf[:0:0] // let the consumed backing array go
	}
	return len(p), nil
}

// flush logs a last line without a newline.
func (l *lineLogger) flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.buf) > 0 {
		l.log.Info("TF Serving", "tfs", string(l.buf))
		l.buf = nil
	}
}

// ScanGRPCRemoteOp reports whether the binary contains the bytes "PredictionServiceGrpc",
// the §1.8 test for a TF Serving able to run gRPC remote ops (it decides whether the
// agent advertises gRPC or archon addresses).
func ScanGRPCRemoteOp(binary string) (bool, error) {
	f, err := os.Open(binary)
	if err != nil {
		return false, fmt.Errorf("serving/tfs: scan TF Serving binary: %w", err)
	}
	defer f.Close()
	const needle = "PredictionServiceGrpc"
	r := bufio.NewReaderSize(f, 1<<20)
	buf := make([]byte, 0, 1<<20+len(needle))
	chunk := make([]byte, 1<<20)
	for {
		n, err := r.Read(chunk)
		buf = append(buf, chunk[:n]...)
		if bytes.Contains(buf, []byte(needle)) {
			return true, nil
		}
		if len(buf) >= len(needle) {
			buf = append(buf[:0], buf[len(buf)-len(needle)+1:]...)
		}
		if err == io.EOF {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("serving/tfs: scan TF Serving binary %s: %w", binary, err)
		}
	}
}
