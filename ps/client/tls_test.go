package client_test

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/monolith-go/monolith/internal/tlsconf"
	"github.com/monolith-go/monolith/internal/tlsconf/tlstest"
	"github.com/monolith-go/monolith/ps/client"
	"github.com/monolith-go/monolith/ps/server"
)

// TestTLS: a shard serving mutual TLS with certificates generated here answers a client
// with a certificate of its CA, and refuses a plaintext client, one presenting no
// certificate and one whose certificate another CA signed.
func TestTLS(t *testing.T) {
	files := tlstest.New(t)
	srvTLS, err := files.Good.Server()
	if err != nil {
		t.Fatal(err)
	}
	sh := startShard(t, 0, 1, "", func(o *server.Options) { o.TLS = srvTLS })
	addr := sh.srv.Addr()
	noCert := files.Good
	noCert.Cert, noCert.Key, noCert.Mutual = "", "", false
	for _, tc := range []struct {
		name string
		cfg  *tlsconf.Config // nil: plaintext
		ok   bool
	}{
		{"mutual", &files.Good, true},
		{"plaintext", nil, false},
		{"no client certificate", &noCert, false},
		{"certificate of another CA", &files.Rogue, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var opts []client.Option
			if tc.cfg != nil {
				cc, err := tc.cfg.Client()
				if err != nil {
					t.Fatal(err)
				}
				opts = append(opts, client.WithTLS(cc))
			}
			c := newClient(t, []string{addr}, append(opts, client.WithRetries(0), client.WithCallTimeout(5*time.Second))...)
			_, err := c.Lookup(ctx(t), "sgd", 2, []int64{1, 2}, client.LookupOptions{})
			if tc.ok && err != nil {
				t.Fatalf("lookup over TLS: %v", err)
			}
			if !tc.ok && (err == nil || status.Code(err) != codes.Unavailable) {
				t.Fatalf("lookup: %v, want a refused connection (Unavailable)", err)
			}
		})
	}
	// Configs that cannot work are errors naming the flags.
	for _, bad := range []tlsconf.Config{
		{Cert: files.Good.Cert},
		{Cert: files.Good.Cert, Key: files.Good.Key},
		{Mutual: true},
		{CA: files.Good.CA, Mutual: true},
		{CA: files.Dir + "/missing.pem"},
	} {
		_, serr := bad.Server()
		_, cerr := bad.Client()
		if serr == nil || cerr == nil || !strings.Contains(serr.Error()+cerr.Error(), "--tls-") {
			t.Errorf("%+v: server %v, client %v; want errors naming the flag", bad, serr, cerr)
		}
	}
}
