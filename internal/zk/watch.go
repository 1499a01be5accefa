package zk

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	gozk "github.com/go-zookeeper/zk"
)

// Watch is a running WatchChildren or WatchData. Its methods are safe for concurrent use.
type Watch struct {
	path   string
	cancel context.CancelFunc
	done   chan struct{}
}

// Path is the watched node.
func (w *Watch) Path() string { return w.path }

// Stop ends the watch without waiting (so the watch's own callback may call it); the
// callback is not called again once Done is closed.
func (w *Watch) Stop() { w.cancel() }

// Done is closed when the watch has ended: stopped, its callback returned false, its node
// vanished (children watches), or the Client closed.
func (w *Watch) Done() <-chan struct{} { return w.done }

// Stopped reports whether the watch has ended.
func (w *Watch) Stopped() bool {
	select {
	case <-w.done:
		return true
	default:
		return false
	}
}

// WatchChildren is kazoo's ChildrenWatch: it calls fn with the sorted children of path at
// once and after every change of the list, until fn returns false, the node does not exist
// or is deleted, Stop, or Close. Watches lost with a session are re-armed on the new one;
// fn is then called only if the list changed meanwhile. fn runs on the watch's own
// goroutine (never on go-zookeeper's), one call at a time, and may block. WatchChildren
// returns after the first call, bounded by ctx; a missing node is an error wrapping
// ErrNoNode.
func (c *Client) WatchChildren(ctx context.Context, path string, fn func(children []string) bool) (*Watch, error) {
	return c.WatchChildrenRetry(ctx, path, func(_ context.Context, children []string) (bool, error) {
		return fn(children), nil
	})
}

// WatchChildrenRetry is WatchChildren with a callback that may fail: an error is logged
// and the listing retried (and fn called again) after a backoff, and WatchChildrenRetry
// returns after fn's first success. ErrIncomplete from fn counts as a success that fn wants
// to see again: it is called once more after a backoff unless the children change first.
// ctx passed to fn ends with the watch.
func (c *Client) WatchChildrenRetry(ctx context.Context, path string, fn func(ctx context.Context, children []string) (bool, error)) (*Watch, error) {
	return c.startWatch(ctx, path, func(wctx context.Context, first chan<- error) {
		c.childrenLoop(wctx, path, fn, first)
	})
}

// DataEvent says why a WatchData callback runs.
type DataEvent int

// Data events.
const (
	DataInitial DataEvent = iota // the first call (the node may be missing)
	DataCreated                  // the node was created
	DataChanged                  // the node's data was written
	DataDeleted                  // the node was deleted (data and stat are nil)
)

// String returns the event's name.
func (e DataEvent) String() string {
	switch e {
	case DataInitial:
		return "initial"
	case DataCreated:
		return "created"
	case DataChanged:
		return "changed"
	case DataDeleted:
		return "deleted"
	}
	return fmt.Sprintf("DataEvent(%d)", int(e))
}

// WatchData is kazoo's DataWatch: it calls fn at once (data and stat nil when the node is
// missing) and after every write, deletion (data and stat nil) and re-creation of path,
// until fn returns false, Stop, or Close; a deleted node keeps being watched. Watches lost
// with a session are re-armed on the new one; fn is then called only if the node changed
// meanwhile. fn runs on the watch's own goroutine, one call at a time, and may block.
// WatchData returns after the first call, bounded by ctx.
func (c *Client) WatchData(ctx context.Context, path string, fn func(data []byte, stat *Stat, ev DataEvent) bool) (*Watch, error) {
	return c.startWatch(ctx, path, func(wctx context.Context, first chan<- error) {
		c.dataLoop(wctx, path, fn, first)
	})
}

// startWatch runs loop on a new goroutine and waits for its first report: nil after the
// first callback, or an error when it gave up.
func (c *Client) startWatch(ctx context.Context, path string, loop func(context.Context, chan<- error)) (*Watch, error) {
	if err := CheckPath(path); err != nil {
		return nil, err
	}
	wctx, cancel := context.WithCancel(c.ctx)
	w := &Watch{path: path, cancel: cancel, done: make(chan struct{})}
	first := make(chan error, 1)
	c.mu.Lock()
	if c.ctx.Err() != nil {
		c.mu.Unlock()
		cancel()
		return nil, fmt.Errorf("%w: watch %s", ErrClosed, path)
	}
	c.wg.Add(1)
	c.mu.Unlock()
	go func() {
		defer c.wg.Done()
		defer close(w.done)
		defer cancel()
		loop(wctx, first)
		select { // the loop ended before its first report
		case first <- fmt.Errorf("%w: watch %s", ErrClosed, path):
		default:
		}
	}()
	select {
	case err := <-first:
		if err != nil {
			<-w.done
			return nil, err
		}
		return w, nil
	case <-ctx.Done():
		cancel()
		<-w.done
		return nil, fmt.Errorf("zk: watch %s: %w", path, ctx.Err())
	}
}

