// Package modelserver serves the models `monolith export --model` writes (ps/servingmodel)
// behind TF Serving's API: Loader is the loader of serving/tfs's server, and each loaded
// version answers Predict with training's own shard, layout and model steps over its tables.
//
// # Memory
//
// A loaded version holds each table's rows in one byte array, in the encoding the version
// stores them in (fp16, fixed_r8, … as the table's codecs say; decoded as requests read
// them), and its fids in a compact sorted index beside them (fidIndex): each fid split into
// a block (its top bits, kept once per distinct value), a bucket (a dense directory of 4
// bytes each within a block) and its low bits, packed, the split chosen per table as the
// smallest, the plain 8-byte fids where no split is smaller. Real fids keep their slot in
// the top bits and spread evenly below it, and take 4.6 bytes each on the benchmark suite's
// served model (887k fids of 8 slots) instead of 8. Lookups are binary searches over the
// blocks and within one bucket, allocating nothing. Export writes table files in ascending
// fid order, and the loader reads such a file twice, first its fids only to choose the
// split, then into the index and the rows, so loading takes the table's memory and no more
// (no full-width copy of the fids). A file in any other order (an older export) is loaded
// into a []uint64 of its fids, sorted in place with its rows, then indexed.
package modelserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/monolith-go/monolith/io/pbtext"
	"github.com/monolith-go/monolith/ps/paramsync"
	"github.com/monolith-go/monolith/ps/servingmodel"
	"github.com/monolith-go/monolith/schemas/batch"
	"github.com/monolith-go/monolith/schemas/examplepb"
	"github.com/monolith-go/monolith/schemas/parserpb"
	"github.com/monolith-go/monolith/schemas/tfcorepb"
	pb "github.com/monolith-go/monolith/schemas/tfservingpb"
	"github.com/monolith-go/monolith/serving/tfs"
	"github.com/monolith-go/monolith/transforms/config"
	"github.com/monolith-go/monolith/transforms/element"
	"github.com/monolith-go/monolith/transforms/layout"
	tmodel "github.com/monolith-go/monolith/transforms/model"
	"github.com/monolith-go/monolith/transforms/shard"
)

// The input and output aliases of Predict.
const (
	InputExampleBatch = "example_batch" // serialized ExampleBatch messages
	InputInstances    = "instances"     // serialized Instance messages, one row each
	OutputPredictions = "predictions"   // float, one probability per row
)

// DefaultMaxRows bounds the rows of one Predict request.
const DefaultMaxRows = 1 << 16

// Loader loads exported model versions (tfs.Loader).
type Loader struct {
	// MaxRows bounds the rows of one request (default DefaultMaxRows).
	MaxRows int
	// Workers is how many requests one version runs at once (default GOMAXPROCS).
	Workers int
	Log     *slog.Logger
}

var _ tfs.Loader = Loader{}

