package runners

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/runtime/graphx"
	beamlog "github.com/apache/beam/sdks/v2/go/pkg/beam/log"
	fnpb "github.com/apache/beam/sdks/v2/go/pkg/beam/model/fnexecution_v1"
	pipepb "github.com/apache/beam/sdks/v2/go/pkg/beam/model/pipeline_v1"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/options/jobopts"
	"google.golang.org/protobuf/proto"
)

// TestSetJobOptions checks the SDK job flags Run sets for each kind of run.
func TestSetJobOptions(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, c := range []struct {
		name              string
		o                 Options
		env, config, bin  string
		endpoint, jobName string
	}{
		{"prism", Options{JobName: "j"}, Loopback, "", "", "", "j"},
		{"prism external", Options{EnvironmentType: "external", EnvironmentConfig: "127.0.0.1:5"}, External, "127.0.0.1:5", exe, "", ""},
		{"universal", Options{Runner: "universal", Endpoint: "h:1"}, Loopback, "", "", "h:1", ""},
		{"flink external", Options{Runner: "flink", Endpoint: "h:1", EnvironmentType: External, EnvironmentConfig: "localhost:50000"}, External, "localhost:50000", exe, "h:1", ""},
		{"spark docker", Options{Runner: "spark", Endpoint: "h:1", EnvironmentType: Docker, EnvironmentConfig: "img", WorkerBinary: exe}, Docker, "img", exe, "h:1", ""},
	} {
		if err := c.o.Validate(); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if err := setJobOptions(c.o); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if *jobopts.EnvironmentType != c.env || *jobopts.EnvironmentConfig != c.config || *jobopts.WorkerBinary != c.bin ||
			*jobopts.Endpoint != c.endpoint || *jobopts.JobName != c.jobName {
			t.Errorf("%s: environment %q %q, worker binary %q, endpoint %q, job %q; want %q %q, %q, %q, %q", c.name,
				*jobopts.EnvironmentType, *jobopts.EnvironmentConfig, *jobopts.WorkerBinary, *jobopts.Endpoint, *jobopts.JobName,
				c.env, c.config, c.bin, c.endpoint, c.jobName)
		}
	}
}

// envDryRun marks the child process of TestDataflowDryRun.
const envDryRun = "RUNNERS_TEST_DATAFLOW_DRY_RUN"

// TestDataflowDryRun maps dataflow options onto the Go SDK's dataflow runner and lets it
// translate a pipeline into a Dataflow job without submitting it (its --dry_run): the
// job names the project, region, locations, image and machine type given. No network:
// the runner's check of the staging bucket fails for want of credentials and only warns.
// It runs in a child process, as the dataflow flags and the SDK's pipeline options it
// sets are process-wide.
func TestDataflowDryRun(t *testing.T) {
	if os.Getenv(envDryRun) != "1" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestDataflowDryRun$", "-test.v")
		cmd.Env = append(os.Environ(), envDryRun+"=1", "GOOGLE_APPLICATION_CREDENTIALS=/nonexistent/monolith-test-credentials.json")
		cmd.WaitDelay = 5 * time.Second
		done := make(chan struct{})
		var out []byte
		var err error
		go func() { out, err = cmd.CombinedOutput(); close(done) }()
		select {
		case <-done:
		case <-time.After(2 * time.Minute):
			_ = cmd.Process.Kill()
			<-done
			t.Fatalf("the dry run did not finish within 2 minutes:\n%s", out)
		}
		if err != nil || !strings.Contains(string(out), "--- PASS: TestDataflowDryRun") {
			t.Fatalf("dry run child: %v\n%s", err, out)
		}
		return
	}
	var logs capture
	beamlog.SetLogger(&logs)
	defer beamlog.SetupLoggingWithDefault()
	if err := flag.CommandLine.Set("dry_run", "true"); err != nil {
		t.Fatal(err)
	}
	if !beam.Initialized() {
		beam.Init()
	}
	p, s := beam.NewPipelineWithRoot()
	beam.Create(s, 1, 2, 3)
	o := Options{Runner: Dataflow, JobName: "monolith-dry-run", TempLocation: "gs://monolith-bucket/tmp",
		Dataflow: DataflowOptions{Project: "monolith-project", Region: "europe-west4", StagingLocation: "gs://monolith-bucket/staging",
			SDKContainerImage: "example.com/monolith-worker:1", WorkerMachineType: "n2-highmem-4", MaxNumWorkers: 9}}
	res, err := Run(context.Background(), p, o)
	if err != nil || res != nil {
		t.Fatalf("dry run = %v, %v; want no result and no error", res, err)
	}
	job := logs.String()
	for _, want := range []string{
		`"projectId": "monolith-project"`, `"name": "monolith-dry-run"`, `"region": "europe-west4"`,
		`"tempLocation": "gs://monolith-bucket/tmp"`, `"location": "gs://monolith-bucket/staging/`,
		`"containerImage": "example.com/monolith-worker:1"`, `"machineType": "n2-highmem-4"`, `"maxNumWorkers": 9`,
		`"job_type": "FNAPI_BATCH"`,
	} {
		if !strings.Contains(job, want) {
			t.Errorf("the translated job lacks %s:\n%s", want, job)
		}
	}
}

