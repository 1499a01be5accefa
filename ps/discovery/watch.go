package discovery

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/go-zookeeper/zk"
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
	var b backoff
	var conn *zk.Conn
	for {
		var err error
		if conn, err = connect(servers, logger, nil); err == nil {
			break
		}
		logger.Warn("zookeeper connect failed; retrying", "err", err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(b.next()):
		}
	}
	w := &watcher{
		conn:     conn,
		root:     root,
		n:        numShards,
		logger:   logger,
		onChange: onChange,
		events:   make(chan watchEvent),
		stop:     make(chan struct{}),
		nodes:    map[string]*watchedNode{},
	}
	// Closing the Conn when ctx ends fails the calls in flight at once.
	stopClose := context.AfterFunc(ctx, conn.Close)
	defer func() {
		stopClose()
		close(w.stop) // forwarders exit
		conn.Close()
	}()
	w.run(ctx)
	return nil
}

// watcher is Watch's state; it lives on Watch's goroutine.
type watcher struct {
	conn     *zk.Conn
	root     string
	n        int
	logger   *slog.Logger
	onChange func([]string)
	events   chan watchEvent
	stop     chan struct{}

	seq       uint64                  // last watch id handed out
	rootSeq   uint64                  // id of the armed root watch; 0 when none is armed
	nodes     map[string]*watchedNode // children of root by name
	last      []string                // last reported addresses
	reported  bool
	lastError string // last sync error logged, to log a persistent one once
}

// watchedNode is a child of root.
type watchedNode struct {
	seq  uint64 // id of the armed data watch; 0 when the data must be (re)read
	addr string // "" when the node is ignored
	// shard is valid when addr != "".
	shard int
	// ignoredName marks a child that is not a shard node: it is never read.
	ignoredName bool
}

// watchEvent is a fired watch, tagged with the id it was armed with.
type watchEvent struct {
	seq  uint64
	name string // child name; "" for the root watch
	ev   zk.Event
}

func (w *watcher) run(ctx context.Context) {
	var b backoff
	var retry <-chan time.Time
	for {
		if retry == nil {
			if err := w.sync(); err != nil {
				if ctx.Err() != nil {
					return
				}
				d := b.next()
				if err.Error() != w.lastError {
					w.logger.Warn("zookeeper listing failed; retrying", "err", err, "retry_in", d)
					w.lastError = err.Error()
				}
				retry = time.After(d)
			} else {
				b.reset()
				w.lastError = ""
				w.report()
			}
		}
		select {
		case <-ctx.Done():
			return
		case e := <-w.events:
			w.handle(e)
			w.drain()
		case <-retry:
			retry = nil
		}
	}
}

// forward hands the single event of a watch channel to the run loop, tagged with seq.
func (w *watcher) forward(ch <-chan zk.Event, seq uint64, name string) {
	go func() {
		select {
		case ev, ok := <-ch:
			if !ok {
				return
			}
			select {
			case w.events <- watchEvent{seq: seq, name: name, ev: ev}:
			case <-w.stop:
			}
		case <-w.stop:
		}
	}()
}

// drain handles the events that are ready, so a burst costs one sync.
func (w *watcher) drain() {
	for {
		select {
		case e := <-w.events:
			w.handle(e)
		default:
			return
		}
	}
}

// handle disarms the watch that fired, so that the next sync re-reads what it covered.
// Events of watches that were replaced meanwhile are ignored.
func (w *watcher) handle(e watchEvent) {
	if e.name == "" {
		if e.seq == w.rootSeq {
			w.rootSeq = 0
		}
		return
	}
	nd := w.nodes[e.name]
	if nd == nil || nd.seq != e.seq {
		return
	}
	nd.seq = 0
	if e.ev.Type == zk.EventNodeDeleted {
		delete(w.nodes, e.name)
	}
}

// sync re-arms the root watch (re-listing the children) and the data watch of every node
// whose watch fired. It returns nil when the view is complete.
func (w *watcher) sync() error {
	for w.rootSeq == 0 {
		children, _, ch, err := w.conn.ChildrenW(w.root)
		if errors.Is(err, zk.ErrNoNode) {
			exists, _, ech, err := w.conn.ExistsW(w.root)
			if err != nil {
				return fmt.Errorf("exists %s: %w", w.root, err)
			}
			w.arm(ech, "")
			if exists { // created meanwhile: list it (the exists watch goes stale)
				w.rootSeq = 0
				continue
			}
			clear(w.nodes)
			break
		}
		if err != nil {
			return fmt.Errorf("children of %s: %w", w.root, err)
		}
		w.arm(ch, "")
		present := make(map[string]bool, len(children))
		for _, name := range children {
			present[name] = true
			if w.nodes[name] == nil {
				nd := &watchedNode{}
				if _, ok := parseNodeName(name); !ok {
					nd.ignoredName = true
					w.logger.Warn("ignoring a node that is not named shard-NNNNN", "node", w.root+"/"+name)
				}
				w.nodes[name] = nd
			}
		}
		for name := range w.nodes {
			if !present[name] {
				delete(w.nodes, name)
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(w.nodes)) {
		nd := w.nodes[name]
		if nd.ignoredName || nd.seq != 0 {
			continue
		}
		path := w.root + "/" + name
		data, _, ch, err := w.conn.GetW(path)
		if errors.Is(err, zk.ErrNoNode) {
			delete(w.nodes, name) // the root watch reports the deletion as well
			continue
		}
		if err != nil {
			return fmt.Errorf("get %s: %w", path, err)
		}
		nd.seq = w.arm(ch, name)
		node, err := parseNode(name, data, w.n)
		if err != nil {
			nd.addr = ""
			w.logger.Warn("ignoring a shard node", "node", path, "err", err)
			continue
		}
		nd.addr, nd.shard = node.Addr, node.Shard
	}
	return nil
}

// arm registers a watch channel under a new id and returns the id; for the root ("") the
// id becomes rootSeq.
func (w *watcher) arm(ch <-chan zk.Event, name string) uint64 {
	w.seq++
	if name == "" {
		w.rootSeq = w.seq
	}
	w.forward(ch, w.seq, name)
	return w.seq
}

// report calls onChange when the addresses differ from the last report.
func (w *watcher) report() {
	addrs := make([]string, w.n)
	for _, nd := range w.nodes {
		if nd.addr != "" {
			addrs[nd.shard] = nd.addr
		}
	}
	if w.reported && slices.Equal(addrs, w.last) {
		return
	}
	w.reported, w.last = true, addrs
	w.onChange(slices.Clone(addrs))
}
