package server

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/monolith-go/monolith/schemas/pspb"
)

const fuzzMaxFids = 512

// fuzzServer is a server that is never served: the fuzz targets call its handlers.
func fuzzServer(f *testing.F) *Server {
	o := testOptions(f)
	o.MaxFidsPerRequest = fuzzMaxFids
	s, err := New(o)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { s.Close() })
	return s
}

// boundFids keeps the tables small over a long fuzz run (negative fids stay negative).
func boundFids(fids []int64) {
	for i := range fids {
		fids[i] %= 4096
	}
}

func addSeeds(f *testing.F, msgs ...proto.Message) {
	for _, m := range msgs {
		b, err := proto.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
}

func checkLimit(t *testing.T, err error, n int) bool {
	t.Helper()
	if n > fuzzMaxFids {
		if status.Code(err) != codes.ResourceExhausted {
			t.Fatalf("%d fids: %v, want ResourceExhausted", n, err)
		}
		return false
	}
	if err != nil {
		t.Fatalf("%d fids: %v", n, err)
	}
	return true
}

func checkLookup(t *testing.T, s *Server, req *pspb.LookupRequest, resp *pspb.LookupResponse) {
	t.Helper()
	tb := s.byName[req.GetTable()]
	valid := tb != nil && req.GetDimSize() > 0 && int(req.GetDimSize()) == tb.Dim()
	if !valid {
		if resp.StatusCode != 1 || resp.ErrorMessage == "" || len(resp.Embeddings) != 0 {
			t.Fatalf("invalid lookup answered %v", resp)
		}
		return
	}
	n := len(req.GetFids())
	if resp.StatusCode != 0 {
		t.Fatalf("valid lookup failed: %s", resp.ErrorMessage)
	}
	if len(resp.Embeddings) != n*tb.Dim() {
		t.Fatalf("%d floats for %d fids of dim %d", len(resp.Embeddings), n, tb.Dim())
	}
	if req.GetWantFound() != (resp.Found != nil) || (resp.Found != nil && len(resp.Found) != n) {
		t.Fatalf("found %v for %d fids (want_found %v)", resp.Found, n, req.GetWantFound())
	}
	if resp.NumFound < 0 || resp.NumInitialized < 0 || resp.NumFound+resp.NumInitialized > int64(n) {
		t.Fatalf("found %d + initialized %d > %d fids", resp.NumFound, resp.NumInitialized, n)
	}
	if req.GetCreateIfMissing() && resp.NumFound+resp.NumInitialized != int64(n) {
		t.Fatalf("create_if_missing without a filter: found %d + initialized %d != %d", resp.NumFound, resp.NumInitialized, n)
	}
	if !req.GetCreateIfMissing() && resp.NumInitialized != 0 {
		t.Fatalf("read-only lookup initialized %d", resp.NumInitialized)
	}
}

func checkApply(t *testing.T, s *Server, req *pspb.ApplyGradientsRequest, resp *pspb.ApplyGradientsResponse) {
	t.Helper()
	tb := s.byName[req.GetTable()]
	valid := tb != nil && req.GetDimSize() > 0 && int(req.GetDimSize()) == tb.Dim() &&
		len(req.GetGradients()) == len(req.GetFids())*tb.Dim() &&
		(len(req.GetLearningRates()) == 0 || len(req.GetLearningRates()) == tb.Segments()) &&
		nonFinite(req.GetGradients()) < 0 && nonFinite(req.GetLearningRates()) < 0 &&
		checkClock(req.GetGlobalStep(), req.GetUpdateTime(), time.Now()) == "" &&
		len(req.GetRequestId()) <= s.opts.MaxRequestIDBytes
	if !valid {
		if resp.StatusCode != 1 || resp.ErrorMessage == "" || resp.NumUpdated != 0 {
			t.Fatalf("invalid apply answered %v", resp)
		}
		return
	}
	if resp.StatusCode != 0 {
		t.Fatalf("valid apply failed: %s", resp.ErrorMessage)
	}
	if resp.Duplicate {
		if req.GetRequestId() == "" || resp.NumUpdated != 0 || resp.NumNotFound != 0 || resp.NumCreated != 0 {
			t.Fatalf("duplicate answer %v for request id %q", resp, req.GetRequestId())
		}
		return
	}
	unique := map[int64]bool{}
	for _, f := range req.GetFids() {
		unique[f] = true
	}
	if resp.NumUpdated+resp.NumNotFound != int64(len(unique)) || resp.NumCreated > resp.NumUpdated || resp.NumCreated < 0 || resp.NumNotFound < 0 {
		t.Fatalf("apply of %d unique fids: %v", len(unique), resp)
	}
}

func FuzzLookup(f *testing.F) {
	s := fuzzServer(f)
	addSeeds(f,
		&pspb.LookupRequest{Table: "emb", DimSize: 4, Fids: []int64{1, 2, 1, -3}, WantFound: true},
		&pspb.LookupRequest{Table: "two", DimSize: 3, Fids: []int64{7, 7}, CreateIfMissing: true},
		&pspb.LookupRequest{Table: "emb", DimSize: 3, Fids: []int64{1}},
		&pspb.LookupRequest{Table: "nope", DimSize: -1},
		&pspb.LookupRequest{Table: "emb", DimSize: 4, Fids: make([]int64, fuzzMaxFids+1)},
	)
	f.Fuzz(func(t *testing.T, data []byte) {
		req := &pspb.LookupRequest{}
		if proto.Unmarshal(data, req) != nil {
			return
		}
		boundFids(req.Fids)
		resp, err := s.Lookup(context.Background(), req)
		if checkLimit(t, err, len(req.GetFids())) {
			checkLookup(t, s, req, resp)
		}
	})
}

func FuzzApplyGradients(f *testing.F) {
	s := fuzzServer(f)
	addSeeds(f,
		&pspb.ApplyGradientsRequest{Table: "emb", DimSize: 4, Fids: []int64{1, 1}, Gradients: []float32{1, 2, 3, 4, 5, 6, 7, 8}, GlobalStep: 3},
		&pspb.ApplyGradientsRequest{Table: "two", DimSize: 3, Fids: []int64{-9}, Gradients: []float32{1, 2, 3}, LearningRates: []float32{0.1, 0.2}, UpdateTime: 1700000000},
		&pspb.ApplyGradientsRequest{Table: "two", DimSize: 3, Fids: []int64{1}, Gradients: []float32{1, 2, 3}, LearningRates: []float32{0.1}},
		&pspb.ApplyGradientsRequest{Table: "emb", DimSize: 4, Fids: []int64{1}, Gradients: []float32{1}},
		&pspb.ApplyGradientsRequest{Table: "emb", DimSize: 0},
		&pspb.ApplyGradientsRequest{Table: "emb", DimSize: 4, Fids: []int64{5}, Gradients: []float32{1, 2, 3, 4}, RequestId: "r1"},
	)
	f.Fuzz(func(t *testing.T, data []byte) {
		req := &pspb.ApplyGradientsRequest{}
		if proto.Unmarshal(data, req) != nil {
			return
		}
		boundFids(req.Fids)
		resp, err := s.ApplyGradients(context.Background(), req)
		if checkLimit(t, err, len(req.GetFids())) {
			checkApply(t, s, req, resp)
		}
	})
}

func FuzzBatchApply(f *testing.F) {
	s := fuzzServer(f)
	addSeeds(f,
		&pspb.BatchApplyGradientsRequest{Requests: []*pspb.ApplyGradientsRequest{
			{Table: "emb", DimSize: 4, Fids: []int64{1, 2}, Gradients: make([]float32, 8)},
			{Table: "two", DimSize: 3, Fids: []int64{1}, Gradients: make([]float32, 3)},
			{Table: "emb", DimSize: 4, Fids: []int64{1}},
			{},
			{Table: "emb", DimSize: 4, Fids: []int64{3}, Gradients: make([]float32, 4), RequestId: "r"},
			{Table: "emb", DimSize: 4, Fids: []int64{3}, Gradients: make([]float32, 4), RequestId: "r"},
		}},
		&pspb.BatchApplyGradientsRequest{},
	)
	f.Fuzz(func(t *testing.T, data []byte) {
		req := &pspb.BatchApplyGradientsRequest{}
		if proto.Unmarshal(data, req) != nil {
			return
		}
		if len(req.Requests) > 64 {
			req.Requests = req.Requests[:64]
		}
		n := 0
		for _, r := range req.Requests {
			boundFids(r.Fids)
			n += len(r.Fids)
		}
		resp, err := s.BatchApplyGradients(context.Background(), req)
		if !checkLimit(t, err, n) {
			return
		}
		if len(resp.Responses) != len(req.Requests) {
			t.Fatalf("%d responses for %d requests", len(resp.Responses), len(req.Requests))
		}
		for i, r := range req.Requests {
			checkApply(t, s, r, resp.Responses[i])
		}
	})
}

// rawCodec sends the fuzzer's bytes as the request message and keeps the reply's bytes:
// the server decodes them with its own codec.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return *(v.(*[]byte)), nil }
func (rawCodec) Unmarshal(b []byte, v any) error {
	*(v.(*[]byte)) = append([]byte(nil), b...)
	return nil
}
func (rawCodec) Name() string { return "proto" }

// FuzzGRPC drives a served PS through gRPC: the fuzzer picks a method of the service and
// the request's bytes, which go through the server's codec, interceptors and handler. The
// server must answer every call (with any status but a crash or UNKNOWN) and keep
// serving: a health check after each call must succeed.
func FuzzGRPC(f *testing.F) {
	o := testOptions(f)
	o.MaxFidsPerRequest = fuzzMaxFids
	r := startWith(f, o, nil)
	methods := pspb.ParameterServer_ServiceDesc.Methods
	for i, m := range []proto.Message{
		&pspb.LookupRequest{Table: "emb", DimSize: 4, Fids: []int64{1, 2}},
		&pspb.ApplyGradientsRequest{Table: "emb", DimSize: 4, Fids: []int64{1}, Gradients: []float32{1, 2, 3, 4}},
		&pspb.BatchLookupRequest{Requests: []*pspb.LookupRequest{{Table: "two", DimSize: 3, Fids: []int64{3}}}},
		&pspb.GlobalStepRequest{Increment: 1, RequestId: "x"},
		&pspb.TrainingBarrierRequest{Op: pspb.TrainingBarrierRequest_WAIT, Index: 3},
		&pspb.GetStatsRequest{IncludeTableStats: true, SlotCountTables: []string{"emb"}},
	} {
		b, err := proto.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		for k := range methods {
			f.Add(uint8(k), b)
		}
		f.Add(uint8(i), []byte{0xff, 0xff, 0xff})
	}
	f.Fuzz(func(t *testing.T, k uint8, data []byte) {
		method := "/" + pspb.ParameterServer_ServiceDesc.ServiceName + "/" + methods[int(k)%len(methods)].MethodName
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		var reply []byte
		err := r.cc.Invoke(ctx, method, &data, &reply, grpc.ForceCodec(rawCodec{}))
		if c := status.Code(err); c == codes.Unknown {
			t.Fatalf("%s: %v", method, err)
		}
		hctx, hcancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer hcancel()
		if _, err := r.stub.HealthCheck(hctx, &pspb.HealthCheckRequest{}); err != nil {
			t.Fatalf("the server stopped answering after %s: %v", method, err)
		}
	})
}
