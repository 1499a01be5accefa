package tfs

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// envChild makes the test binary a child process for the Wrapper tests: "fake" serves a
// Fake until SIGTERM, "stubborn" ignores SIGTERM.
const envChild = "TFS_TEST_CHILD"

func TestMain(m *testing.M) {
	if mode := os.Getenv(envChild); mode != "" {
		os.Exit(child(mode))
	}
	goleak.VerifyTestMain(m)
}

func child(mode string) int {
	switch mode {
	case "fake":
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
		defer stop()
		f, err := NewFake(FakeOptions{Logger: quietLogger()})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Printf("listening on %s\n", f.Addr())
		if err := f.Serve(ctx); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Println("stopped")
		return 0
	case "stubborn":
		signal.Ignore(syscall.SIGTERM)
		fmt.Println("ignoring SIGTERM")
		time.Sleep(time.Minute)
		return 0
	}
	return 2
}

func quietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}
