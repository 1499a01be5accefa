package client_test

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"testing"

	"google.golang.org/protobuf/encoding/prototext"

	"github.com/monolith-go/monolith/ps/client"
	"github.com/monolith-go/monolith/ps/server"
	"github.com/monolith-go/monolith/schemas/pspb"
)

// BenchmarkLookupGRPC looks up 1000 fids of dim 32 (half of them present) from one shard
// over loopback: the setup of the gRPC row of `monolith bench` (benchmarks/suite).
func BenchmarkLookupGRPC(b *testing.B) {
	const entries, batch, dim = 100_000, 1000, 32
	var tables pspb.TablesConfig
	if err := prototext.Unmarshal([]byte(`tables { name: "emb" config {
		entry_config { segments { dim_size: 32 init_config { zeros {} } opt_config { sgd {} } } }
		cuckoo {} } filter { type: NONE } }`), &tables); err != nil {
		b.Fatal(err)
	}
	o := server.DefaultOptions()
	o.Tables, o.Logger = &tables, slog.New(slog.DiscardHandler)
	srv, err := server.New(o)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	b.Cleanup(func() { cancel(); <-done })
	fids := make([]int64, entries)
	for i := range fids {
		fids[i] = int64(i)
	}
	if _, err := srv.Tables()[0].Assign(fids, make([]float32, entries*dim), 1); err != nil {
		b.Fatal(err)
	}
	c := newClient(b, []string{srv.Addr()})
	r := rand.New(rand.NewPCG(1, 2))
	ids := make([]int64, batch)
	for i := range ids {
		ids[i] = int64(r.IntN(2 * entries))
	}
	b.SetBytes(batch * dim * 4)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Lookup(ctx, "emb", dim, ids, client.LookupOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}