// Load opens the version folder dir (its done marker, manifest and checksums) and builds
// its model: the tables in memory, decoded, and one set of steps per worker.
func (l Loader) Load(ctx context.Context, name, dir string, v int64) (tfs.Servable, error) {
	man, err := servingmodel.Open(dir)
	if err != nil {
		return nil, err
	}
	spec := man.Spec
	fc := &examplepb.FeatureConfigs{}
	if err := pbtext.ReadText([]byte(spec.FeatureConfigs), fc); err != nil {
		return nil, fmt.Errorf("modelserver: %s: feature configs: %w", dir, err)
	}
	k, err := config.New(fc, spec.Shards, 5)
	if err != nil {
		return nil, fmt.Errorf("modelserver: %s: %w", dir, err)
	}
	k.Unique = spec.Unique
	cfg, err := k.Build()
	if err != nil {
		return nil, fmt.Errorf("modelserver: %s: %w", dir, err)
	}
	byName := map[string]*servingmodel.Table{}
	for _, t := range man.Tables {
		byName[t.Name] = t
	}
	m := &Model{name: name, version: v, maxRows: l.MaxRows}
	if m.maxRows <= 0 {
		m.maxRows = DefaultMaxRows
	}
	for _, ct := range cfg.Tables {
		t := byName[ct.Name]
		if t == nil {
			return nil, fmt.Errorf("%w: %s has no table %q, which the feature configs use", servingmodel.ErrCorrupt, dir, ct.Name)
		}
		st, err := loadTable(ctx, dir, t)
		if err != nil {
			return nil, err
		}
		m.tables = append(m.tables, st)
	}
	m.byName = map[string]*servedTable{}
	for _, st := range m.tables {
		m.byName[st.Name] = st
	}
	mspec := tmodel.Spec{Name: spec.Model, Bias: spec.Bias, Vec: spec.Vec, Hidden: spec.Hidden}
	workers := l.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	m.pool = make(chan *runner, workers)
	for i := range workers {
		r := &runner{}
		if err := r.shard.Init(k); err != nil {
			return nil, err
		}
		if err := r.layout.Init(k, layout.FromTrain{}); err != nil {
			return nil, err
		}
		if r.step, err = tmodel.NewStep(mspec, k); err != nil {
			return nil, fmt.Errorf("modelserver: %s: %w", dir, err)
		}
		if i == 0 {
			for _, p := range r.step.Params() {
				t := byName[tmodel.ParamTable(p)]
				if t == nil || t.Dim != p.Cols {
					return nil, fmt.Errorf("%w: %s: dense parameter %q needs table %q of dim %d", servingmodel.ErrCorrupt, dir, p.Name, tmodel.ParamTable(p), p.Cols)
				}
				st, err := loadTable(ctx, dir, t)
				if err != nil {
					return nil, err
				}
				ids := make([]uint64, p.Rows)
				for i := range ids {
					ids[i] = uint64(i)
				}
				m.params = append(m.params, st.rowsOf(ids, nil))
			}
		}
		m.pool <- r
	}
	log := l.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var rows, index, stored int
	for _, t := range m.tables {
		rows, index, stored = rows+t.idx.n, index+t.idx.bytes(), stored+len(t.enc)
	}
	log.Info("model loaded", "model", name, "version", v, "tables", len(m.tables), "rows", rows, "dense", len(m.params),
		"fid_index_bytes", index, "row_bytes", stored)
	return m, nil
}

// servedTable is one table in memory: the loaded fids in a compact sorted index (fidIndex:
// about 5 bytes a fid where fids share their top bits, never more than 8), with their rows
// in the same order kept as the version stores them (fp16, fixed_r8, … as the table's
// codecs say) and decoded as requests read them, and the fids parameter sync adds later in
// a map beside them. Sync assigns rows while requests read them. A row erased by
// skip_zero_embedding reads as zeros.
type servedTable struct {
	*servingmodel.Table // name, dim, codecs and the stored row size (ValueBytes)
	mu                  sync.RWMutex
	idx                 fidIndex         // loaded fids: fid number i is row i
	enc                 []byte           // idx.n loaded rows, then the added ones, vb bytes each
	extra               map[uint64]int32 // added fid → its row
	gone                map[uint64]bool  // loaded fids erased since
}

// loadTable loads table t of the version folder dir. A table file in ascending fid order
// (as servingmodel.Write writes them) is read twice: once for its fids' layout (fidStats),
// then into the index and the rows, so that no full-width copy of the fids is ever held.
// An unsorted file (an older export) is loaded with its fids in a []uint64, sorted in place
// with the rows, then indexed.
func loadTable(ctx context.Context, dir string, t *servingmodel.Table) (*servedTable, error) {
	if t.Entries > maxIndexFids || t.Entries*uint64(t.ValueBytes()) > math.MaxInt {
		return nil, fmt.Errorf("modelserver: %s table %q: %d rows, more than a served table holds (%d)", dir, t.Name, t.Entries, uint64(maxIndexFids))
	}
	n := int(t.Entries)
	var stats fidStats
	err := scanTable(ctx, dir, t, func(fid uint64, _ []byte) error { return stats.add(fid) })
	if errors.Is(err, errUnsorted) {
		return loadUnsorted(ctx, dir, t)
	}
	if err != nil {
		return nil, tableError(dir, t, err)
	}
	l, nb := stats.plan()
	b, err := newFidIndexBuilder(n, l, nb)
	if err != nil {
		return nil, fmt.Errorf("modelserver: %s table %q: %w", dir, t.Name, err)
	}
	st := &servedTable{Table: t, enc: make([]byte, 0, n*t.ValueBytes())}
	err = scanTable(ctx, dir, t, func(fid uint64, enc []byte) error {
		if err := b.add(fid); err != nil {
			return fmt.Errorf("%w: the file changed while loading: %v", servingmodel.ErrCorrupt, err)
		}
		st.enc = append(st.enc, enc...)
		return nil
	})
	if err == nil {
		if st.idx, err = b.finish(n); err != nil {
			err = fmt.Errorf("%w: the file changed while loading: %v", servingmodel.ErrCorrupt, err)
		}
	}
	if err != nil {
		return nil, tableError(dir, t, err)
	}
	return st, nil
}

