package hyperparams

import (
	"errors"
	"strings"
	"sync"
	"testing"
)

type fmParams struct{ dim int }

func (m fmParams) Task() (*Params, error) {
	p := New().MustDefine("dim", m.dim, "").MustDefine("train", New().MustDefine("max_steps", 100, ""), "")
	return p, nil
}

// errTask is the failure of a model whose Task fails.
var errTask = errors.New("task params failed")

// failingParams is a model whose Task fails; Params passes the error on.
type failingParams struct{}

func (failingParams) Task() (*Params, error) { return nil, errTask }

func TestClassKey(t *testing.T) {
	for _, tc := range []struct {
		module, name string
		shortcut     bool
		want         string
	}{
		{"monolith.tasks.ads.params.fm", "FM", false, "monolith.tasks.ads.params.fm.FM"},
		{"monolith.tasks.ads.params.fm", "FM", true, "ads.fm.FM"},
		{"other.module", "M", true, "other.module.M"},
		{"a.params.b.params.c", "M", true, "a.b.c.M"},
		{"x.monolith.tasks.y", "M", true, "x.y.M"},
	} {
		if got := ClassKey(tc.module, tc.name, tc.shortcut); got != tc.want {
			t.Errorf("ClassKey(%q, %q, %v) = %q, want %q", tc.module, tc.name, tc.shortcut, got, tc.want)
		}
	}
}

func TestRegistry(t *testing.T) {
	var r Registry
	key, err := r.Register("monolith.tasks.ads.params.fm", "FM", func() ModelParams { return fmParams{dim: 8} })
	if err != nil || key != "monolith.tasks.ads.params.fm.FM" {
		t.Fatalf("Register = %q, %v", key, err)
	}
	if _, err := r.Register("plain", "Abstract", func() ModelParams { return failingParams{} }); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(r.Keys(), " "); got != "ads.fm.FM monolith.tasks.ads.params.fm.FM plain.Abstract" {
		t.Errorf("Keys = %s", got)
	}
	for _, tc := range []struct {
		key     string
		wantDim int
		err     error
		msg     string
	}{
		{key: "ads.fm.FM", wantDim: 8},
		{key: "monolith.tasks.ads.params.fm.FM", wantDim: 8},
		{key: "plain.Abstract", err: errTask, msg: "plain.Abstract"},
		{key: "nope.M", err: ErrModelNotFound, msg: "nope.M (known models: ads.fm.FM, monolith.tasks.ads.params.fm.FM, plain.Abstract)"},
	} {
		p, err := r.Params(tc.key)
		if tc.err != nil {
			if !errors.Is(err, tc.err) || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("Params(%q) = %v, want %v containing %q", tc.key, err, tc.err, tc.msg)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if d, _ := GetAs[int](p, "dim"); d != tc.wantDim {
			t.Errorf("Params(%q).dim = %d", tc.key, d)
		}
		if s, _ := p.Get("train.max_steps"); s != 100 {
			t.Errorf("train.max_steps = %v", s)
		}
	}
	// A duplicate of either key fails and files nothing.
	for _, tc := range []struct{ module, name, key string }{
		{"monolith.tasks.ads.params.fm", "FM", "monolith.tasks.ads.params.fm.FM"},
		{"ads.fm", "FM", "ads.fm.FM"},
		{"monolith.tasks.ads.fm", "FM", "ads.fm.FM"},
	} {
		_, err := r.Register(tc.module, tc.name, func() ModelParams { return fmParams{} })
		if !errors.Is(err, ErrDuplicateModel) || !strings.Contains(err.Error(), "for key "+tc.key+": "+tc.module+"."+tc.name) {
			t.Errorf("Register(%s.%s) = %v", tc.module, tc.name, err)
		}
	}
	if n := len(r.Keys()); n != 3 {
		t.Errorf("%d keys after failed registrations", n)
	}
	if _, err := r.Register("m", "Nil", nil); err == nil {
		t.Error("nil constructor accepted")
	}
}

func TestRegistryConcurrent(t *testing.T) {
	var r Registry
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := r.Register("m", "Same", func() ModelParams { return fmParams{} })
			errs <- err
			_ = r.Keys()
		}()
	}
	wg.Wait()
	close(errs)
	ok := 0
	for err := range errs {
		if err == nil {
			ok++
		}
	}
	if ok != 1 {
		t.Errorf("%d registrations of one key succeeded", ok)
	}
}
