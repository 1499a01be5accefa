package runners_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/monolith-go/monolith/internal/beamtest"
)

// TestMain fails the tests if a goroutine outlives them, but for the embedded prism job
// server, which runs for the life of the process by design of the Beam SDK.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m, beamtest.IgnorePrism()) }
