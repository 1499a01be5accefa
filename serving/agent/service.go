package agent

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sort"
	"strings"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/monolith-go/monolith/internal/tlsconf"
	pb "github.com/monolith-go/monolith/schemas/agentpb"
	"github.com/monolith-go/monolith/serving/hostutil"
)

// ReplicaSource is what a v1 agent answers from: the ReplicaWatcher's view of the replicas
// under its service prefix. serverType is "ps", "entry" or "dense"; an empty idc or cluster
// means every data centre.
type ReplicaSource interface {
	// GetReplicas lists the AVAILABLE addresses of one task.
	GetReplicas(serverType string, task int, idc, cluster string) []string
	// GetAllReplicas maps every task ("ps:3", or "idc:cluster/ps:3" when dc_aware) to its
	// AVAILABLE addresses.
	GetAllReplicas(serverType, idc, cluster string) map[string][]string
}

// ServiceOptions configure an AgentService server. Exactly the source of Version is used:
// Replicas for 1, Addrs for 3. Version 2 (the reference's ZKMirror agent) cannot be
// started, in the reference as here (agent.py raises "not support"), and is not ported.
type ServiceOptions struct {
	// Version is the agent version, 1 or 3 (the reference's conf is None counts as 1).
	Version int
	// Replicas answers a v1 agent.
	Replicas ReplicaSource
	// IDC and Cluster restrict a v1 agent's answers to its own data centre ("" = all).
	IDC, Cluster string
	// DCAware is the v1 dc_aware setting: HeartBeat keys lose their "idc:cluster/" level and
	// the replicas of one task in several data centres are merged (S8).
	DCAware bool
	// Addrs answers a v3 agent's HeartBeat: "{model}:{sub_graph}" → addresses.
	Addrs func() map[string][]string
	// Resource answers GetResource for version 3 (version 1 answers an empty message). Nil
	// answers an empty message too.
	Resource func(ctx context.Context) (*pb.GetResourceResponse, error)
	// ReusePort binds with SO_REUSEPORT, as the reference's Python gRPC server does: the
	// dense MPS agents of one host share the agent port.
	ReusePort bool
	// Listen is the address to bind, "127.0.0.1:0" when empty (the reference binds every
	// interface, "[::]:port"; the entry TF Serving on the same host dials localhost).
	Listen string
	// Logger receives one debug line per call; nil discards.
	Logger *slog.Logger
	// TLS serves gRPC over TLS (internal/tlsconf; nil: plaintext).
	TLS *tls.Config
}

// Service is the AgentService gRPC server (§1.2).
type Service struct {
	pb.UnimplementedAgentServiceServer
	opts ServiceOptions
	log  *slog.Logger
	lis  net.Listener
	srv  *grpc.Server

	stopOnce sync.Once
	done     chan struct{}
	err      error
}

// NewService checks opts and binds the listener; Serve starts answering.
func NewService(opts ServiceOptions) (*Service, error) {
	switch opts.Version {
	case 1:
		if opts.Replicas == nil {
			return nil, errors.New("serving/agent: a v1 AgentService needs a ReplicaSource")
		}
	case 3:
		if opts.Addrs == nil {
			return nil, errors.New("serving/agent: a v3 AgentService needs an address function")
		}
	default:
		return nil, fmt.Errorf("serving/agent: agent_version %d is not 1 or 3", opts.Version)
	}
	if opts.Listen == "" {
		opts.Listen = "127.0.0.1:0"
	}
	lis, err := hostutil.Listen(context.Background(), opts.Listen, opts.ReusePort)
	if err != nil {
		return nil, fmt.Errorf("serving/agent: AgentService listen on %s: %w", opts.Listen, err)
	}
	s := &Service{opts: opts, log: orDiscard(opts.Logger), lis: lis, done: make(chan struct{})}
	s.srv = grpc.NewServer(tlsconf.ServerOption(opts.TLS))
	pb.RegisterAgentServiceServer(s.srv, s)
	return s, nil
}

// Addr is the bound address (host:port).
func (s *Service) Addr() string { return s.lis.Addr().String() }

// Port is the bound port.
func (s *Service) Port() int { return s.lis.Addr().(*net.TCPAddr).Port }

