package peers

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/monolith-go/monolith/kernels/kernelbench"
	"github.com/monolith-go/monolith/kernels/layout"
	"github.com/monolith-go/monolith/kernels/shard"
)

//go:embed layout_numpy.py
var layoutScript []byte

// Tolerance is the agreement required of a peer: |peer − ours| ≤ Tolerance·max(1, |ours|)
// for every float (absolute below magnitude 1, relative above).
const Tolerance = 1e-5

var (
	// ErrNoNumPy is returned when no Python interpreter with NumPy is found.
	ErrNoNumPy = errors.New("benchmarks/peers: no Python with NumPy")
	// ErrMismatch is wrapped by errors about a peer output that differs from ours.
	ErrMismatch = errors.New("benchmarks/peers: peer disagrees")
)

// LayoutResult is one run of the NumPy layout peer.
type LayoutResult struct {
	Python        string // the interpreter that ran the peer
	PythonVersion string
	NumPyVersion  string
	// ForwardSec and BackwardSec are the peer's seconds per repetition (after one warm-up),
	// each including the index arrays it derives from the sharding outputs.
	ForwardSec, BackwardSec []float64
	Compared                int     // floats compared: forward outputs plus embedding gradients
	MaxDiff                 float64 // the largest |peer − ours| among them
}

// Layout runs the NumPy peer of kernels/layout (v5) on case c in dir, which must exist: it
// shards c (unique), exports the sharding outputs, synthetic embeddings
// (layout.SyntheticValue), deterministic output gradients and the layout config there,
// runs the peer script with reps timed repetitions of the forward and the backward pass,
// and checks the peer's forward outputs and embedding gradients against kernels/layout
// (serial) within Tolerance. A disagreement is an error wrapping ErrMismatch that names the
// tensor, the index and both values. Layout does not time our kernel.
func Layout(ctx context.Context, dir string, c kernelbench.Case, reps int) (LayoutResult, error) {
	return runLayout(ctx, dir, c, reps, nil)
}

// runLayout is Layout, calling tamper (if not nil) on dir after the peer ran and before
// its outputs are read.
func runLayout(ctx context.Context, dir string, c kernelbench.Case, reps int, tamper func(dir string) error) (LayoutResult, error) {
	var res LayoutResult
	if reps < 1 {
		return res, fmt.Errorf("benchmarks/peers: %d repetitions", reps)
	}
	py, err := FindPython(ctx)
	if err != nil {
		return res, err
	}
	res.Python = py
	ref, err := reference(c)
	if err != nil {
		return res, fmt.Errorf("benchmarks/peers: case %s: %w", c.Name, err)
	}
	if err := ref.export(dir); err != nil {
		return res, fmt.Errorf("benchmarks/peers: case %s: export: %w", c.Name, err)
	}
	script := filepath.Join(dir, "layout_numpy.py")
	if err := os.WriteFile(script, layoutScript, 0o644); err != nil {
		return res, fmt.Errorf("benchmarks/peers: %w", err)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, py, script, dir, strconv.Itoa(reps))
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return res, fmt.Errorf("benchmarks/peers: case %s: %s %s: %w\n%s", c.Name, py, script, err, strings.TrimSpace(stderr.String()))
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	var report struct {
		NumPy       string    `json:"numpy"`
		Python      string    `json:"python"`
		ForwardSec  []float64 `json:"forward_sec"`
		BackwardSec []float64 `json:"backward_sec"`
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &report); err != nil {
		return res, fmt.Errorf("benchmarks/peers: case %s: peer report %q: %w", c.Name, lines[len(lines)-1], err)
	}
	res.PythonVersion, res.NumPyVersion = report.Python, report.NumPy
	res.ForwardSec, res.BackwardSec = report.ForwardSec, report.BackwardSec
	if tamper != nil {
		if err := tamper(dir); err != nil {
			return res, err
		}
	}
	res.Compared, res.MaxDiff, err = ref.check(dir)
	if err != nil {
		return res, fmt.Errorf("benchmarks/peers: case %s: %w", c.Name, err)
	}
	return res, nil
}