// ErrIncomplete, from a WatchChildrenRetry callback, means that it applied what it could
// but some of what it read depends on other nodes that may yet appear: the watch treats the
// call as a success and calls it again after a backoff unless the children change first.
var ErrIncomplete = errors.New("zk: incomplete")

// childrenLoop is the body of a children watch; see WatchChildren.
func (c *Client) childrenLoop(ctx context.Context, path string, fn func(context.Context, []string) (bool, error), first chan<- error) {
	var (
		prior    []string
		called   bool // fn succeeded at least once
		skipSame bool // re-armed after a lost watch: an unchanged list is not reported
		b        Backoff
	)
	wait := func(d time.Duration) bool {
		select {
		case <-time.After(d):
			return true
		case <-ctx.Done():
			return false
		}
	}
	// pending is a watch still armed when the loop looks again before it fired (a retried
	// callback): the list is read without arming another one, which go-zookeeper would keep
	// beside it until the children change.
	var pending <-chan gozk.Event
	for {
		var (
			children []string
			ch       <-chan gozk.Event
		)
		armed := pending // the closure may outlive do when ctx ends: it reads only its copy
		err := c.do(ctx, "watch children of", path, func() error {
			if armed != nil {
				cs, _, err := c.conn.Children(path)
				children, ch = cs, armed
				return err
			}
			cs, _, ech, err := c.conn.ChildrenW(path)
			children, ch = cs, ech
			return err
		})
		pending = nil
		switch {
		case ctx.Err() != nil:
			return
		case errors.Is(err, gozk.ErrNoNode) || (err != nil && !called):
			if !called {
				first <- err
			} else {
				c.logger.Info("children watch ends: the node is gone", "znode", path)
			}
			return
		case err != nil:
			c.logger.Warn("children watch: listing failed; retrying", "znode", path, "err", err)
			if !wait(b.Next()) {
				return
			}
			continue
		}
		slices.Sort(children)
		if !skipSame || !called || !slices.Equal(children, prior) {
			keep, err := fn(ctx, children)
			if ctx.Err() != nil {
				return
			}
			if err != nil && !errors.Is(err, ErrIncomplete) {
				c.logger.Warn("children watch: callback failed; retrying", "znode", path, "err", err)
				skipSame = false
				pending = ch
				if !wait(b.Next()) {
					return
				}
				continue
			}
			prior = children
			if !called {
				called = true
				first <- nil
			}
			if !keep {
				return
			}
			if err != nil { // ErrIncomplete: listen, and look again after a backoff
				skipSame = false
				select {
				case <-ch:
				case <-time.After(b.Next()):
					pending = ch
				case <-ctx.Done():
					return
				}
				continue
			}
		}
		b.Reset()
		skipSame = false
		select {
		case ev := <-ch:
			if ev.Type == gozk.EventNotWatching {
				skipSame = true
				c.logger.Info("children watch lost; re-arming", "znode", path, "err", ev.Err)
			}
		case <-ctx.Done():
			return
		}
	}
}

// dataLoop is the body of a data watch; see WatchData.
func (c *Client) dataLoop(ctx context.Context, path string, fn func([]byte, *Stat, DataEvent) bool, first chan<- error) {
	var (
		last   *Stat // stat at the last call; nil when the node was missing
		called bool
		b      Backoff
	)
	for {
		var (
			data []byte
			stat *Stat
			ch   <-chan gozk.Event
		)
		err := c.do(ctx, "watch data of", path, func() error {
			for {
				d, s, ech, err := c.conn.GetW(path)
				if !errors.Is(err, gozk.ErrNoNode) {
					data, stat, ch = d, s, ech
					return err
				}
				ok, _, ech, err := c.conn.ExistsW(path)
				if err != nil || !ok {
					data, stat, ch = nil, nil, ech
					return err
				}
				// Created meanwhile: read it (the exists watch goes stale).
			}
		})
		switch {
		case ctx.Err() != nil:
			return
		case err != nil && !called:
			first <- err
			return
		case err != nil:
			c.logger.Warn("data watch: read failed; retrying", "znode", path, "err", err)
			select {
			case <-time.After(b.Next()):
				continue
			case <-ctx.Done():
				return
			}
		}
		b.Reset()
		ev, call := DataInitial, true
		switch {
		case !called:
		case last == nil && stat == nil:
			call = false
		case last == nil:
			ev = DataCreated
		case stat == nil:
			ev = DataDeleted
		case stat.Czxid != last.Czxid:
			ev = DataCreated
		case stat.Mzxid != last.Mzxid:
			ev = DataChanged
		default:
			call = false
		}
		if call {
			keep := fn(data, stat, ev)
			last = stat
			if !called {
				called = true
				first <- nil
			}
			if !keep {
				return
			}
		}
		select {
		case ev := <-ch:
			if ev.Type == gozk.EventNotWatching {
				c.logger.Info("data watch lost; re-arming", "znode", path, "err", ev.Err)
			}
		case <-ctx.Done():
			return
		}
	}
}
