package tfs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/monolith-go/monolith/internal/tlsconf/tlstest"
	"github.com/monolith-go/monolith/schemas/tfcorepb"
	pb "github.com/monolith-go/monolith/schemas/tfservingpb"
)

const (
	unknown   = pb.ModelVersionStatus_UNKNOWN
	start     = pb.ModelVersionStatus_START
	loading   = pb.ModelVersionStatus_LOADING
	available = pb.ModelVersionStatus_AVAILABLE
	unloading = pb.ModelVersionStatus_UNLOADING
	end       = pb.ModelVersionStatus_END
)

// versionDirs creates base/<v> for each version (and a non-version file and dir) and
// returns base.
func versionDirs(t *testing.T, base string, versions ...int64) string {
	t.Helper()
	for _, v := range versions {
		if err := os.MkdirAll(filepath.Join(base, fmt.Sprint(v)), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(base, "tmp-export"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(base, "7"), nil, 0o644); err != nil { // a file, not a version
		t.Fatal(err)
	}
	return base
}

// twoModels is a config of "m:entry" (latest 2 over versions 1, 2, 3) and "m:ps_0"
// (specific 1 and 9 over versions 1, 5), under dir.
func twoModels(t *testing.T, dir string) string {
	entry := versionDirs(t, filepath.Join(dir, "entry"), 1, 2, 3)
	ps := versionDirs(t, filepath.Join(dir, "ps_0"), 1, 5)
	return fmt.Sprintf(`model_config_list {
  config {
    name: "m:entry"
    base_path: %q
    model_platform: "tensorflow"
    model_version_policy { latest { num_versions: 2 } }
    version_labels { key: "stable" value: 2 }
  }
  config {
    name: "m:ps_0"
    base_path: %q
    model_platform: "tensorflow"
    model_version_policy { specific { versions: 1 versions: 9 } }
  }
}
`, entry, ps)
}

// writeFile replaces path atomically (a polling reader never sees it half written).
func writeFile(t *testing.T, path, text string) string {
	t.Helper()
	if err := os.WriteFile(path+".tmp", []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
	return path
}

// startFake serves a Fake with opts and dials it; cleanup stops both.
func startFake(t *testing.T, opts FakeOptions) (*Fake, *Monitor) {
	t.Helper()
	opts.Logger = quietLogger()
	f, err := NewFake(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Serve(ctx) }()
	mon, err := DialMonitor(f.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		mon.Close()
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("Serve did not return")
		}
	})
	return f, mon
}

// states is a model's version → state map, from GetModelStatus.
func states(t *testing.T, mon *Monitor, name string) map[int64]pb.ModelVersionStatus_State {
	t.Helper()
	list, err := mon.GetModelStatus(testCtx(t), Spec(name))
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[int64]pb.ModelVersionStatus_State)
	for _, s := range list {
		if s.GetStatus().GetErrorCode() != tfcorepb.Code_OK {
			t.Fatalf("%s version %d: status %v", name, s.GetVersion(), s.GetStatus())
		}
		out[s.GetVersion()] = s.GetState()
	}
	return out
}

