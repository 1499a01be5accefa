package zk

import (
	"context"
	"sync"
)

// WatchSet is a set of watches on one Client, at most one per path, stopped together: the
// shape of caches that follow a tree level by level (serving/replica's Watcher). Its
// methods are safe for concurrent use.
type WatchSet struct {
	c       *Client
	mu      sync.Mutex
	watched map[string]bool
	watches []*Watch
}

// NewWatchSet returns an empty set on c.
func NewWatchSet(c *Client) *WatchSet { return &WatchSet{c: c, watched: map[string]bool{}} }

// claim marks path watched; false when it already is.
func (s *WatchSet) claim(path string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.watched[path] {
		return false
	}
	s.watched[path] = true
	return true
}

// keep records a started watch, or releases path when it did not start.
func (s *WatchSet) keep(path string, w *Watch, err error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		delete(s.watched, path)
		return err
	}
	s.watches = append(s.watches, w)
	return nil
}

// NewChildren watches path's children and calls fn once for each child that appears, with
// the child's full path, on the watch's goroutine (ctx of fn is not bounded). A path the
// set already watches is left alone.
func (s *WatchSet) NewChildren(ctx context.Context, path string, fn func(ctx context.Context, child string)) error {
	if !s.claim(path) {
		return nil
	}
	seen := map[string]bool{}
	w, err := s.c.WatchChildren(ctx, path, func(children []string) bool {
		for _, c := range children {
			if !seen[c] {
				seen[c] = true
				fn(context.Background(), path+"/"+c)
			}
		}
		return true
	})
	return s.keep(path, w, err)
}

// Data is Client.WatchData on path, once per path.
func (s *WatchSet) Data(ctx context.Context, path string, fn func(data []byte, stat *Stat, ev DataEvent) bool) error {
	if !s.claim(path) {
		return nil
	}
	w, err := s.c.WatchData(ctx, path, fn)
	return s.keep(path, w, err)
}

// Stop ends every watch and empties the set, which can then watch again.
func (s *WatchSet) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, w := range s.watches {
		w.Stop()
	}
	s.watches, s.watched = nil, map[string]bool{}
}
