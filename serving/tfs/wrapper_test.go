package tfs

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestTFSNewWrapperFromEnv(t *testing.T) {
	tests := []struct {
		name     string
		env      map[string]string
		wantErr  error
		wantArgv []string
	}{
		{name: "unset", env: nil, wantErr: ErrNoBinary},
		{name: "blank", env: map[string]string{EnvBinary: "  "}, wantErr: ErrNoBinary},
		{name: "binary", env: map[string]string{EnvBinary: "/opt/tfs"}, wantArgv: []string{"/opt/tfs", "--port=1"}},
		{name: "binary with args", env: map[string]string{EnvBinary: "/bin/monolith fake-tfserving"},
			wantArgv: []string{"/bin/monolith", "fake-tfserving", "--port=1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			getenv := func(k string) (string, bool) { v, ok := tt.env[k]; return v, ok }
			w, err := NewWrapperFromEnv(getenv, []string{"--port=1"}, WrapperOptions{Logger: quietLogger()})
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err %v, want %v", err, tt.wantErr)
				}
				if err.Error() != "TF Serving binary not available: set MONOLITH_TFS_BINARY" {
					t.Fatalf("message %q", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := w.Command(); !slices.Equal(got, tt.wantArgv) {
				t.Fatalf("command %q, want %q", got, tt.wantArgv)
			}
		})
	}
}

// selfWrapper runs this test binary as a child in mode (see TestMain).
func selfWrapper(t *testing.T, mode string, logFile string, stopTimeout time.Duration) *Wrapper {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), envChild+"="+mode)
	w, err := NewWrapper(WrapperOptions{Binary: exe, Args: []string{"-test.run=^$"}, Env: env,
		LogFile: logFile, StopTimeout: stopTimeout, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Stop(context.Background()) })
	return w
}

// waitLog waits for re to match the log file and returns the match.
func waitLog(t *testing.T, path string, re *regexp.Regexp) []string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		b, _ := os.ReadFile(path)
		if m := re.FindStringSubmatch(string(b)); m != nil {
			return m
		}
		time.Sleep(10 * time.Millisecond)
	}
	b, _ := os.ReadFile(path)
	t.Fatalf("log never matched %s:\n%s", re, b)
	return nil
}