// loadUnsorted is loadTable for a table file not in ascending fid order.
func loadUnsorted(ctx context.Context, dir string, t *servingmodel.Table) (*servedTable, error) {
	vb := t.ValueBytes()
	s := byFid{fids: make([]uint64, 0, t.Entries), enc: make([]byte, 0, int(t.Entries)*vb), vb: vb, tmp: make([]byte, vb)}
	err := scanTable(ctx, dir, t, func(fid uint64, enc []byte) error {
		s.fids = append(s.fids, fid)
		s.enc = append(s.enc, enc...)
		return nil
	})
	if err != nil {
		return nil, tableError(dir, t, err)
	}
	sort.Sort(s)
	idx, err := buildFidIndex(s.fids)
	if err != nil {
		return nil, tableError(dir, t, err)
	}
	return &servedTable{Table: t, idx: idx, enc: s.enc}, nil
}

// scanTable calls fn with every row of t's file (servingmodel.Table.ScanEncoded), checking
// ctx every 4096 rows.
func scanTable(ctx context.Context, dir string, t *servingmodel.Table, fn func(fid uint64, enc []byte) error) error {
	n := 0
	return t.ScanEncoded(dir, func(fid int64, enc []byte) error {
		if n&4095 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		n++
		return fn(uint64(fid), enc)
	})
}

// tableError is err of loading table t of dir: a duplicate fid is ErrCorrupt naming it.
func tableError(dir string, t *servingmodel.Table, err error) error {
	if d, ok := errors.AsType[duplicateFidError](err); ok {
		return fmt.Errorf("%w: %s table %q holds fid %d twice", servingmodel.ErrCorrupt, dir, t.Name, int64(d.fid))
	}
	return fmt.Errorf("modelserver: %s table %q: %w", dir, t.Name, err)
}

// row is the stored bytes of row i.
func (t *servedTable) row(i int) []byte {
	vb := t.ValueBytes()
	return t.enc[i*vb : (i+1)*vb]
}

// byFid sorts fids and their rows (vb bytes each in enc) together, in place: no
// permutation or second copy of the rows is made.
type byFid struct {
	fids []uint64
	enc  []byte
	vb   int
	tmp  []byte // one row
}

func (s byFid) Len() int           { return len(s.fids) }
func (s byFid) Less(i, j int) bool { return s.fids[i] < s.fids[j] }
func (s byFid) Swap(i, j int) {
	s.fids[i], s.fids[j] = s.fids[j], s.fids[i]
	ri, rj := s.enc[i*s.vb:(i+1)*s.vb], s.enc[j*s.vb:(j+1)*s.vb]
	copy(s.tmp, ri)
	copy(ri, rj)
	copy(rj, s.tmp)
}

// find is the row of fid, or -1. t.mu is held.
func (t *servedTable) find(f uint64) int {
	if i, ok := t.idx.search(f); ok && !t.gone[f] {
		return i
	}
	if k, ok := t.extra[f]; ok {
		return int(k)
	}
	return -1
}

// rowsOf appends the decoded rows of fids to dst (zeros for a fid the table lacks, as
// training's evaluation reads an absent fid).
func (t *servedTable) rowsOf(fids []uint64, dst []float32) []float32 {
	t.mu.RLock()
	defer t.mu.RUnlock()
	n := len(dst)
	dst = slices.Grow(dst, len(fids)*t.Dim)[:n+len(fids)*t.Dim]
	for k, f := range fids {
		out := dst[n+k*t.Dim : n+(k+1)*t.Dim]
		if i := t.find(f); i >= 0 {
			t.DecodeValues(t.row(i), out)
		} else {
			clear(out)
		}
	}
	return dst
}