// FindPython returns a Python interpreter that imports numpy: $MONOLITH_PYTHON if set,
// else the first of python3 on PATH and /usr/bin/python3 that does. The error wraps
// ErrNoNumPy and says how to install NumPy.
func FindPython(ctx context.Context) (string, error) {
	if p := os.Getenv("MONOLITH_PYTHON"); p != "" {
		if err := importNumPy(ctx, p); err != nil {
			return "", fmt.Errorf("%w: MONOLITH_PYTHON=%s: %w", ErrNoNumPy, p, err)
		}
		return p, nil
	}
	var cands, tried []string
	if p, err := exec.LookPath("python3"); err == nil {
		cands = append(cands, p)
	}
	if len(cands) == 0 || cands[0] != "/usr/bin/python3" {
		cands = append(cands, "/usr/bin/python3")
	}
	for _, p := range cands {
		err := importNumPy(ctx, p)
		if err == nil {
			return p, nil
		}
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		tried = append(tried, fmt.Sprintf("%s (%v)", p, err))
	}
	return "", fmt.Errorf("%w: tried %s; install it (apt-get install python3-numpy) or set MONOLITH_PYTHON to a Python that has it",
		ErrNoNumPy, strings.Join(tried, ", "))
}

// importNumPy runs `python -c "import numpy"`.
func importNumPy(ctx context.Context, python string) error {
	out, err := exec.CommandContext(ctx, python, "-c", "import numpy").CombinedOutput()
	if err != nil {
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		return fmt.Errorf("%w: %s", err, lines[len(lines)-1])
	}
	return nil
}

// layoutRef is one case with our kernel's results.
type layoutRef struct {
	c     kernelbench.Case
	r     *shard.Result
	emb   [][]float32 // per (table, ps) tensor k = t*P+p
	grads [][]float32 // output gradients, in output order
	out   [][]float32 // our forward outputs
	eg    [][]float32 // our embedding gradients
}

// reference shards c and runs kernels/layout v5 serially forward and backward.
func reference(c kernelbench.Case) (*layoutRef, error) {
	s, err := shard.New(c.Cfg, shard.Options{PS: c.PS, Version: 5, Unique: true})
	if err != nil {
		return nil, err
	}
	r, err := s.Shard(c.In)
	if err != nil {
		return nil, fmt.Errorf("shard: %w", err)
	}
	emb, err := layout.Arrange(5, c.Cfg, r, layout.ListBuffers(c.Cfg, r, layout.SyntheticValue))
	if err != nil {
		return nil, err
	}
	l, err := layout.New(c.Cfg, layout.Options{Version: 5, PS: c.PS, Parallel: 1})
	if err != nil {
		return nil, err
	}
	req := []layout.Sharded{layout.FromShard(r)}
	ref := &layoutRef{c: c, r: r, emb: emb.Tensors, out: l.Outputs(r.BatchSize), grads: l.Outputs(r.BatchSize)}
	if err := l.Forward(req, emb, ref.out); err != nil {
		return nil, fmt.Errorf("forward: %w", err)
	}
	for i, g := range ref.grads {
		for j := range g {
			g[j] = gradValue(i, j)
		}
	}
	eg := layout.Zeros(emb)
	if err := l.Backward(req, ref.grads, eg); err != nil {
		return nil, fmt.Errorf("backward: %w", err)
	}
	ref.eg = eg.Tensors
	return ref, nil
}

// gradValue is element j of the gradient of output i: deterministic, in [-1, 1].
func gradValue(i, j int) float32 {
	return float32((i*7919+j*104729)%2001)/1000 - 1
}

// The config the peer reads (config.json).
type (
	peerConfig struct {
		BatchSize int           `json:"batch_size"`
		PS        int           `json:"ps"`
		Features  []peerFeature `json:"features"`
		Layouts   []peerLayout  `json:"layouts"`
	}
	peerFeature struct {
		Name      string `json:"name"`
		Table     string `json:"table"`
		Dim       int    `json:"dim"`
		Pooling   string `json:"pooling"`
		MaxSeqLen int    `json:"max_seq_len"`
		Shared    bool   `json:"shared"`
	}
	peerLayout struct {
		Name    string      `json:"name"`
		OutType string      `json:"out_type"`
		Shapes  [][]int     `json:"shapes"` // dims[0] -1 is the batch
		Slices  []peerSlice `json:"slices"`
	}
	peerSlice struct {
		Feature   int    `json:"feature"`
		Start     int    `json:"start"`
		End       int    `json:"end"`
		Pooling   string `json:"pooling"`
		MaxSeqLen int    `json:"max_seq_len"`
	}
)

