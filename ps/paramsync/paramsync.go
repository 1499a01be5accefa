// Package paramsync pushes a training PS shard's updated embeddings to serving replicas
// (spec/ps.md §9): touched fids are tracked per table and, every period, their current rows
// go to each target as TF Serving Predict requests with the signature "hashtable_assign".
package paramsync

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc"

	"github.com/monolith-go/monolith/internal/tlsconf"
	"github.com/monolith-go/monolith/ps/table"
	"github.com/monolith-go/monolith/schemas/hashtablepb"
	"github.com/monolith-go/monolith/schemas/tfcorepb"
	pb "github.com/monolith-go/monolith/schemas/tfservingpb"
)

// Signature is the signature of a push, the one the reference's serving PS graph assigns
// with.
const Signature = "hashtable_assign"

// Defaults of Options.
const (
	DefaultEvery    = 10 * time.Second
	DefaultMaxKeys  = 1 << 21 // the reference's MAX_TOUCHED_KEYS
	DefaultTimeout  = 3 * time.Second
	DefaultMaxBytes = 4 << 20 // a request part
)

// Options configure a Pusher.
type Options struct {
	Targets []string // serving replicas (monolith serve), host:port
	Model   string   // the served model's name
	// Every is the push period (default 10 s, the reference's).
	Every time.Duration
	// MaxKeys bounds the touched fids kept per table; beyond it the table is pushed whole at
	// the next cycle instead (decision P8: never drop an update).
	MaxKeys int
	// Timeout bounds each request (default 3 s).
	Timeout time.Duration
	// MaxBytes bounds a request; a push is split into parts of at most this size.
	MaxBytes int
	TLS      *tls.Config
	Log      *slog.Logger
}

// Pusher tracks a shard's touched fids and pushes them. Touch is safe for concurrent use
// with everything else.
type Pusher struct {
	o      Options
	tables []*table.Table
	conns  []*grpc.ClientConn
	stubs  []pb.PredictionServiceClient

	mu      sync.Mutex
	touched map[string]map[int64]struct{}
	full    map[string]bool // overflowed: push the whole table
}

// New dials the targets (lazily) for the given tables.
func New(o Options, tables []*table.Table) (*Pusher, error) {
	if len(o.Targets) == 0 || o.Model == "" {
		return nil, errors.New("paramsync: needs targets and the served model's name")
	}
	if o.Every <= 0 {
		o.Every = DefaultEvery
	}
	if o.MaxKeys <= 0 {
		o.MaxKeys = DefaultMaxKeys
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	p := &Pusher{o: o, tables: tables, touched: map[string]map[int64]struct{}{}, full: map[string]bool{}}
	for _, t := range o.Targets {
		cc, err := grpc.NewClient(t, tlsconf.DialOption(o.TLS),
			grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(32<<20), grpc.MaxCallRecvMsgSize(32<<20)))
		if err != nil {
			p.Close()
			return nil, fmt.Errorf("paramsync: target %q: %w", t, err)
		}
		p.conns, p.stubs = append(p.conns, cc), append(p.stubs, pb.NewPredictionServiceClient(cc))
	}
	return p, nil
}

// Close closes the connections.
func (p *Pusher) Close() {
	for _, cc := range p.conns {
		cc.Close()
	}
}

// Touch records fids of table as updated.
func (p *Pusher) Touch(table string, fids []int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.full[table] {
		return
	}
	set := p.touched[table]
	if set == nil {
		set = map[int64]struct{}{}
		p.touched[table] = set
	}
	for _, f := range fids {
		set[f] = struct{}{}
	}
	if len(set) > p.o.MaxKeys {
		delete(p.touched, table)
		p.full[table] = true
		p.o.Log.Warn("parameter sync: too many touched fids; the next push sends the whole table", "table", table, "limit", p.o.MaxKeys)
	}
}

// take returns and clears the pending work.
func (p *Pusher) take() (map[string]map[int64]struct{}, map[string]bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	t, f := p.touched, p.full
	p.touched, p.full = map[string]map[int64]struct{}{}, map[string]bool{}
	return t, f
}

// giveBack puts work that was not delivered back, to go with the next cycle.
func (p *Pusher) giveBack(touched map[string]map[int64]struct{}, full map[string]bool) {
	for t := range full {
		p.mu.Lock()
		p.full[t] = true
		delete(p.touched, t)
		p.mu.Unlock()
	}
	for t, set := range touched {
		fids := make([]int64, 0, len(set))
		for f := range set {
			fids = append(fids, f)
		}
		p.Touch(t, fids)
	}
}

// Result is what one push did.
type Result struct {
	Fids     int // rows pushed, per target
	Requests int // request parts, per target
	Failed   []string
}

