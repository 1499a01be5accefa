// Package beamtest runs the Beam pipelines of tests on the embedded prism runner with the
// SDK's log noise off: use `func TestMain(m *testing.M) { beamtest.Main(m) }`.
package beamtest

import (
	"flag"
	"os"
	"testing"

	beamlog "github.com/apache/beam/sdks/v2/go/pkg/beam/log"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"
)

// Main sets the SDK log level to warn and runs the tests with ptest on prism. A fuzzing
// worker process (go test -fuzz starts them; they run fuzz inputs, never pipelines) skips
// the Beam initialisation, which would otherwise stall it.
func Main(m *testing.M) {
	beamlog.LogLevel = "warn"
	if !flag.Parsed() {
		flag.Parse()
	}
	if f := flag.Lookup("test.fuzzworker"); f != nil && f.Value.String() == "true" {
		os.Exit(m.Run())
	}
	ptest.Main(m)
}