// export writes the peer's inputs into dir.
func (ref *layoutRef) export(dir string) error {
	cfg, r := ref.c.Cfg, ref.r
	pc := peerConfig{BatchSize: r.BatchSize, PS: ref.c.PS}
	for _, f := range cfg.Features {
		pc.Features = append(pc.Features, peerFeature{Name: f.Name, Table: cfg.Tables[f.Table].Name, Dim: f.Dim,
			Pooling: f.Pooling.String(), MaxSeqLen: f.MaxSeqLen, Shared: ref.c.In.Features[f.Index].Shared})
	}
	for _, lay := range cfg.Layouts {
		pl := peerLayout{Name: lay.Name, OutType: lay.OutType.String(), Shapes: lay.Shapes}
		for _, s := range lay.Slices {
			pl.Slices = append(pl.Slices, peerSlice{Feature: s.Feature, Start: s.Start, End: s.End, Pooling: s.Pooling.String(), MaxSeqLen: s.MaxSeqLen})
		}
		pc.Layouts = append(pc.Layouts, pl)
	}
	js, err := json.MarshalIndent(pc, "", " ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), js, 0o644); err != nil {
		return err
	}
	p := func(name string) string { return filepath.Join(dir, name+".npy") }
	nemb := 0
	for _, t := range ref.emb {
		nemb += len(t)
	}
	errs := []error{
		saveNPY(p("fid_offset"), []int{len(r.FidOffset)}, r.FidOffset),
		saveNPY(p("feature_offset"), []int{len(r.FeatureOffset)}, r.FeatureOffset),
		saveNPY(p("nfl_offset"), []int{len(r.NflOffset)}, r.NflOffset),
		saveNPY(p("emb_size"), []int{len(r.EmbSize)}, r.EmbSize),
		saveNPY(p("emb"), []int{nemb}, ref.emb...),
	}
	i := 0
	for _, lay := range cfg.Layouts {
		for j := range lay.Outputs() {
			errs = append(errs, saveNPY(p(fmt.Sprintf("grad_%d", i)), lay.OutputShape(j, r.BatchSize), ref.grads[i]))
			i++
		}
	}
	return errors.Join(errs...)
}

// check compares the peer's outputs in dir with ours.
func (ref *layoutRef) check(dir string) (compared int, maxDiff float64, err error) {
	cfg, r := ref.c.Cfg, ref.r
	cmp := func(file, name string, shape []int, want []float32) error {
		gotShape, got, err := loadNPY[float32](filepath.Join(dir, file))
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if !equalInts(gotShape, shape) {
			return fmt.Errorf("%w: %s: shape %v, want %v", ErrMismatch, name, gotShape, shape)
		}
		d, err := compare(name, shape, got, want)
		compared += len(want)
		maxDiff = max(maxDiff, d)
		return err
	}
	i := 0
	for _, lay := range cfg.Layouts {
		for j := range lay.Outputs() {
			name := fmt.Sprintf("forward output %d (layout %q, tensor %d)", i, lay.Name, j)
			if err := cmp(fmt.Sprintf("out_%d.npy", i), name, lay.OutputShape(j, r.BatchSize), ref.out[i]); err != nil {
				return compared, maxDiff, err
			}
			i++
		}
	}
	for k, want := range ref.eg {
		t, p := k/r.PS, k%r.PS
		name := fmt.Sprintf("embedding gradient %d (table %q, ps %d)", k, cfg.Tables[t].Name, p)
		if err := cmp(fmt.Sprintf("emb_grad_%d.npy", k), name, []int{len(want)}, want); err != nil {
			return compared, maxDiff, err
		}
	}
	return compared, maxDiff, nil
}

// compare checks got (the peer's) against want (ours), both of the given shape, within
// Tolerance. It returns the largest |got − want|, and for the first element out of
// tolerance (NaN included) an error wrapping ErrMismatch naming the tensor, the index and
// both values.
func compare(name string, shape []int, got, want []float32) (float64, error) {
	if len(got) != len(want) {
		return 0, fmt.Errorf("%w: %s: %d floats, want %d", ErrMismatch, name, len(got), len(want))
	}
	maxDiff := 0.0
	for i, w := range want {
		g := got[i]
		d := math.Abs(float64(g) - float64(w))
		if !(d <= Tolerance*max(1, math.Abs(float64(w)))) {
			return maxDiff, fmt.Errorf("%w: %s at index %v: numpy %v, go %v (|diff| %.3g > %g·max(1, |go|))",
				ErrMismatch, name, unravel(i, shape), g, w, d, Tolerance)
		}
		maxDiff = max(maxDiff, d)
	}
	return maxDiff, nil
}

// unravel returns the C-order multi-index of flat index i in shape.
func unravel(i int, shape []int) []int {
	idx := make([]int, len(shape))
	for k := len(shape) - 1; k >= 0; k-- {
		if shape[k] > 0 {
			idx[k] = i % shape[k]
			i /= shape[k]
		}
	}
	return idx
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
