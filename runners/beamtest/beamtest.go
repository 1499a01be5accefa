// Package beamtest runs the Beam pipelines of tests on the embedded prism runner with the
// SDK's log noise off: use `func TestMain(m *testing.M) { beamtest.Main(m) }`, or
// beamtest.VerifyMain to also fail the tests on leaked goroutines (goleak).
package beamtest

import (
	"flag"
	"os"
	"testing"

	beamlog "github.com/apache/beam/sdks/v2/go/pkg/beam/log"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"
	"go.uber.org/goleak"
)

// Main sets the SDK log level to warn and runs the tests with ptest on prism. A fuzzing
// worker process (go test -fuzz starts them; they run fuzz inputs, never pipelines) skips
// the Beam initialisation, which would otherwise stall it.
func Main(m *testing.M) { os.Exit(run(m)) }

// VerifyMain is Main followed by goleak's check that no goroutine outlives the tests
// (goleak.VerifyTestMain), ignoring the embedded prism job server (IgnorePrism) and
// whatever opts ignore. A fuzzing worker runs as with Main, unchecked: it runs until its
// coordinator stops it, not to the end of a test run.
func VerifyMain(m *testing.M, opts ...goleak.Option) {
	if fuzzWorker() {
		os.Exit(run(m))
	}
	goleak.VerifyTestMain(runner{m}, append([]goleak.Option{IgnorePrism()}, opts...)...)
}

// IgnorePrism ignores the embedded prism job server. prism.Execute starts it in the
// background (`go s.Serve()`, runners/prism/prism.go) for the first pipeline run without
// an endpoint and gives no way to stop it: later runs reuse it, and it serves for the life
// of the process by design of the Beam SDK.
func IgnorePrism() goleak.Option {
	return goleak.IgnoreAnyFunction("github.com/apache/beam/sdks/v2/go/pkg/beam/runners/prism/internal/jobservices.(*Server).Serve")
}

// runner runs the tests as Main does and returns their exit code (goleak.TestingM).
type runner struct{ m *testing.M }

func (r runner) Run() int { return run(r.m) }

func run(m *testing.M) int {
	beamlog.LogLevel = "warn"
	if fuzzWorker() {
		return m.Run()
	}
	return ptest.MainRet(m)
}

// fuzzWorker reports whether this process is a fuzzing worker (-test.fuzzworker).
func fuzzWorker() bool {
	if !flag.Parsed() {
		flag.Parse()
	}
	f := flag.Lookup("test.fuzzworker")
	return f != nil && f.Value.String() == "true"
}
