package agent

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/monolith-go/monolith/internal/tlsconf/tlstest"
	"github.com/monolith-go/monolith/internal/zk"
	"github.com/monolith-go/monolith/internal/zktest"
	pb "github.com/monolith-go/monolith/schemas/agentpb"
	"github.com/monolith-go/monolith/serving/config"
	"github.com/monolith-go/monolith/serving/datadef"
	"github.com/monolith-go/monolith/serving/replica"
)

// tableReplicas is a v1 ReplicaSource over fixed data keyed "idc:cluster/st:task".
type tableReplicas map[string][]string

func (r tableReplicas) GetAllReplicas(st, idc, cluster string) map[string][]string {
	out := map[string][]string{}
	for k, v := range r {
		loc, task, _ := cutLast(k, "/")
		if name, _, _ := cutLast(task, ":"); name != st {
			continue
		}
		if idc != "" && cluster != "" && loc != idc+":"+cluster {
			continue
		}
		out[k] = v
	}
	return out
}

func (r tableReplicas) GetReplicas(st string, task int, idc, cluster string) []string {
	var out []string
	for k, v := range r.GetAllReplicas(st, idc, cluster) {
		if _, t, _ := cutLast(k, "/"); t == fmt.Sprintf("%s:%d", st, task) {
			out = append(out, v...)
		}
	}
	return out
}

func cutLast(s, sep string) (string, string, bool) {
	for i := len(s) - len(sep); i >= 0; i-- {
		if s[i:i+len(sep)] == sep {
			return s[:i], s[i+len(sep):], true
		}
	}
	return "", s, false
}

