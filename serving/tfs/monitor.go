package tfs

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/monolith-go/monolith/schemas/tfcorepb"
	pb "github.com/monolith-go/monolith/schemas/tfservingpb"
)

// ErrReloadRefused is wrapped by the error of Monitor.ReloadConfig when the server answers
// the reload with a non-OK status.
var ErrReloadRefused = errors.New("serving/tfs: reload config refused")

// NoVersion is the version Monitor.ModelStatus reports when it has no version to report.
const NoVersion = -1

// Monitor is a gRPC client of one TF Serving server (TFSMonitor of §1.13, and the status
// part of TFSWrapper of §1.12). Its methods are safe for concurrent use.
type Monitor struct {
	addr   string
	cc     *grpc.ClientConn // nil when built over a caller's connection
	models pb.ModelServiceClient
	pred   pb.PredictionServiceClient
}

// DialMonitor makes a client of the TF Serving at addr (host:port), insecure unless opts
// say otherwise. The connection is made lazily; Close releases it.
func DialMonitor(addr string, opts ...grpc.DialOption) (*Monitor, error) {
	opts = append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, opts...)
	cc, err := grpc.NewClient(addr, opts...)
	if err != nil {
		return nil, fmt.Errorf("serving/tfs: dial TF Serving %s: %w", addr, err)
	}
	m := NewMonitor(cc, addr)
	m.cc = cc
	return m, nil
}

// NewMonitor is a Monitor over a connection the caller owns; addr names it in errors.
func NewMonitor(cc grpc.ClientConnInterface, addr string) *Monitor {
	return &Monitor{addr: addr, models: pb.NewModelServiceClient(cc), pred: pb.NewPredictionServiceClient(cc)}
}

// Addr is the server's address.
func (m *Monitor) Addr() string { return m.addr }

// Close closes the connection made by DialMonitor (nothing for NewMonitor).
func (m *Monitor) Close() error {
	if m.cc == nil {
		return nil
	}
	return m.cc.Close()
}

// Spec is a ModelSpec of the latest version(s) of a model.
func Spec(name string) *pb.ModelSpec { return &pb.ModelSpec{Name: name} }

// VersionSpec is a ModelSpec of one version.
func VersionSpec(name string, version int64) *pb.ModelSpec {
	return &pb.ModelSpec{Name: name, VersionChoice: &pb.ModelSpec_Version{Version: wrapperspb.Int64(version)}}
}

// LabelSpec is a ModelSpec of a labelled version.
func LabelSpec(name, label string) *pb.ModelSpec {
	return &pb.ModelSpec{Name: name, VersionChoice: &pb.ModelSpec_VersionLabel{VersionLabel: label}}
}

// GetModelStatus calls ModelService.GetModelStatus. The error (a gRPC status, see
// status.Code) names the address and the model.
func (m *Monitor) GetModelStatus(ctx context.Context, spec *pb.ModelSpec) ([]*pb.ModelVersionStatus, error) {
	resp, err := m.models.GetModelStatus(ctx, &pb.GetModelStatusRequest{ModelSpec: spec})
	if err != nil {
		return nil, m.wrap("get model status", spec.GetName(), err)
	}
	return resp.GetModelVersionStatus(), nil
}

// GetModelMetadata calls PredictionService.GetModelMetadata for the given fields
// ("signature_def" when none are given).
func (m *Monitor) GetModelMetadata(ctx context.Context, spec *pb.ModelSpec, fields ...string) (*pb.GetModelMetadataResponse, error) {
	if len(fields) == 0 {
		fields = []string{"signature_def"}
	}
	resp, err := m.pred.GetModelMetadata(ctx, &pb.GetModelMetadataRequest{ModelSpec: spec, MetadataField: fields})
	if err != nil {
		return nil, m.wrap("get model metadata", spec.GetName(), err)
	}
	return resp, nil
}

// Predict calls PredictionService.Predict with the inputs named by alias.
func (m *Monitor) Predict(ctx context.Context, spec *pb.ModelSpec, inputs map[string]*tfcorepb.TensorProto) (*pb.PredictResponse, error) {
	resp, err := m.pred.Predict(ctx, &pb.PredictRequest{ModelSpec: spec, Inputs: inputs})
	if err != nil {
		return nil, m.wrap("predict", spec.GetName(), err)
	}
	return resp, nil
}

