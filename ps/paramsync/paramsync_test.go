package paramsync

import (
	"context"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/prototext"

	"github.com/monolith-go/monolith/ps/table"
	"github.com/monolith-go/monolith/schemas/pspb"
	pb "github.com/monolith-go/monolith/schemas/tfservingpb"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// recorder is a serving replica that records the pushes it gets; it fails the first
// failFirst calls with UNAVAILABLE.
type recorder struct {
	pb.UnimplementedPredictionServiceServer
	mu        sync.Mutex
	failFirst int
	calls     int
	got       map[int64][]float32 // fid → row, over every push
	reqs      int
}

func (r *recorder) Predict(_ context.Context, req *pb.PredictRequest) (*pb.PredictResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls++
	if r.calls <= r.failFirst {
		return nil, status.Error(codes.Unavailable, "not yet")
	}
	if req.GetModelSpec().GetName() != "m" || req.GetModelSpec().GetSignatureName() != Signature {
		return nil, status.Errorf(codes.InvalidArgument, "spec %v", req.GetModelSpec())
	}
	ids, vals := req.GetInputs()["t_id"].GetInt64Val(), req.GetInputs()["t_value"].GetFloatVal()
	for i, f := range ids {
		r.got[f] = vals[i*2 : i*2+2]
	}
	r.reqs++
	return &pb.PredictResponse{}, nil
}

func serve(t *testing.T, r *recorder) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	pb.RegisterPredictionServiceServer(s, r)
	go func() { _ = s.Serve(lis) }()
	t.Cleanup(s.Stop)
	return lis.Addr().String()
}

func testTable(t *testing.T) *table.Table {
	t.Helper()
	var spec pspb.TableSpec
	if err := prototext.Unmarshal([]byte(`name: "t" config { entry_config { segments { dim_size: 2 init_config { zeros {} } opt_config { sgd { learning_rate: 1 } } } } cuckoo {} } filter { type: NONE }`), &spec); err != nil {
		t.Fatal(err)
	}
	tb, err := table.FromSpec(&spec, 1)
	if err != nil {
		t.Fatal(err)
	}
	fids := []int64{1, 2, 3, 4, 5}
	rows := make([]float32, 10)
	for i := range rows {
		rows[i] = float32(i)
	}
	if _, err := tb.Assign(fids, rows, 0); err != nil {
		t.Fatal(err)
	}
	return tb
}

// TestPush: touched fids go with their current rows; a failed push keeps them for the
// next; too many touched fids push the whole table; large pushes are split.
func TestPush(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tb := testTable(t)
	rec := &recorder{failFirst: 1, got: map[int64][]float32{}}
	p, err := New(Options{Targets: []string{serve(t, rec)}, Model: "m", MaxKeys: 3, Timeout: 5 * time.Second}, []*table.Table{tb})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	p.Touch("t", []int64{2, 4})
	if _, err := p.PushOnce(ctx); err == nil {
		t.Fatal("a push to a failing target succeeded")
	}
	res, err := p.PushOnce(ctx) // the same fids again
	if err != nil || res.Fids != 2 {
		t.Fatalf("retry: %+v, %v", res, err)
	}
	if !slices.Equal(rec.got[2], []float32{2, 3}) || !slices.Equal(rec.got[4], []float32{6, 7}) || len(rec.got) != 2 {
		t.Fatalf("pushed %v", rec.got)
	}
	if res, err := p.PushOnce(ctx); err != nil || res.Fids != 0 {
		t.Fatalf("nothing touched: %+v, %v", res, err)
	}
	// Overflow (4 fids, limit 3): the whole table goes, nothing is dropped.
	p.Touch("t", []int64{1, 3})
	p.Touch("t", []int64{5, 2})
	if res, err := p.PushOnce(ctx); err != nil || res.Fids != 5 || len(rec.got) != 5 {
		t.Fatalf("overflow: %+v, %v; got %d fids", res, err, len(rec.got))
	}
	// Split: rows of 8+8 bytes, parts of at most 40 bytes → 2 rows per part.
	p.o.MaxBytes = 40
	p.Touch("t", []int64{1, 2, 3})
	before := rec.reqs
	if res, err := p.PushOnce(ctx); err != nil || res.Requests != 2 || rec.reqs-before != 2 {
		t.Fatalf("split: %+v, %v, %d requests", res, err, rec.reqs-before)
	}
}