func serve(t *testing.T, o ServiceOptions) pb.AgentServiceClient {
	t.Helper()
	s, err := NewService(o)
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	t.Cleanup(func() { s.Stop(context.Background()); <-s.Done() })
	cc, err := grpc.NewClient(s.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return pb.NewAgentServiceClient(cc)
}

func callCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func flatten(resp *pb.HeartBeatResponse) map[string][]string {
	m := map[string][]string{}
	for k, v := range resp.GetAddresses() {
		m[k] = v.GetAddress()
	}
	return m
}

// TestServiceV1DCAware ports agent_service_test.py: a dc_aware v1 agent with 20 PS tasks
// of 2 replicas answers 20 HeartBeat keys "ps:N" and 2 replicas for GetReplicas(PS, 1).
func TestServiceV1DCAware(t *testing.T) {
	src := tableReplicas{}
	for task := range 20 {
		for r := range 2 {
			k := fmt.Sprintf("lf:default/ps:%d", task)
			src[k] = append(src[k], fmt.Sprintf("10.0.0.%d:%d", r+1, 8500+task))
		}
	}
	src["hl:default/ps:0"] = []string{"10.1.0.1:8500"} // another data centre
	c := serve(t, ServiceOptions{Version: 1, Replicas: src, IDC: "lf", Cluster: "default", DCAware: true})
	hb, err := c.HeartBeat(callCtx(t), &pb.HeartBeatRequest{ServerType: pb.ServerType_PS})
	if err != nil {
		t.Fatal(err)
	}
	got := flatten(hb)
	if len(got) != 20 {
		t.Errorf("HeartBeat has %d keys, want 20: %v", len(got), slices.Sorted(maps.Keys(got)))
	}
	if want := []string{"10.0.0.1:8501", "10.0.0.2:8501"}; !slices.Equal(got["ps:1"], want) {
		t.Errorf(`HeartBeat["ps:1"] = %q, want %q`, got["ps:1"], want)
	}
	gr, err := c.GetReplicas(callCtx(t), &pb.GetReplicasRequest{ServerType: pb.ServerType_PS, Task: 1})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(gr.GetAddressList().GetAddress()); n != 2 {
		t.Errorf("GetReplicas(PS, 1) has %d addresses, want 2", n)
	}
	res, err := c.GetResource(callCtx(t), &pb.GetResourceRequest{})
	if err != nil || res.GetAddress() != "" || res.GetMemory() != 0 {
		t.Errorf("v1 GetResource = %v, %v; want an empty message", res, err)
	}
	if _, err := c.HeartBeat(callCtx(t), &pb.HeartBeatRequest{ServerType: 7}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("HeartBeat(server_type 7): %v, want InvalidArgument", err)
	}
}

// TestMergeDCAware pins S8: the replicas of one task in several data centres are merged,
// each address once, where the reference let one data centre overwrite the other.
func TestMergeDCAware(t *testing.T) {
	for _, tc := range []struct {
		in, want map[string][]string
	}{
		{map[string][]string{"lf:a/ps:0": {"x", "y"}, "hl:b/ps:0": {"z", "x"}}, map[string][]string{"ps:0": {"z", "x", "y"}}},
		{map[string][]string{"ps:1": {"a"}}, map[string][]string{"ps:1": {"a"}}},
		{map[string][]string{"lf:a/dense:0": {}}, map[string][]string{"dense:0": {}}},
		{map[string][]string{}, map[string][]string{}},
	} {
		if got := mergeDCAware(tc.in); !maps.EqualFunc(got, tc.want, slices.Equal) {
			t.Errorf("mergeDCAware(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

// TestServiceV3 answers HeartBeat from the address function whatever the server type, and
// refuses GetReplicas with UNIMPLEMENTED (the reference raised, seen as UNKNOWN).
func TestServiceV3(t *testing.T) {
	addrs := map[string][]string{"m:entry": {"h:1"}, "m:ps_0": {"h:1", "h:2"}}
	c := serve(t, ServiceOptions{Version: 3, Addrs: func() map[string][]string { return addrs },
		Resource: func(context.Context) (*pb.GetResourceResponse, error) { return nil, errors.New("no memory figure") }})
	for _, st := range []pb.ServerType{pb.ServerType_PS, pb.ServerType_DENSE} {
		hb, err := c.HeartBeat(callCtx(t), &pb.HeartBeatRequest{ServerType: st})
		if err != nil {
			t.Fatal(err)
		}
		if got := flatten(hb); !maps.EqualFunc(got, addrs, slices.Equal) {
			t.Errorf("HeartBeat(%v) = %v, want %v", st, got, addrs)
		}
	}
	_, err := c.GetReplicas(callCtx(t), &pb.GetReplicasRequest{})
	if status.Code(err) != codes.Unimplemented {
		t.Errorf("GetReplicas on v3: %v, want Unimplemented", err)
	}
	if _, err := c.GetResource(callCtx(t), &pb.GetResourceRequest{}); status.Code(err) != codes.Internal {
		t.Errorf("GetResource with a failing source: %v, want Internal", err)
	}
}

// TestNewServiceRejects: a version without its source, or an unknown version, is refused.
func TestNewServiceRejects(t *testing.T) {
	for _, o := range []ServiceOptions{{Version: 1}, {Version: 2}, {Version: 3}, {Version: 4, Addrs: func() map[string][]string { return nil }}} {
		if s, err := NewService(o); err == nil {
			s.Stop(context.Background())
			t.Errorf("NewService(version %d without its source) succeeded", o.Version)
		}
	}
}

// TestServiceV1Watcher is agent_service_test.py on a real ZooKeeper: 20 PS tasks with two
// AVAILABLE replicas each under a dc_aware prefix, watched by serving/replica's Watcher;
// HeartBeat(PS) answers 20 keys and GetReplicas(PS, 1) two addresses.
func TestServiceV1Watcher(t *testing.T) {
	srv := zktest.Start(t)
	ctx := context.Background()
	c, err := zk.Connect(ctx, zk.Options{Servers: srv.Servers(), SessionTimeout: zktest.SessionTimeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	for task := range 20 {
		for r := 1; r <= 2; r++ {
			rm := datadef.NewReplicaMeta()
			rm.Address, rm.Stat = datadef.Some(fmt.Sprintf("10.0.%d.%d:8500", task, r)), datadef.ModelStateAvailable
			if err := c.CreateOrSet(ctx, fmt.Sprintf("/gip/service/m/lf:default/ps:%d/%d", task, r), rm.Serialize()); err != nil {
				t.Fatal(err)
			}
		}
	}
	cfg := config.Default()
	cfg.BZID, cfg.BaseName, cfg.DCAware = "gip", "m", true
	w := replica.NewWatcher(c, cfg, nil)
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	cl := serve(t, ServiceOptions{Version: 1, Replicas: w, IDC: "lf", Cluster: "default", DCAware: true})
	eventually(t, func() bool {
		hb, err := cl.HeartBeat(callCtx(t), &pb.HeartBeatRequest{ServerType: pb.ServerType_PS})
		return err == nil && len(hb.GetAddresses()) == 20 && len(hb.GetAddresses()["ps:19"].GetAddress()) == 2
	}, func() string { return "HeartBeat(PS) never showed 20 tasks of 2 replicas" })
	gr, err := cl.GetReplicas(callCtx(t), &pb.GetReplicasRequest{ServerType: pb.ServerType_PS, Task: 1})
	if err != nil || !slices.Equal(gr.GetAddressList().GetAddress(), []string{"10.0.1.1:8500", "10.0.1.2:8500"}) {
		t.Errorf("GetReplicas(PS, 1) = %v, %v", gr, err)
	}
}

// TestServiceTLS: the AgentService serves mutual TLS when asked: a client with a
// certificate of the CA is answered, plaintext and foreign certificates are refused.
func TestServiceTLS(t *testing.T) {
	files := tlstest.New(t)
	st, err := files.Good.Server()
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewService(ServiceOptions{Version: 3, Addrs: func() map[string][]string { return nil }, TLS: st})
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	t.Cleanup(func() { s.Stop(context.Background()); <-s.Done() })
	tlstest.Check(t, files, s.Addr(), func(ctx context.Context, cc *grpc.ClientConn) error {
		_, err := pb.NewAgentServiceClient(cc).HeartBeat(ctx, &pb.HeartBeatRequest{})
		return err
	})
}