func TestTFSWrapperRunsAndStopsChild(t *testing.T) {
	ctx := testCtx(t)
	logFile := filepath.Join(t.TempDir(), "tfs.log")
	w := selfWrapper(t, "fake", logFile, 10*time.Second)
	if _, exited := w.Poll(); exited {
		t.Fatal("child exited at once")
	}
	addr := waitLog(t, logFile, regexp.MustCompile(`listening on (\S+)`))[1]
	mon, err := DialMonitor(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer mon.Close()
	if _, err := mon.GetModelStatus(ctx, Spec("nope")); status.Code(errors.Unwrap(err)) != codes.NotFound {
		t.Fatalf("status of an unknown model: %v, want NotFound", err)
	}
	if err := w.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := w.Wait(ctx); err != nil {
		t.Fatalf("child after SIGTERM: %v", err)
	}
	if code, exited := w.Poll(); !exited || code != 0 {
		t.Fatalf("poll = %d, %v; want 0, true", code, exited)
	}
	if b, _ := os.ReadFile(logFile); !bytes.Contains(b, []byte("stopped")) {
		t.Fatalf("child did not stop gracefully:\n%s", b)
	}
}

func TestTFSWrapperKillsAfterTimeout(t *testing.T) {
	ctx := testCtx(t)
	logFile := filepath.Join(t.TempDir(), "tfs.log")
	w := selfWrapper(t, "stubborn", logFile, 200*time.Millisecond)
	waitLog(t, logFile, regexp.MustCompile(`ignoring SIGTERM`))
	start := time.Now()
	if err := w.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < 200*time.Millisecond || took > 5*time.Second {
		t.Fatalf("stop took %v", took)
	}
	if code, exited := w.Poll(); !exited || code != -1 {
		t.Fatalf("poll = %d, %v; want -1 (killed), true", code, exited)
	}
	if err := w.Wait(ctx); err == nil {
		t.Fatal("a killed child reported success")
	}
}

func TestTFSWrapperContextCancelStopsChild(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	w, err := NewWrapper(WrapperOptions{Binary: exe, Args: []string{"-test.run=^$"},
		Env: append(os.Environ(), envChild+"=fake"), Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	cancel()
	select {
	case <-w.Done():
	case <-time.After(10 * time.Second):
		w.Stop(context.Background())
		t.Fatal("child still running after the context ended")
	}
}

func TestTFSWrapperStartFailure(t *testing.T) {
	w, err := NewWrapper(WrapperOptions{Binary: filepath.Join(t.TempDir(), "missing"), Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(context.Background()); err == nil {
		t.Fatal("started a missing binary")
	}
	if _, err := NewWrapper(WrapperOptions{}); !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("no binary: %v", err)
	}
	// Review fix (S11): a MONOLITH_TFS_BINARY naming a missing file fails naming the variable.
	missing := filepath.Join(t.TempDir(), "tfs")
	w, err = NewWrapperFromEnv(func(string) (string, bool) { return missing, true }, nil, WrapperOptions{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	err = w.Start(context.Background())
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), EnvBinary) || !strings.Contains(err.Error(), missing) {
		t.Fatalf("start of a missing MONOLITH_TFS_BINARY: %v", err)
	}
}

func TestTFSScanGRPCRemoteOp(t *testing.T) {
	dir := t.TempDir()
	for _, tt := range []struct {
		name string
		data []byte
		want bool
	}{
		{"empty", nil, false},
		{"present", []byte("\x00abc PredictionServiceGrpc\x00"), true},
		{"straddles 1 MiB", append(bytes.Repeat([]byte{'x'}, 1<<20-5), []byte("PredictionServiceGrpc")...), true},
		{"partial", []byte("PredictionServiceGr"), false},
	} {
		p := filepath.Join(dir, tt.name)
		if err := os.WriteFile(p, tt.data, 0o644); err != nil {
			t.Fatal(err)
		}
		if got, err := ScanGRPCRemoteOp(p); err != nil || got != tt.want {
			t.Errorf("%s: %v, %v; want %v", tt.name, got, err, tt.want)
		}
	}
}

// TestBinaryFromEnv: the variable's first field is the binary, the rest come before TF
// Serving's flags; unset or blank is S11's error.
func TestBinaryFromEnv(t *testing.T) {
	env := func(v string, ok bool) func(string) (string, bool) {
		return func(string) (string, bool) { return v, ok }
	}
	bin, lead, err := BinaryFromEnv(env("/bin/monolith  fake-tfserving", true))
	if err != nil || bin != "/bin/monolith" || len(lead) != 1 || lead[0] != "fake-tfserving" {
		t.Errorf("BinaryFromEnv = %q %q %v", bin, lead, err)
	}
	for _, e := range []func(string) (string, bool){env("", false), env(" \t ", true)} {
		if _, _, err := BinaryFromEnv(e); !errors.Is(err, ErrNoBinary) {
			t.Errorf("unset or blank: %v, want ErrNoBinary", err)
		}
	}
}

// The child's output is logged a line at a time, across writes; a line that never ends is
// logged in maxLogLine pieces instead of being held without bound.
func TestLineLogger(t *testing.T) {
	long := strings.Repeat("x", 2*maxLogLine+5)
	for _, tc := range []struct {
		name   string
		writes []string
		flush  bool
		want   []string
	}{
		{"lines", []string{"a\nb\n"}, false, []string{"a", "b"}},
		{"split write", []string{"ab", "c\nd"}, false, []string{"abc"}},
		{"flush tail", []string{"ab", "c\nd"}, true, []string{"abc", "d"}},
		{"empty line", []string{"\n"}, false, []string{""}},
		{"unbounded line", []string{long[:maxLogLine-1], long[maxLogLine-1:]}, true,
			[]string{long[:maxLogLine], long[maxLogLine : 2*maxLogLine], long[2*maxLogLine:]}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			h := &recordHandler{lines: &got}
			l := &lineLogger{log: slog.New(h)}
			for _, w := range tc.writes {
				if n, err := l.Write([]byte(w)); n != len(w) || err != nil {
					t.Fatalf("Write: %d, %v", n, err)
				}
			}
			if len(l.buf) > maxLogLine {
				t.Errorf("holds %d bytes", len(l.buf))
			}
			if tc.flush {
				l.flush()
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("logged %d lines %.40q, want %d %.40q", len(got), got, len(tc.want), tc.want)
			}
		})
	}
}

// recordHandler keeps the "tfs" attribute of every record.
type recordHandler struct{ lines *[]string }

func (h *recordHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *recordHandler) Handle(_ context.Context, r slog.Record) error {
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "tfs" {
			*h.lines = append(*h.lines, a.Value.String())
		}
		return true
	})
	return nil
}
func (h *recordHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *recordHandler) WithGroup(string) slog.Handler      { return h }

// The log file is truncated at Start (TFSWrapper's open "w"), or kept and appended to with
// AppendLog (the v1 agent's ServingLog, open "a").
func TestWrapperLogFileMode(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		append bool
		want   string
	}{
		{false, "ignoring SIGTERM\n"},
		{true, "earlier run\nignoring SIGTERM\n"},
	} {
		logFile := filepath.Join(t.TempDir(), "tfs.log")
		if err := os.WriteFile(logFile, []byte("earlier run\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		w, err := NewWrapper(WrapperOptions{Binary: exe, Args: []string{"-test.run=^$"}, Env: append(os.Environ(), envChild+"=stubborn"),
			LogFile: logFile, AppendLog: tc.append, StopTimeout: 10 * time.Millisecond, Logger: quietLogger()})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Start(testCtx(t)); err != nil {
			t.Fatal(err)
		}
		waitLog(t, logFile, regexp.MustCompile(`ignoring SIGTERM`))
		_ = w.Stop(context.Background()) // the child ignores SIGTERM: killed after StopTimeout
		if b, _ := os.ReadFile(logFile); string(b) != tc.want {
			t.Errorf("append %v: log %q, want %q", tc.append, b, tc.want)
		}
	}
}