// capture is a Beam logger that keeps every message.
type capture struct {
	mu sync.Mutex
	b  strings.Builder
}

func (c *capture) Log(_ context.Context, _ beamlog.Severity, _ int, msg string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.b.WriteString(msg)
	c.b.WriteByte('\n')
}

func (c *capture) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.b.String()
}

// TestCheckWorkerBinary: a worker accepts the job only if the staged binary's SHA-256 is
// its own.
func TestCheckWorkerBinary(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	dep := func(sha, role string) *pipepb.ArtifactInformation {
		pl, _ := proto.Marshal(&pipepb.ArtifactFilePayload{Path: "/staged/worker", Sha256: sha})
		return &pipepb.ArtifactInformation{TypeUrn: graphx.URNArtifactFileType, TypePayload: pl, RoleUrn: role}
	}
	other := &pipepb.ArtifactInformation{TypeUrn: "beam:artifact:type:url:v1"}
	for _, c := range []struct {
		name string
		deps []*pipepb.ArtifactInformation
		ok   bool
	}{
		{"no dependencies", nil, true},
		{"same binary", []*pipepb.ArtifactInformation{dep(hex.EncodeToString(sum[:]), graphx.URNArtifactGoWorkerRole)}, true},
		{"same binary among others", []*pipepb.ArtifactInformation{other, dep(hex.EncodeToString(sum[:]), graphx.URNArtifactGoWorkerRole)}, true},
		{"no sha", []*pipepb.ArtifactInformation{dep("", graphx.URNArtifactGoWorkerRole)}, true},
		{"other binary", []*pipepb.ArtifactInformation{dep(strings.Repeat("ab", 32), graphx.URNArtifactGoWorkerRole)}, false},
		{"other binary, sole dependency without role", []*pipepb.ArtifactInformation{dep(strings.Repeat("ab", 32), "")}, false},
	} {
		err := checkWorkerBinary(&fnpb.ProvisionInfo{Dependencies: c.deps})
		if c.ok != (err == nil) || (err != nil && !errors.Is(err, ErrWorkerBinary)) {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}

// TestMarkersOfOtherProcessesStay: a loopback marker another process holds open (a second
// worker on the machine that has not staged it yet) survives this process's cleanup; once
// nothing holds it, it goes.
func TestMarkersOfOtherProcessesStay(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	before := time.Now()
	f, err := os.CreateTemp(tmp, "beamloopbackworker-*")
	if err != nil {
		t.Fatal(err)
	}
	name := f.Name()
	holder := exec.Command("sleep", "30")
	holder.Stdin = f // the other process holds the marker open
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	removeLoopbackMarkers(before)
	if _, err := os.Stat(name); err != nil {
		t.Errorf("a marker another process holds was removed: %v", err)
	}
	_ = holder.Process.Kill()
	_ = holder.Wait()
	removeLoopbackMarkers(before)
	if _, err := os.Stat(name); !os.IsNotExist(err) {
		t.Errorf("a marker nothing holds stayed: %v", err)
	}
}

// TestMarkersOfTheRun: the cleanup removes the markers of the run, the one this process
// still holds open included, and orphans older than markerStale, and leaves alone
// markers of earlier runs that may still be staging, files that are not empty, and
// directories.
func TestMarkersOfTheRun(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	mk := func(content string, age time.Duration) string {
		f, err := os.CreateTemp(tmp, markerPrefix+"*")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteString(content); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		if age > 0 {
			old := time.Now().Add(-age)
			if err := os.Chtimes(f.Name(), old, old); err != nil {
				t.Fatal(err)
			}
		}
		return f.Name()
	}
	start := time.Now()
	held, err := os.CreateTemp(tmp, markerPrefix+"*")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	closed := mk("", 0)
	earlier := mk("", time.Minute)
	orphan := mk("", 2*markerStale)
	full := mk("x", 0)
	if err := os.Mkdir(filepath.Join(tmp, markerPrefix+"dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	removeLoopbackMarkers(start)
	for _, c := range []struct {
		name string
		path string
		stay bool
	}{
		{"held by this process", held.Name(), false},
		{"closed, created during the run", closed, false},
		{"from an earlier run", earlier, true},
		{"an orphan", orphan, false},
		{"not empty", full, true},
		{"a directory", filepath.Join(tmp, markerPrefix+"dir"), true},
	} {
		_, err := os.Stat(c.path)
		if stayed := err == nil; stayed != c.stay {
			t.Errorf("%s: stayed %v, want %v", c.name, stayed, c.stay)
		}
	}
}
