package discovery

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeBackend answers Query from a map a test changes, or with err.
type fakeBackend struct {
	mu  sync.Mutex
	m   map[int]string
	err error
}

func (f *fakeBackend) set(m map[int]string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.m, f.err = maps.Clone(m), err
}

func (f *fakeBackend) Register(context.Context, string, int, string) error   { return nil }
func (f *fakeBackend) Deregister(context.Context, string, int, string) error { return nil }
func (f *fakeBackend) Close() error                                          { return nil }
func (f *fakeBackend) Query(_ context.Context, name string) (map[int]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if name != "ps" {
		return nil, nil
	}
	return maps.Clone(f.m), f.err
}

func TestWaitFor(t *testing.T) {
	for _, tc := range []struct {
		name  string
		m     map[int]string
		err   error
		later map[int]string // set after 100 ms
		want  []string
		fail  string
	}{
		{"complete", map[int]string{0: "a:1", 1: "b:2"}, nil, nil, []string{"a:1", "b:2"}, ""},
		{"arrives", map[int]string{0: "a:1"}, nil, map[int]string{0: "a:1", 1: "b:2"}, []string{"a:1", "b:2"}, ""},
		{"missing", map[int]string{1: "b:2"}, nil, nil, nil, "ps [0] of 2 not registered"},
		{"too many", map[int]string{0: "a:1", 1: "b:2", 2: "c:3"}, nil, nil, nil, "ps.2 is registered but there are 2 ps"},
		{"query error", nil, errors.New("agent down"), nil, nil, "agent down"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &fakeBackend{}
			b.set(tc.m, tc.err)
			if tc.later != nil {
				time.AfterFunc(100*time.Millisecond, func() { b.set(tc.later, nil) })
			}
			got, err := WaitFor(context.Background(), b, "ps", 2, 600*time.Millisecond, nil)
			if tc.fail == "" {
				if err != nil || !slices.Equal(got, tc.want) {
					t.Fatalf("WaitFor = %q, %v; want %q", got, err, tc.want)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.fail) {
				t.Fatalf("WaitFor error %v, want %q", err, tc.fail)
			}
		})
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := WaitFor(ctx, &fakeBackend{}, "ps", 1, time.Minute, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled WaitFor: %v", err)
	}
}

func TestFollow(t *testing.T) {
	b := &fakeBackend{}
	b.set(map[int]string{0: "a:1"}, nil) // incomplete: nothing reported
	var mu sync.Mutex
	var reports [][]string
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		Follow(ctx, b, "ps", 2, 5*time.Millisecond, nil, func(a []string) {
			mu.Lock()
			reports = append(reports, a)
			mu.Unlock()
		})
	}()
	steps := []struct {
		m   map[int]string
		err error
	}{
		{map[int]string{0: "a:1", 1: "b:2"}, nil},
		{map[int]string{0: "a:1", 1: "b:2"}, nil},           // unchanged: no report
		{nil, errors.New("down")},                           // error: keeps the last
		{map[int]string{0: "a:1"}, nil},                     // incomplete: keeps the last
		{map[int]string{0: "a:1", 1: "c:3"}, nil},           // shard 1 moved
		{map[int]string{0: "a:1", 1: "c:3", 2: "x:9"}, nil}, // a count mismatch: kept
	}
	for _, s := range steps {
		b.set(s.m, s.err)
		time.Sleep(40 * time.Millisecond)
	}
	cancel()
	<-done
	want := [][]string{{"a:1", "b:2"}, {"a:1", "c:3"}}
	if !slices.EqualFunc(reports, want, slices.Equal) {
		t.Errorf("reports %q, want %q", reports, want)
	}
}

func TestStaticBackend(t *testing.T) {
	b, _, err := New(context.Background(), Config{Type: TypeStatic, Static: []string{"a:1", "b:2"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if Name(b) != TypeStatic {
		t.Errorf("Name = %s", Name(b))
	}
	got, err := WaitFor(context.Background(), b, "ps", 2, time.Second, nil)
	if err != nil || !slices.Equal(got, []string{"a:1", "b:2"}) {
		t.Errorf("static ps %q, %v", got, err)
	}
	if _, _, err := New(context.Background(), Config{Type: TypeStatic}, nil); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("empty static list: %v", err)
	}
	if _, _, err := New(context.Background(), Config{Type: "etcd"}, nil); err == nil || !strings.Contains(err.Error(), "tf_config") {
		t.Errorf("unknown type: %v", err)
	}
}
