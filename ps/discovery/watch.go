package discovery

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/monolith-go/monolith/internal/zk"
)

// Watch follows the shard nodes under root and calls onChange with numShards addresses,
// indexed by shard ("" for a missing or ignored shard), after the first complete listing
// and whenever the addresses change (never twice in a row with equal contents). onChange
// runs on Watch's goroutine and owns the slice. Watch blocks until ctx is done and then
// returns nil, having stopped every goroutine it started and closed its connection; it
// fails at once only on invalid arguments. A nil logger discards.
func Watch(ctx context.Context, servers []string, root string, numShards int, logger *slog.Logger, onChange func(addrs []string)) error {
	if err := checkServers(servers); err != nil {
		return err
	}
	if err := checkRoot(root); err != nil {
		return err
	}
	if numShards < 1 || numShards > MaxShards {
		return fmt.Errorf("%w: %d shards", ErrInvalidArgument, numShards)
	}
	logger = orDiscard(logger).With("root", root)
	c, err := connect(ctx, servers, logger)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("ps/discovery: watch %s: %w", root, err)
	}
	defer c.Close() // stops the watches and waits for their goroutines
	w := &watcher{
		ctx:     ctx,
		c:       c,
		root:    root,
		n:       numShards,
		logger:  logger,
		changed: make(chan struct{}, 1),
		nodes:   map[string]*watchedNode{},
	}
	w.run(onChange)
	return nil
}

// watcher is Watch's state. The watches' callbacks update it under mu, each on its
// watch's goroutine, and signal changed; Watch's goroutine reports it.
type watcher struct {
	ctx     context.Context
	c       *zk.Client
	root    string
	n       int
	logger  *slog.Logger
	changed chan struct{} // 1-buffered: the view may have changed

	mu    sync.Mutex
	busy  int                     // callbacks reading a new listing: the view is incomplete
	list  *listing                // the children watch of root; nil while root is missing
	nodes map[string]*watchedNode // children of root by name
}

// listing is a children watch of root; a root that is re-created gets a new one, and the
// callbacks of a replaced one change nothing.
type listing struct{ w *zk.Watch } // w is nil while starting

// watchedNode is a child of root; a child that leaves and comes back gets a new one.
type watchedNode struct {
	w     *zk.Watch // its data watch; nil while starting and for ignored names
	addr  string    // "" when the node is missing or ignored
	shard int       // valid when addr != ""
	// ignoredName marks a child that is not a shard node: it is never read.
	ignoredName bool
}

// run watches root's data (its existence) until ctx is done, then reports the view after
// every change.
func (w *watcher) run(onChange func([]string)) {
	var b zk.Backoff
	for {
		_, err := w.c.WatchData(w.ctx, w.root, w.onRoot)
		if err == nil {
			break
		}
		if w.ctx.Err() != nil {
			return
		}
		d := b.Next()
		w.logger.Warn("zookeeper watch of the root failed; retrying", "err", err, "retry_in", d)
		select {
		case <-w.ctx.Done():
			return
		case <-time.After(d):
		}
	}
	var last []string
	for {
		if addrs, ok := w.view(); ok && (last == nil || !slices.Equal(addrs, last)) {
			last = addrs
			onChange(slices.Clone(addrs))
		}
		select {
		case <-w.ctx.Done():
			return
		case <-w.changed:
		}
	}
}

// view returns the addresses; false while a new listing is being read.
func (w *watcher) view() ([]string, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.busy > 0 {
		return nil, false
	}
	addrs := make([]string, w.n)
	for _, nd := range w.nodes {
		if nd.addr != "" {
			addrs[nd.shard] = nd.addr
		}
	}
	return addrs, true
}

// signal wakes run without blocking.
func (w *watcher) signal() {
	select {
	case w.changed <- struct{}{}:
	default:
	}
}

// begin marks the view incomplete until the returned function runs, which signals run.
func (w *watcher) begin() (end func()) {
	w.busy++ // under mu
	return func() {
		w.mu.Lock()
		w.busy--
		w.mu.Unlock()
		w.signal()
	}
}

