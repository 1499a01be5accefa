//go:build !race

package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/monolith-go/monolith/internal/syncbuf"
	"github.com/monolith-go/monolith/internal/tlsconf"
	"github.com/monolith-go/monolith/internal/tlsconf/tlstest"
)

// TestTLSCommands: with certificates generated here, `monolith ps --tls-…` serves mutual
// TLS: ps-client and train with the CA's certificate reach it, ps-client in plaintext or
// with a certificate of another CA is refused; `monolith cluster --tls-…` hands the
// options to every child and trains.
func TestTLSCommands(t *testing.T) {
	t.Setenv(envTestMain, "1")
	files := tlstest.New(t)
	dir := t.TempDir()
	cfg := clusterData(t, dir, 4000, 1)
	tables := filepath.Join(dir, "tables.pbtxt")
	var so, se syncbuf.Buffer
	if err := run(context.Background(), []string{"train", "--config", cfg, "--write-tables", tables}, &so, &se); err != nil {
		t.Fatalf("train --write-tables: %v\n%s", err, se.String())
	}
	good, rogue := files.Good.Args(), files.Rogue.Args()
	ps := startPS(t, append([]string{"--tables", tables, "--checkpoint-dir", filepath.Join(dir, "m1")}, good...)...)

	var stats map[string]any
	psClient(t, &stats, append([]string{"stats", "--ps", ps.addr}, good...)...)
	for name, extra := range map[string][]string{"plaintext": nil, "another CA": rogue} {
		_, stderr, err := runCLI(t, append([]string{"ps-client", "stats", "--ps", ps.addr, "--retries", "0", "--call-timeout", "5s"}, extra...)...)
		if err == nil || !strings.Contains(err.Error()+stderr, "Unavailable") {
			t.Errorf("ps-client %s against a mutual-TLS shard: %v %s, want refused", name, err, stderr)
		}
	}
	so = syncbuf.Buffer{}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	args := append([]string{"train", "--config", cfg, "--ps", ps.addr, "--checkpoint-dir", filepath.Join(dir, "m1"), "--progress", "never"}, good...)
	if err := run(ctx, args, &so, &se); err != nil {
		t.Fatalf("train over TLS: %v\n%s", err, se.String())
	}
	if s := decodeSummary(t, so.String()); s.Examples != 4000 {
		t.Errorf("train over TLS: %d examples, want 4000", s.Examples)
	}
	if err := ps.stop(t); err != nil {
		t.Fatal(err)
	}

	var co, ce bytes.Buffer
	if err := run(ctx, append([]string{"cluster", "--config", cfg, "--workers", "2", "--ps", "2", "--checkpoint-dir", filepath.Join(dir, "m2")}, good...), &co, &ce); err != nil {
		t.Fatalf("cluster over TLS: %v\n%s", err, ce.String())
	}
	if s := decodeSummary(t, co.String()); s.Examples != 4000 || s.EvalAUC == nil {
		t.Errorf("cluster over TLS: %s", co.String())
	}
	// Settings that cannot work are usage errors naming the flag.
	caOnly := tlsconf.Config{CA: files.Good.CA}
	for _, args := range [][]string{
		append([]string{"ps", "--tables", tables}, caOnly.Args()...),
		{"ps-client", "stats", "--ps", "127.0.0.1:1", "--tls-mutual"},
		append([]string{"cluster", "--config", cfg}, caOnly.Args()...),
	} {
		if _, _, err := runCLI(t, args...); err == nil || !strings.Contains(err.Error(), "--tls-") {
			t.Errorf("%v: %v, want an error naming the TLS flag", args, err)
		}
	}
}
