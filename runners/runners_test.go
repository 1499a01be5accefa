package runners_test

import (
	"context"
	"errors"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"

	"github.com/monolith-go/monolith/runners"
)

func init() {
	register.Function1x1[int, int](square)
}

func square(x int) int { return x * x }

func TestValidate(t *testing.T) {
	cases := []struct {
		name string
		o    runners.Options
		ok   bool
		want string // runner after Validate
	}{
		{"zero is prism", runners.Options{}, true, runners.Prism},
		{"prism", runners.Options{Runner: "PRISM"}, true, runners.Prism},
		{"universal", runners.Options{Runner: "universal", Endpoint: "127.0.0.1:8099"}, true, runners.Universal},
		{"portable alias", runners.Options{Runner: "portable", Endpoint: "h:1", EnvironmentType: "docker"}, true, runners.Universal},
		{"universal without endpoint", runners.Options{Runner: "universal"}, false, ""},
		{"prism with endpoint", runners.Options{Endpoint: "h:1"}, false, ""},
		{"prism with docker", runners.Options{EnvironmentType: "DOCKER"}, false, ""},
		{"flink by name", runners.Options{Runner: "flink"}, false, ""},
		{"unknown", runners.Options{Runner: "nope"}, false, ""},
		{"bad environment", runners.Options{Runner: "universal", Endpoint: "h:1", EnvironmentType: "VM"}, false, ""},
	}
	for _, c := range cases {
		err := c.o.Validate()
		if c.ok != (err == nil) {
			t.Errorf("%s: Validate() = %v", c.name, err)
			continue
		}
		if err != nil && !errors.Is(err, runners.ErrOptions) {
			t.Errorf("%s: %v does not wrap ErrOptions", c.name, err)
		}
		if c.ok && c.o.Runner != c.want {
			t.Errorf("%s: runner %q, want %q", c.name, c.o.Runner, c.want)
		}
	}
}

// TestPrismTwice runs two pipelines on the embedded runner: the second reuses its server.
func TestPrismTwice(t *testing.T) {
	runners.Init(false)
	for i := 0; i < 2; i++ {
		p, s := beam.NewPipelineWithRoot()
		passert.Equals(s, beam.ParDo(s, square, beam.Create(s, 1, 2, 3)), 1, 4, 9)
		if _, err := runners.Run(context.Background(), p, runners.Options{}); err != nil {
			t.Fatalf("run %d: %v", i, err)
		}
	}
	// A failing assertion fails the run: the runner really executes the pipeline.
	p, s := beam.NewPipelineWithRoot()
	passert.Equals(s, beam.ParDo(s, square, beam.Create(s, 2)), 5)
	if _, err := runners.Run(context.Background(), p, runners.Options{}); err == nil {
		t.Fatal("a failing passert did not fail the prism run")
	}
}