// onRoot is the root's data callback: a root that appears (or is re-created) gets a new
// children watch, one that is deleted has no shards.
func (w *watcher) onRoot(_ []byte, stat *zk.Stat, ev zk.DataEvent) bool {
	if ev == zk.DataChanged {
		return true
	}
	var l *listing
	if stat != nil {
		l = &listing{}
	}
	w.mu.Lock()
	stop := make([]*zk.Watch, 0, len(w.nodes)+1)
	if w.list != nil {
		stop = append(stop, w.list.w)
	}
	for _, nd := range w.nodes {
		stop = append(stop, nd.w)
	}
	w.list, w.nodes = l, map[string]*watchedNode{}
	defer w.begin()()
	w.mu.Unlock()
	stopWatches(stop)
	if l == nil {
		return true
	}
	cw, err := w.c.WatchChildrenRetry(w.ctx, w.root, func(ctx context.Context, children []string) (bool, error) {
		return w.onChildren(ctx, l, children)
	})
	if err != nil {
		// A root deleted meanwhile is reported by this data watch.
		if !errors.Is(err, zk.ErrNoNode) && w.ctx.Err() == nil {
			w.logger.Warn("zookeeper watch of the root's children failed", "err", err)
		}
		return true
	}
	w.adopt(&l.w, cw, func() bool { return w.list == l })
	return true
}

// onChildren is the callback of listing l: it forgets the children gone, and starts a
// data watch on each new shard node, whose first call reads it, before the view is
// complete again. A failure leaves the nodes not watched yet to the retried call.
func (w *watcher) onChildren(ctx context.Context, l *listing, children []string) (bool, error) {
	w.mu.Lock()
	if w.list != l {
		w.mu.Unlock()
		return false, nil
	}
	present := make(map[string]bool, len(children))
	var start []string
	var stop []*zk.Watch
	for _, name := range children {
		present[name] = true
		if w.nodes[name] != nil {
			continue
		}
		nd := &watchedNode{}
		if _, ok := parseNodeName(name); ok {
			start = append(start, name)
		} else {
			nd.ignoredName = true
			w.logger.Warn("ignoring a node that is not named shard-NNNNN", "node", w.root+"/"+name)
		}
		w.nodes[name] = nd
	}
	for name, nd := range w.nodes {
		if !present[name] {
			delete(w.nodes, name)
			stop = append(stop, nd.w)
		}
	}
	placed := make(map[string]*watchedNode, len(start))
	for _, name := range start {
		placed[name] = w.nodes[name]
	}
	defer w.begin()()
	w.mu.Unlock()
	stopWatches(stop)
	for i, name := range start {
		if err := w.watchNode(ctx, name, placed[name]); err != nil {
			w.mu.Lock()
			for _, n := range start[i:] {
				if w.nodes[n] == placed[n] {
					delete(w.nodes, n)
				}
			}
			w.mu.Unlock()
			return true, fmt.Errorf("ps/discovery: watch %s: %w", w.root+"/"+name, err)
		}
	}
	return true, nil
}

// watchNode starts the data watch of node nd, named name, unless it left meanwhile.
func (w *watcher) watchNode(ctx context.Context, name string, nd *watchedNode) error {
	dw, err := w.c.WatchData(ctx, w.root+"/"+name, func(data []byte, stat *zk.Stat, _ zk.DataEvent) bool {
		return w.onNode(name, nd, data, stat)
	})
	if err != nil {
		return err
	}
	w.adopt(&nd.w, dw, func() bool { return w.nodes[name] == nd })
	return nil
}

// adopt stores x, a watch just started, in *slot if current() still holds under mu; else
// what it watches was replaced meanwhile, and x is stopped.
func (w *watcher) adopt(slot **zk.Watch, x *zk.Watch, current func() bool) {
	w.mu.Lock()
	ok := current()
	if ok {
		*slot = x
	}
	w.mu.Unlock()
	if !ok {
		x.Stop()
	}
}

// onNode is the data callback of a shard node: it records the node's address ("" when
// the node is missing or ignored) and signals run, unless the node left.
func (w *watcher) onNode(name string, nd *watchedNode, data []byte, stat *zk.Stat) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.nodes[name] != nd {
		return false
	}
	nd.addr = ""
	if stat != nil {
		node, err := parseNode(name, data, w.n)
		if err != nil {
			w.logger.Warn("ignoring a shard node", "node", w.root+"/"+name, "err", err)
		} else {
			nd.addr, nd.shard = node.Addr, node.Shard
		}
	}
	w.signal()
	return true
}

// stopWatches stops the watches that have started (nil: still starting, or none).
func stopWatches(ws []*zk.Watch) {
	for _, x := range ws {
		if x != nil {
			x.Stop()
		}
	}
}