// assign stores rows (len(fids)×dim values) as parameter sync pushes them: through the
// table's codecs, an all-zero row erasing its fid where skip_zero_embedding is set.
func (t *servedTable) assign(fids []int64, rows []float32) {
	stored := make([]byte, t.ValueBytes())
	t.mu.Lock()
	defer t.mu.Unlock()
	for i, f := range fids {
		u := uint64(f)
		row := rows[i*t.Dim : (i+1)*t.Dim]
		if t.SkipZero && servingmodel.ZeroRow(row) {
			if _, ok := t.idx.search(u); ok {
				if t.gone == nil {
					t.gone = map[uint64]bool{}
				}
				t.gone[u] = true
			}
			delete(t.extra, u)
			continue
		}
		t.EncodeValues(stored, row)
		if k, ok := t.idx.search(u); ok {
			delete(t.gone, u)
			copy(t.row(k), stored)
			continue
		}
		if k, ok := t.extra[u]; ok {
			copy(t.row(int(k)), stored)
			continue
		}
		if t.extra == nil {
			t.extra = map[uint64]int32{}
		}
		t.extra[u] = int32(len(t.enc) / t.ValueBytes())
		t.enc = append(t.enc, stored...)
	}
}

// runner is one worker's steps (not safe for concurrent use).
type runner struct {
	shard  shard.Batcher
	layout layout.Forward
	step   *tmodel.Step
}

// Model is a loaded version (tfs.Servable).
type Model struct {
	name    string
	version int64
	maxRows int
	tables  []*servedTable // in the feature configs' table order
	byName  map[string]*servedTable
	params  [][]float32 // dense parameters, in the model's order
	pool    chan *runner
}

// Predict answers one request: the rows of its "example_batch" or "instances" input, in
// order, each with its probability. Bad input is InvalidArgument naming the input, the
// element and what is wrong; the model keeps serving.
func (m *Model) Predict(ctx context.Context, req *pb.PredictRequest) (*pb.PredictResponse, error) {
	if req.GetModelSpec().GetSignatureName() == paramsync.Signature {
		return m.assign(req)
	}
	recs, err := m.decode(req)
	if err != nil {
		return nil, err
	}
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	var r *runner
	select {
	case r = <-m.pool:
	case <-ctx.Done():
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	defer func() { m.pool <- r }()
	var preds []float32
	for i, rec := range recs {
		p, err := m.forward(ctx, r, rec)
		if err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "modelserver: model %s version %d: input batch %d: %v", m.name, m.version, i, err)
		}
		preds = append(preds, p...)
	}
	out := &tfcorepb.TensorProto{Dtype: tfcorepb.DataType_DT_FLOAT, FloatVal: preds,
		TensorShape: &tfcorepb.TensorShapeProto{Dim: []*tfcorepb.TensorShapeProto_Dim{{Size: int64(len(preds))}}}}
	return &pb.PredictResponse{Outputs: map[string]*tfcorepb.TensorProto{OutputPredictions: out}}, nil
}

// forward runs training's shard, lookup (from the served tables), layout and model on rec.
func (m *Model) forward(ctx context.Context, r *runner, rec arrow.RecordBatch) ([]float32, error) {
	res, err := r.shard.Shard(rec)
	if err != nil {
		return nil, err
	}
	P := res.PS
	t := &element.TrainState{Emb: make([][]float32, len(m.tables)*P), Params: m.params}
	for ti, tb := range m.tables {
		for p := range P {
			t.Emb[ti*P+p] = tb.rowsOf(res.List(ti, p), []float32{})
		}
	}
	in := &element.Sharded{Batch: rec, Shard: res, Train: t}
	tensors, err := r.layout.Run(ctx, in)
	if err != nil {
		return nil, err
	}
	return r.step.Probabilities(&element.Sharded{Batch: rec, Shard: res, Tensors: tensors, Train: t})
}