// Run pushes every Every until ctx ends, then once more (bounded by the timeout) so that
// the last updates reach serving.
func (p *Pusher) Run(ctx context.Context) {
	t := time.NewTicker(p.o.Every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.o.Timeout*2)
			_, _ = p.PushOnce(fctx)
			cancel()
			return
		case <-t.C:
			if _, err := p.PushOnce(ctx); err != nil {
				p.o.Log.Warn("parameter sync: push failed; its fids go with the next one", "err", err)
			}
		}
	}
}

// PushOnce pushes the pending updates to every target now. A target that fails gets them
// again at the next push (all targets do: the fids go back to the pending set).
func (p *Pusher) PushOnce(ctx context.Context) (Result, error) {
	touched, full := p.take()
	if len(touched) == 0 && len(full) == 0 {
		return Result{}, nil
	}
	parts, n, err := p.requests(touched, full)
	if err != nil {
		p.giveBack(touched, full)
		return Result{}, err
	}
	res := Result{Fids: n, Requests: len(parts)}
	var errs []error
	for i, stub := range p.stubs {
		for _, req := range parts {
			cctx, cancel := context.WithTimeout(ctx, p.o.Timeout)
			_, err := stub.Predict(cctx, req)
			cancel()
			if err != nil {
				res.Failed = append(res.Failed, p.o.Targets[i])
				errs = append(errs, fmt.Errorf("paramsync: push to %s: %w", p.o.Targets[i], err))
				break
			}
		}
	}
	if len(errs) > 0 {
		p.giveBack(touched, full)
	}
	return res, errors.Join(errs...)
}

// requests builds the push's request parts: per table "<table>_id" (DT_INT64 [n]) and
// "<table>_value" (DT_FLOAT [n, dim]) with each fid's current row.
func (p *Pusher) requests(touched map[string]map[int64]struct{}, full map[string]bool) ([]*pb.PredictRequest, int, error) {
	var parts []*pb.PredictRequest
	cur := p.newRequest()
	size, total := 0, 0
	for _, t := range p.tables {
		var fids []int64
		if full[t.Name()] {
			if err := t.Snapshot(func(d *hashtablepb.EntryDump) error { fids = append(fids, d.GetId()); return nil }); err != nil {
				return nil, 0, err
			}
		} else {
			for f := range touched[t.Name()] {
				fids = append(fids, f)
			}
		}
		if len(fids) == 0 {
			continue
		}
		slices.Sort(fids)
		dim := t.Dim()
		rowBytes := 8 + 4*dim
		per := max(1, p.o.MaxBytes/rowBytes)
		for lo := 0; lo < len(fids); lo += per {
			chunk := fids[lo:min(lo+per, len(fids))]
			vals := make([]float32, len(chunk)*dim)
			if _, err := t.Lookup(chunk, vals, nil); err != nil {
				return nil, 0, fmt.Errorf("paramsync: table %q: %w", t.Name(), err)
			}
			if size > 0 && size+len(chunk)*rowBytes > p.o.MaxBytes {
				parts, cur, size = append(parts, cur), p.newRequest(), 0
			}
			add(cur, t.Name(), dim, chunk, vals)
			size += len(chunk) * rowBytes
			total += len(chunk)
		}
	}
	if size > 0 {
		parts = append(parts, cur)
	}
	return parts, total, nil
}

func (p *Pusher) newRequest() *pb.PredictRequest {
	return &pb.PredictRequest{ModelSpec: &pb.ModelSpec{Name: p.o.Model, SignatureName: Signature}, Inputs: map[string]*tfcorepb.TensorProto{}}
}

// add appends rows of a table to req's "<table>_id" and "<table>_value" inputs.
func add(req *pb.PredictRequest, name string, dim int, fids []int64, vals []float32) {
	id, val := req.Inputs[name+"_id"], req.Inputs[name+"_value"]
	if id == nil {
		id = &tfcorepb.TensorProto{Dtype: tfcorepb.DataType_DT_INT64, TensorShape: shape(0)}
		val = &tfcorepb.TensorProto{Dtype: tfcorepb.DataType_DT_FLOAT, TensorShape: shape(0, int64(dim))}
		req.Inputs[name+"_id"], req.Inputs[name+"_value"] = id, val
	}
	id.Int64Val = append(id.Int64Val, fids...)
	val.FloatVal = append(val.FloatVal, vals...)
	id.TensorShape.Dim[0].Size = int64(len(id.Int64Val))
	val.TensorShape.Dim[0].Size = int64(len(id.Int64Val))
}

func shape(dims ...int64) *tfcorepb.TensorShapeProto {
	s := &tfcorepb.TensorShapeProto{}
	for _, d := range dims {
		s.Dim = append(s.Dim, &tfcorepb.TensorShapeProto_Dim{Size: d})
	}
	return s
}