// Start serves in a goroutine until Stop.
func (s *Service) Start() {
	go func() {
		err := s.srv.Serve(s.lis)
		if errors.Is(err, grpc.ErrServerStopped) {
			err = nil
		}
		s.err = err
		close(s.done)
	}()
}

// Done is closed when the server has stopped serving.
func (s *Service) Done() <-chan struct{} { return s.done }

// Stop stops the server: calls in flight may finish until ctx ends. It is idempotent.
func (s *Service) Stop(ctx context.Context) {
	s.stopOnce.Do(func() {
		stopped := make(chan struct{})
		go func() { s.srv.GracefulStop(); close(stopped) }()
		select {
		case <-stopped:
		case <-ctx.Done():
			s.srv.Stop()
			<-stopped
		}
		_ = s.lis.Close()
	})
}

// serverTypeName is the lower-case name of the enum, as the reference compares it.
func serverTypeName(st pb.ServerType) (string, error) {
	name, ok := pb.ServerType_name[int32(st)]
	if !ok {
		return "", status.Errorf(codes.InvalidArgument, "unknown server_type %d", int32(st))
	}
	return strings.ToLower(name), nil
}

// GetReplicas answers the replicas of one task (v1); a v3 agent has no such view.
func (s *Service) GetReplicas(_ context.Context, req *pb.GetReplicasRequest) (*pb.GetReplicasResponse, error) {
	st, err := serverTypeName(req.GetServerType())
	if err != nil {
		return nil, err
	}
	var addrs []string
	switch s.opts.Version {
	case 1:
		addrs = s.opts.Replicas.GetReplicas(st, int(req.GetTask()), s.opts.IDC, s.opts.Cluster)
	default:
		return nil, status.Error(codes.Unimplemented, "not implemented: GetReplicas for agent v3 (use HeartBeat)")
	}
	s.log.Debug("GetReplicas", "server_type", st, "task", req.GetTask(), "addresses", addrs)
	return &pb.GetReplicasResponse{AddressList: &pb.AddressList{Address: addrs}}, nil
}

// HeartBeat answers every address the entry server may call (§1.2): per task for v1, per
// "{model}:{sub_graph}" for v3.
func (s *Service) HeartBeat(_ context.Context, req *pb.HeartBeatRequest) (*pb.HeartBeatResponse, error) {
	st, err := serverTypeName(req.GetServerType())
	if err != nil {
		return nil, err
	}
	var m map[string][]string
	switch s.opts.Version {
	case 1:
		m = s.opts.Replicas.GetAllReplicas(st, s.opts.IDC, s.opts.Cluster)
		if s.opts.DCAware {
			m = mergeDCAware(m)
		}
	default:
		m = s.opts.Addrs()
	}
	resp := &pb.HeartBeatResponse{Addresses: make(map[string]*pb.AddressList, len(m))}
	for k, addrs := range m {
		resp.Addresses[k] = &pb.AddressList{Address: addrs}
	}
	s.log.Debug("HeartBeat", "server_type", st, "keys", len(m))
	return resp, nil
}

// mergeDCAware drops the "idc:cluster/" level of dc_aware keys and merges the replicas
// of one task from several data centres (S8: a union in key order, each address once;
// the reference let the last data centre overwrite the others).
func mergeDCAware(m map[string][]string) map[string][]string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make(map[string][]string, len(m))
	seen := make(map[string]map[string]bool, len(m))
	for _, k := range keys {
		short := k[strings.LastIndexByte(k, '/')+1:]
		if seen[short] == nil {
			seen[short] = map[string]bool{}
			out[short] = []string{}
		}
		for _, a := range m[k] {
			if !seen[short][a] {
				seen[short][a] = true
				out[short] = append(out[short], a)
			}
		}
	}
	return out
}

// GetResource answers this host's resources (v3) or an empty message (v1).
func (s *Service) GetResource(ctx context.Context, _ *pb.GetResourceRequest) (*pb.GetResourceResponse, error) {
	if s.opts.Version == 1 || s.opts.Resource == nil {
		return &pb.GetResourceResponse{}, nil
	}
	r, err := s.opts.Resource(ctx)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "GetResource: %v", err)
	}
	return r, nil
}

func orDiscard(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.New(slog.DiscardHandler)
	}
	return l
}
