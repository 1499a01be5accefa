package discovery

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"
)

// WaitAll watches root until all numShards shards are registered and returns their
// addresses, in shard order. It fails when wait passes first (naming the shards that are
// still missing) or when ctx is done.
func WaitAll(ctx context.Context, servers []string, root string, numShards int, wait time.Duration, logger *slog.Logger) ([]string, error) {
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	var (
		mu   sync.Mutex
		last []string
	)
	got := make(chan []string, 1)
	done := make(chan error, 1)
	go func() {
		done <- Watch(wctx, servers, root, numShards, logger, func(addrs []string) { // owns addrs
			mu.Lock()
			last = addrs
			mu.Unlock()
			if !slices.Contains(addrs, "") {
				select {
				case got <- addrs:
				default:
				}
			}
		})
	}()
	select {
	case addrs := <-got:
		cancel()
		<-done
		return addrs, nil
	case err := <-done:
		mu.Lock()
		defer mu.Unlock()
		if wctx.Err() != nil && ctx.Err() == nil {
			return nil, fmt.Errorf("discovery: not every shard registered under %s within %v (have %q)", root, wait, last)
		}
		if err == nil {
			err = errors.New("watch ended")
		}
		return nil, fmt.Errorf("discovery: shards under %s: %w", root, err)
	}
}
