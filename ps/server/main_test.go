package server

import (
	"context"
	"log/slog"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/encoding/prototext"

	"github.com/monolith-go/monolith/schemas/pspb"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testTables are two small tables: "emb" (dim 4, zeros, SGD 0.1) and "two" (a dim-1 SGD
// segment with lr 1 and a dim-2 Adagrad segment initialized to ones), both admitting
// every fid.
const testTables = `
tables {
  name: "emb"
  config {
    entry_config { segments { dim_size: 4 init_config { zeros {} } opt_config { sgd { learning_rate: 0.1 } } } }
    cuckoo {}
  }
  filter { type: NONE }
}
tables {
  name: "two"
  config {
    entry_config {
      segments { dim_size: 1 init_config { zeros {} } opt_config { sgd { learning_rate: 1 } } }
      segments { dim_size: 2 init_config { ones {} } opt_config { adagrad { learning_rate: 0.1 } } }
    }
    cuckoo {}
  }
  filter { type: NONE }
}
`

func tablesConfig(t testing.TB, text string) *pspb.TablesConfig {
	t.Helper()
	var c pspb.TablesConfig
	if err := prototext.Unmarshal([]byte(text), &c); err != nil {
		t.Fatal(err)
	}
	return &c
}

func testOptions(t testing.TB) Options {
	o := DefaultOptions()
	o.Tables = tablesConfig(t, testTables)
	o.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	return o
}

// running is a served Server and a raw gRPC stub to it.
type running struct {
	srv    *Server
	stub   pspb.ParameterServerClient
	cc     *grpc.ClientConn
	cancel context.CancelFunc
	done   chan error
}

// stop cancels Serve (graceful stop, final save) and returns its error.
func (r *running) stop(t testing.TB) error {
	t.Helper()
	r.cancel()
	select {
	case err := <-r.done:
		return err
	case <-time.After(30 * time.Second):
		t.Fatal("Serve did not return")
		return nil
	}
}

// start builds a server from opts, serves it and dials it. Cleanup stops it.
func start(t testing.TB, opts Options) *running {
	t.Helper()
	return startWith(t, opts, nil)
}

// startWith is start with a hook called between New and Serve.
func startWith(t testing.TB, opts Options, hook func(*Server)) *running {
	t.Helper()
	s, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	if hook != nil {
		hook(s)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{srv: s, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- s.Serve(ctx) }()
	cc, err := grpc.NewClient(s.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	r.cc, r.stub = cc, pspb.NewParameterServerClient(cc)
	t.Cleanup(func() {
		cc.Close()
		cancel()
		s.Close()
		select {
		case <-r.done:
		default:
		}
	})
	return r
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}
