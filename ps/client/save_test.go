package client_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/monolith-go/monolith/ps/client"
	"github.com/monolith-go/monolith/ps/server/codec"
	"github.com/monolith-go/monolith/schemas/pspb"
)

// slowSaver is a PS whose Save takes delay (a large shard, a slow disk).
type slowSaver struct {
	pspb.UnimplementedParameterServerServer
	delay time.Duration
}

func (s slowSaver) Save(ctx context.Context, _ *pspb.SaveRequest) (*pspb.SaveResponse, error) {
	select {
	case <-time.After(s.delay):
		return &pspb.SaveResponse{Path: "saved"}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// TestSaveHasItsOwnDeadline: a save longer than the call timeout completes under the save
// timeout, and the save timeout still bounds it.
func TestSaveHasItsOwnDeadline(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(codec.ServerOptions(codec.DefaultMaxMessageBytes)...)
	pspb.RegisterParameterServerServer(srv, slowSaver{delay: 300 * time.Millisecond})
	go func() { _ = srv.Serve(ln) }()
	defer srv.Stop()
	for _, tc := range []struct {
		name string
		save time.Duration
		ok   bool
	}{
		{"save timeout above the save", 5 * time.Second, true},
		{"save timeout below the save", 100 * time.Millisecond, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := client.New([]string{ln.Addr().String()}, client.WithCallTimeout(50*time.Millisecond), client.WithSaveTimeout(tc.save), client.WithRetries(0))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			resp, err := c.Save(context.Background())
			if tc.ok && (err != nil || resp[0].GetPath() != "saved") {
				t.Fatalf("a 300 ms save with a 50 ms call timeout and a %v save timeout: %v, %v", tc.save, resp, err)
			}
			var te *client.TimeoutError
			if !tc.ok && !errors.As(err, &te) && !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("a 300 ms save with a %v save timeout: %v, want a timeout", tc.save, err)
			}
		})
	}
}