// decode turns the request's input into batches.
func (m *Model) decode(req *pb.PredictRequest) ([]arrow.RecordBatch, error) {
	eb, hasEB := req.GetInputs()[InputExampleBatch]
	in, hasIn := req.GetInputs()[InputInstances]
	switch {
	case hasEB == hasIn:
		return nil, status.Errorf(codes.InvalidArgument, "modelserver: Predict needs exactly one input, %q (serialized ExampleBatch) or %q (serialized Instance); got %d inputs", InputExampleBatch, InputInstances, len(req.GetInputs()))
	case hasEB && eb.GetDtype() != tfcorepb.DataType_DT_STRING, hasIn && in.GetDtype() != tfcorepb.DataType_DT_STRING:
		return nil, status.Errorf(codes.InvalidArgument, "modelserver: the input must be a DT_STRING tensor of serialized messages")
	}
	mem := memory.DefaultAllocator
	var recs []arrow.RecordBatch
	fail := func(err error) ([]arrow.RecordBatch, error) {
		for _, r := range recs {
			r.Release()
		}
		return nil, err
	}
	rows := 0
	if hasEB {
		for i, b := range eb.GetStringVal() {
			rec, err := batch.DecodeExampleBatch(mem, b)
			if err != nil {
				return fail(status.Errorf(codes.InvalidArgument, "modelserver: input %q element %d: %v", InputExampleBatch, i, err))
			}
			recs = append(recs, rec)
			if rows += int(rec.NumRows()); rows > m.maxRows {
				return fail(status.Errorf(codes.InvalidArgument, "modelserver: input %q: more than %d rows (the request limit) by element %d", InputExampleBatch, m.maxRows, i))
			}
		}
		return recs, nil
	}
	vals := in.GetStringVal()
	if len(vals) > m.maxRows {
		return nil, status.Errorf(codes.InvalidArgument, "modelserver: input %q: %d rows, more than the request limit of %d", InputInstances, len(vals), m.maxRows)
	}
	ins := make([]*parserpb.Instance, len(vals))
	for i, b := range vals {
		ins[i] = &parserpb.Instance{}
		if err := proto.Unmarshal(b, ins[i]); err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "modelserver: input %q row %d: not an Instance: %v", InputInstances, i, err)
		}
	}
	if len(ins) == 0 {
		return nil, nil
	}
	rec, err := batch.FromInstances(mem, ins)
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "modelserver: input %q: %v", InputInstances, err)
	}
	return []arrow.RecordBatch{rec}, nil
}

// assign is parameter sync's push (spec/ps.md §9.4): per table "<table>_id" (DT_INT64)
// and "<table>_value" (DT_FLOAT, ids × dim), answered with "<table>_result", the number of
// ids. Every input is checked before any row is assigned.
func (m *Model) assign(req *pb.PredictRequest) (*pb.PredictResponse, error) {
	type part struct {
		t    *servedTable
		fids []int64
		vals []float32
	}
	var parts []part
	for name, in := range req.GetInputs() {
		tname, ok := strings.CutSuffix(name, "_id")
		if !ok {
			if _, isValue := strings.CutSuffix(name, "_value"); isValue {
				continue
			}
			return nil, status.Errorf(codes.InvalidArgument, "modelserver: %s: input %q is neither <table>_id nor <table>_value", paramsync.Signature, name)
		}
		t := m.byName[tname]
		if t == nil {
			return nil, status.Errorf(codes.InvalidArgument, "modelserver: %s: model %s has no table %q (input %q)", paramsync.Signature, m.name, tname, name)
		}
		vals := req.GetInputs()[tname+"_value"]
		if in.GetDtype() != tfcorepb.DataType_DT_INT64 || vals.GetDtype() != tfcorepb.DataType_DT_FLOAT ||
			len(vals.GetFloatVal()) != len(in.GetInt64Val())*t.Dim {
			return nil, status.Errorf(codes.InvalidArgument, "modelserver: %s: table %q: %d int64 ids and %d float values (dim %d)",
				paramsync.Signature, tname, len(in.GetInt64Val()), len(vals.GetFloatVal()), t.Dim)
		}
		parts = append(parts, part{t, in.GetInt64Val(), vals.GetFloatVal()})
	}
	resp := &pb.PredictResponse{Outputs: map[string]*tfcorepb.TensorProto{}}
	for _, p := range parts {
		p.t.assign(p.fids, p.vals)
		resp.Outputs[p.t.Name+"_result"] = &tfcorepb.TensorProto{Dtype: tfcorepb.DataType_DT_INT64, Int64Val: []int64{int64(len(p.fids))}, TensorShape: &tfcorepb.TensorShapeProto{}}
	}
	return resp, nil
}
