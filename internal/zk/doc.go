// Package zk is the project's one ZooKeeper session client, on go-zookeeper, with kazoo's semantics: context-bounded operations retried across connection losses (capped exponential backoff with jitter), makepath, owned ephemeral and ephemeral-sequential nodes re-created in every new session, and children and data watches that re-arm.
// Callbacks run on each watch's own goroutine, never on go-zookeeper's (which is only signalled); session events, reconnects, expiries and re-registrations are counted by Metrics; go-zookeeper's log goes to a slog.Logger.
// Its users add their znode layouts on top: ps/discovery (PS shards, service discovery) and serving/zk (the serving agent's ZKBackend); tests run a real ZooKeeper (internal/zktest).
package zk