// ReloadConfig calls ModelService.HandleReloadConfigRequest with cfg. A non-OK answer is
// an error matching ErrReloadRefused with the server's code and message.
func (m *Monitor) ReloadConfig(ctx context.Context, cfg *pb.ModelServerConfig) error {
	resp, err := m.models.HandleReloadConfigRequest(ctx, &pb.ReloadConfigRequest{Config: cfg})
	if err != nil {
		return fmt.Errorf("serving/tfs: reload config on TF Serving %s (models %q): %w", m.addr, ModelNames(cfg), err)
	}
	if st := resp.GetStatus(); st.GetErrorCode() != tfcorepb.Code_OK {
		return fmt.Errorf("%w by TF Serving %s: %s: %s", ErrReloadRefused, m.addr, st.GetErrorCode(), st.GetErrorMessage())
	}
	return nil
}

func (m *Monitor) wrap(op, model string, err error) error {
	return fmt.Errorf("serving/tfs: %s of model %q from TF Serving %s: %w", op, model, m.addr, err)
}

// ModelStatus is the status of a model as the agent reports it (§1.12): the newest
// AVAILABLE version, else the newest version. It never fails on the server's account: an
// RPC error is UNKNOWN with the gRPC code and message, and an empty answer is UNKNOWN
// with NOT_FOUND (S11), both at version NoVersion. Only the end of ctx is an error.
func (m *Monitor) ModelStatus(ctx context.Context, name string) (*pb.ModelVersionStatus, error) {
	list, err := m.GetModelStatus(ctx, Spec(name))
	if err != nil {
		if ctx.Err() != nil {
			return nil, err
		}
		st := status.Convert(errors.Unwrap(err))
		return &pb.ModelVersionStatus{Version: NoVersion, State: pb.ModelVersionStatus_UNKNOWN,
			Status: &pb.StatusProto{ErrorCode: tfcorepb.Code(st.Code()), ErrorMessage: st.Message()}}, nil
	}
	return PickStatus(name, list), nil
}

// PickStatus applies §1.12's choice to a status list: the newest AVAILABLE version, else
// the newest; an empty list is UNKNOWN with NOT_FOUND at version NoVersion (S11).
func PickStatus(name string, list []*pb.ModelVersionStatus) *pb.ModelVersionStatus {
	if len(list) == 0 {
		return &pb.ModelVersionStatus{Version: NoVersion, State: pb.ModelVersionStatus_UNKNOWN,
			Status: &pb.StatusProto{ErrorCode: tfcorepb.Code_NOT_FOUND, ErrorMessage: name + " is not found"}}
	}
	sorted := slices.Clone(list)
	slices.SortStableFunc(sorted, func(a, b *pb.ModelVersionStatus) int { return cmp.Compare(a.GetVersion(), b.GetVersion()) })
	for i := len(sorted) - 1; i >= 0; i-- {
		if sorted[i].GetState() == pb.ModelVersionStatus_AVAILABLE {
			return sorted[i]
		}
	}
	return sorted[len(sorted)-1]
}

// ModelsStatus is ModelStatus for every name (the sub-graphs of a model, or the names of
// a config: see ModelNames), keyed by name.
func (m *Monitor) ModelsStatus(ctx context.Context, names []string) (map[string]*pb.ModelVersionStatus, error) {
	out := make(map[string]*pb.ModelVersionStatus, len(names))
	for _, n := range names {
		st, err := m.ModelStatus(ctx, n)
		if err != nil {
			return nil, err
		}
		out[n] = st
	}
	return out, nil
}

// WaitState polls ModelStatus every interval until the model's status reaches state and
// returns that status; it fails when ctx ends, with the last status seen, and at once when
// interval is not positive.
func (m *Monitor) WaitState(ctx context.Context, name string, state pb.ModelVersionStatus_State, interval time.Duration) (*pb.ModelVersionStatus, error) {
	if interval <= 0 {
		return nil, fmt.Errorf("%w: wait for model %q: poll interval %v is not positive", ErrInvalidOptions, name, interval)
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	var last *pb.ModelVersionStatus
	for {
		st, err := m.ModelStatus(ctx, name)
		if err == nil && st.GetState() == state {
			return st, nil
		}
		if st != nil {
			last = st
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("serving/tfs: wait for model %q on TF Serving %s to be %s (last: %s version %d): %w",
				name, m.addr, state, last.GetState(), last.GetVersion(), ctx.Err())
		case <-t.C:
		}
	}
}