// waitStates polls until the model's versions are exactly want.
func waitStates(t *testing.T, mon *Monitor, name string, want map[int64]pb.ModelVersionStatus_State) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	var got map[int64]pb.ModelVersionStatus_State
	for time.Now().Before(deadline) {
		_, err := mon.GetModelStatus(testCtx(t), Spec(name))
		if status.Code(errors.Unwrap(err)) == codes.NotFound {
			time.Sleep(5 * time.Millisecond)
			continue // not configured yet
		}
		if got = states(t, mon, name); fmt.Sprint(got) == fmt.Sprint(want) {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("%s: states %v, want %v", name, got, want)
}

func TestFakeServesConfigFile(t *testing.T) {
	dir := t.TempDir()
	cfgFile := writeFile(t, filepath.Join(dir, "model.cfg"), twoModels(t, dir))
	_, mon := startFake(t, FakeOptions{ModelConfigFile: cfgFile, Step: 5 * time.Millisecond})
	ctx := testCtx(t)

	waitStates(t, mon, "m:entry", map[int64]pb.ModelVersionStatus_State{2: available, 3: available})
	waitStates(t, mon, "m:ps_0", map[int64]pb.ModelVersionStatus_State{1: available})
	got, err := mon.ModelsStatus(ctx, []string{"m:entry", "m:ps_0"})
	if err != nil {
		t.Fatal(err)
	}
	if got["m:entry"].GetVersion() != 3 || got["m:ps_0"].GetVersion() != 1 || got["m:ps_0"].GetState() != available {
		t.Fatalf("models status %v", got)
	}

	t.Run("one version", func(t *testing.T) {
		for _, tt := range []struct {
			spec *pb.ModelSpec
			want int64
			code codes.Code
		}{
			{VersionSpec("m:entry", 2), 2, codes.OK},
			{LabelSpec("m:entry", "stable"), 2, codes.OK},
			{VersionSpec("m:entry", 1), 0, codes.NotFound},
			{LabelSpec("m:entry", "canary"), 0, codes.NotFound},
			{Spec("m:nope"), 0, codes.NotFound},
			{Spec(""), 0, codes.InvalidArgument},
		} {
			list, err := mon.GetModelStatus(ctx, tt.spec)
			if c := status.Code(errors.Unwrap(err)); c != tt.code {
				t.Errorf("%v: code %v (%v), want %v", tt.spec, c, err, tt.code)
				continue
			}
			if tt.code == codes.OK && (len(list) != 1 || list[0].GetVersion() != tt.want) {
				t.Errorf("%v: %v, want version %d", tt.spec, list, tt.want)
			}
		}
	})

	t.Run("metadata", func(t *testing.T) {
		md, err := mon.GetModelMetadata(ctx, Spec("m:entry"))
		if err != nil {
			t.Fatal(err)
		}
		if md.GetModelSpec().GetName() != "m:entry" || md.GetModelSpec().GetVersion().GetValue() != 3 ||
			md.GetMetadata()["signature_def"].GetTypeUrl() != SignatureDefMapURL {
			t.Fatalf("metadata %v", md)
		}
		for _, tt := range []struct {
			spec   *pb.ModelSpec
			fields []string
			code   codes.Code
		}{
			{VersionSpec("m:entry", 2), nil, codes.OK},
			{Spec("m:nope"), nil, codes.NotFound},
			{Spec("m:entry"), []string{"base_path"}, codes.InvalidArgument},
			{VersionSpec("m:entry", 1), nil, codes.NotFound},
		} {
			_, err := mon.GetModelMetadata(ctx, tt.spec, tt.fields...)
			if c := status.Code(errors.Unwrap(err)); c != tt.code {
				t.Errorf("%v %v: %v, want %v", tt.spec, tt.fields, err, tt.code)
			}
		}
	})

	t.Run("unknown model", func(t *testing.T) {
		st, err := mon.ModelStatus(ctx, "m:nope")
		if err != nil {
			t.Fatal(err)
		}
		if st.GetVersion() != NoVersion || st.GetState() != unknown || st.GetStatus().GetErrorCode() != tfcorepb.Code_NOT_FOUND {
			t.Fatalf("unknown model status %v", st)
		}
	})

	t.Run("reload without a model", func(t *testing.T) {
		cfg, err := ReadModelServerConfig(cfgFile)
		if err != nil {
			t.Fatal(err)
		}
		list := cfg.GetModelConfigList()
		list.Config = list.Config[:1]
		if err := mon.ReloadConfig(ctx, cfg); err != nil {
			t.Fatal(err)
		}
		st, err := mon.WaitState(ctx, "m:ps_0", end, time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		if st.GetVersion() != 1 {
			t.Fatalf("unloaded %v", st)
		}
		waitStates(t, mon, "m:entry", map[int64]pb.ModelVersionStatus_State{2: available, 3: available})
	})

	t.Run("wait with a bad interval", func(t *testing.T) {
		// Review fix: a non-positive interval is an error, not a time.NewTicker panic.
		for _, d := range []time.Duration{0, -time.Second} {
			if _, err := mon.WaitState(ctx, "m:entry", available, d); !errors.Is(err, ErrInvalidOptions) {
				t.Errorf("WaitState with interval %v: %v", d, err)
			}
		}
	})

	t.Run("reload refused", func(t *testing.T) {
		bad, err := ParseModelServerConfig([]byte(`model_config_list { config { name: "a" base_path: "/x" } config { name: "a" base_path: "/y" } }`))
		if err != nil {
			t.Fatal(err)
		}
		if err := mon.ReloadConfig(ctx, bad); !errors.Is(err, ErrReloadRefused) {
			t.Fatalf("duplicate names: %v", err)
		}
	})
}

func TestFakePollsFileAndBasePaths(t *testing.T) {
	dir := t.TempDir()
	base := versionDirs(t, filepath.Join(dir, "a"), 1)
	cfgFile := writeFile(t, filepath.Join(dir, "model.cfg"), "model_config_list {}\n")
	_, mon := startFake(t, FakeOptions{ModelConfigFile: cfgFile, ConfigPollWait: 5 * time.Millisecond,
		FileSystemPollWait: 5 * time.Millisecond, Step: 2 * time.Millisecond})
	if _, err := mon.GetModelStatus(testCtx(t), Spec("a")); status.Code(errors.Unwrap(err)) != codes.NotFound {
		t.Fatalf("before the config names it: %v", err)
	}
	writeFile(t, cfgFile, fmt.Sprintf("model_config_list { config { name: \"a\" base_path: %q } }\n", base))
	waitStates(t, mon, "a", map[int64]pb.ModelVersionStatus_State{1: available})
	versionDirs(t, base, 2) // a new export: latest 1 moves to it
	waitStates(t, mon, "a", map[int64]pb.ModelVersionStatus_State{1: end, 2: available})
	writeFile(t, cfgFile, "garbage {") // a bad file keeps the config
	time.Sleep(30 * time.Millisecond)
	waitStates(t, mon, "a", map[int64]pb.ModelVersionStatus_State{1: end, 2: available})
}

// TestFakeStateMachine steps the clock by hand: each step moves every version in transit
// by one state.
func TestFakeStateMachine(t *testing.T) {
	dir := t.TempDir()
	base := versionDirs(t, filepath.Join(dir, "a"), 1, 2)
	cfg := func(text string) *pb.ModelServerConfig {
		c, err := ParseModelServerConfig(fmt.Appendf(nil, text, base))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	latest1 := cfg(`model_config_list { config { name: "a" base_path: %q } }`)
	all := cfg(`model_config_list { config { name: "a" base_path: %q model_version_policy { all {} } } }`)
	spec1 := cfg(`model_config_list { config { name: "a" base_path: %q model_version_policy { specific { versions: 1 } } } }`)
	none, err := ParseModelServerConfig([]byte(`model_config_list { }`))
	if err != nil {
		t.Fatal(err)
	}

	f, err := NewFake(FakeOptions{Config: latest1, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	type S = map[int64]pb.ModelVersionStatus_State
	// A config without model_config_list (an empty file) and a request without a config
	// change nothing, as in TF Serving; model_config_list {} (none) unloads everything.
	emptyFile, err := ParseModelServerConfig(nil)
	if err != nil {
		t.Fatal(err)
	}
	noConfig := &pb.ModelServerConfig{} // sent as a request without a config
	steps := []struct {
		name   string
		reload *pb.ModelServerConfig
		want   S
	}{
		{"initial", nil, S{2: start}},
		{"step", nil, S{2: loading}},
		{"step", nil, S{2: available}},
		{"steady", nil, S{2: available}},
		{"empty file", emptyFile, S{2: available}},
		{"step", nil, S{2: available}},
		{"no config", noConfig, S{2: available}},
		{"step", nil, S{2: available}},
		{"all", all, S{1: start, 2: available}},
		{"step", nil, S{1: loading, 2: available}},
		{"step", nil, S{1: available, 2: available}},
		{"specific 1", spec1, S{1: available, 2: available}},
		{"step", nil, S{1: available, 2: unloading}},
		{"step", nil, S{1: available, 2: end}},
		{"latest 1 again", latest1, S{1: available, 2: start}},
		{"step", nil, S{1: available, 2: loading}}, // 1 waits for 2 to load
		{"step", nil, S{1: available, 2: available}},
		{"step", nil, S{1: unloading, 2: available}},
		{"step", nil, S{1: end, 2: available}},
		{"removed", none, S{1: end, 2: available}},
		{"step", nil, S{1: end, 2: unloading}},
		{"step", nil, S{1: end, 2: end}},
		{"steady", nil, S{1: end, 2: end}},
	}
	for i, st := range steps {
		switch {
		case st.reload != nil:
			req := &pb.ReloadConfigRequest{Config: st.reload}
			if st.reload == noConfig {
				req.Config = nil
			}
			resp, err := f.HandleReloadConfigRequest(context.Background(), req)
			if err != nil || resp.GetStatus().GetErrorCode() != tfcorepb.Code_OK {
				t.Fatalf("step %d %s: reload %v %v", i, st.name, resp, err)
			}
		case st.name != "initial":
			f.advance()
		}
		resp, err := f.GetModelStatus(context.Background(), &pb.GetModelStatusRequest{ModelSpec: Spec("a")})
		if err != nil {
			t.Fatal(err)
		}
		got := S{}
		var order []int64
		for _, s := range resp.GetModelVersionStatus() {
			got[s.GetVersion()] = s.GetState()
			order = append(order, s.GetVersion())
		}
		if fmt.Sprint(got) != fmt.Sprint(st.want) || !slices.IsSorted(order) {
			t.Fatalf("step %d %s: %v (order %v), want %v", i, st.name, got, order, st.want)
		}
	}
}

func TestFakeOptions(t *testing.T) {
	for _, tt := range []struct {
		name string
		opts FakeOptions
	}{
		{"bad listen", FakeOptions{Listen: "nope"}},
		{"negative step", FakeOptions{Step: -1}},
		{"poll without file", FakeOptions{ConfigPollWait: time.Second}},
	} {
		if _, err := NewFake(tt.opts); !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("%s: %v", tt.name, err)
		}
	}
	if _, err := NewFake(FakeOptions{ModelConfigFile: filepath.Join(t.TempDir(), "missing")}); err == nil {
		t.Error("missing config file accepted")
	}
	f, err := NewFake(FakeOptions{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	f.Close()
	if err := f.Serve(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("Serve after Close: %v", err)
	}
}

// TestFakeTLS: the fake TF Serving serves mutual TLS when asked.
func TestFakeTLS(t *testing.T) {
	files := tlstest.New(t)
	st, err := files.Good.Server()
	if err != nil {
		t.Fatal(err)
	}
	f, err := NewFake(FakeOptions{TLS: st, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Serve(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	tlstest.Check(t, files, f.Addr(), func(ctx context.Context, cc *grpc.ClientConn) error {
		_, err := pb.NewModelServiceClient(cc).GetModelStatus(ctx, &pb.GetModelStatusRequest{ModelSpec: &pb.ModelSpec{Name: "none"}})
		if status.Code(err) == codes.NotFound {
			return nil // answered: no such model
		}
		return err
	})
}

// readyLoader loads a version whose folder holds a file "ok", and fails otherwise; its
// servables answer Predict with their version.
type readyLoader struct{}

type versionServable struct{ v int64 }

func (readyLoader) Load(_ context.Context, _, dir string, v int64) (Servable, error) {
	if _, err := os.Stat(filepath.Join(dir, "ok")); err != nil {
		return nil, fmt.Errorf("version %d is not ready: %w", v, err)
	}
	return versionServable{v}, nil
}

func (s versionServable) Predict(context.Context, *pb.PredictRequest) (*pb.PredictResponse, error) {
	return &pb.PredictResponse{Outputs: map[string]*tfcorepb.TensorProto{"v": {FloatVal: []float32{float32(s.v)}}}}, nil
}

// TestFakeWithLoader: with a Loader a version is AVAILABLE once loaded, Predict reaches the
// newest AVAILABLE version's servable (or the one asked), a version that fails to load ends
// with the reason in its status while the previous one stays AVAILABLE, and loads later
// once its folder is ready; without a Loader, Predict is UNIMPLEMENTED.
func TestFakeWithLoader(t *testing.T) {
	base := versionDirs(t, t.TempDir(), 1, 2)
	if err := os.WriteFile(filepath.Join(base, "1", "ok"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := &pb.ModelServerConfig{Config: &pb.ModelServerConfig_ModelConfigList{ModelConfigList: &pb.ModelConfigList{Config: []*pb.ModelConfig{{
		Name: "m", BasePath: base,
		ModelVersionPolicy: &pb.FileSystemStoragePathSourceConfig_ServableVersionPolicy{PolicyChoice: &pb.FileSystemStoragePathSourceConfig_ServableVersionPolicy_All_{All: &pb.FileSystemStoragePathSourceConfig_ServableVersionPolicy_All{}}},
	}}}}}
	f, mon := startFake(t, FakeOptions{Config: cfg, Step: 5 * time.Millisecond, FileSystemPollWait: 20 * time.Millisecond, Loader: readyLoader{}})
	deadline := time.Now().Add(10 * time.Second)
	var st []*pb.ModelVersionStatus
	for {
		list, err := mon.GetModelStatus(testCtx(t), Spec("m"))
		if err == nil && len(list) == 2 && list[0].GetState() == available && list[1].GetState() == end {
			st = list
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("states %v, %v; want 1 AVAILABLE, 2 END", list, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if msg := st[1].GetStatus().GetErrorMessage(); st[1].GetStatus().GetErrorCode() == tfcorepb.Code_OK || !strings.Contains(msg, "version 2 is not ready") {
		t.Errorf("the failed version's status %v does not say why", st[1].GetStatus())
	}
	predict := func(spec *pb.ModelSpec) (float32, error) {
		resp, err := f.Predict(testCtx(t), &pb.PredictRequest{ModelSpec: spec})
		if err != nil {
			return 0, err
		}
		if resp.GetModelSpec().GetVersion().GetValue() != int64(resp.GetOutputs()["v"].GetFloatVal()[0]) {
			t.Errorf("response spec %v for the servable of version %v", resp.GetModelSpec(), resp.GetOutputs()["v"])
		}
		return resp.GetOutputs()["v"].GetFloatVal()[0], nil
	}
	if v, err := predict(Spec("m")); err != nil || v != 1 {
		t.Errorf("Predict: version %v, %v; want 1", v, err)
	}
	// Version 2 becomes ready: a rescan loads it, and Predict moves to it.
	if err := os.WriteFile(filepath.Join(base, "2", "ok"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		list, err := mon.GetModelStatus(testCtx(t), Spec("m"))
		if err == nil && len(list) == 2 && list[0].GetState() == available && list[1].GetState() == available &&
			list[1].GetStatus().GetErrorCode() == tfcorepb.Code_OK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("version 2 did not load once ready: %v, %v", list, err)
		}
	}
	if v, err := predict(Spec("m")); err != nil || v != 2 {
		t.Errorf("Predict after version 2 loaded: version %v, %v; want 2", v, err)
	}
	if v, err := predict(&pb.ModelSpec{Name: "m", VersionChoice: &pb.ModelSpec_Version{Version: wrapperspb.Int64(1)}}); err != nil || v != 1 {
		t.Errorf("Predict of version 1: %v, %v", v, err)
	}
	if _, err := predict(Spec("other")); status.Code(err) != codes.NotFound {
		t.Errorf("Predict of an unknown model: %v", err)
	}
	plain, _ := startFake(t, FakeOptions{Config: cfg, Step: 5 * time.Millisecond})
	if _, err := plain.Predict(testCtx(t), &pb.PredictRequest{ModelSpec: Spec("m")}); status.Code(err) != codes.Unimplemented {
		t.Errorf("Predict without a Loader: %v, want Unimplemented", err)
	}
}
