// Package tlstest generates certificates at test time: a CA, a certificate it signs for
// 127.0.0.1 and localhost (usable by servers and clients), and one signed by another CA,
// written as PEM files for internal/tlsconf.
package tlstest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/monolith-go/monolith/internal/tlsconf"
	"google.golang.org/grpc"
)

// Files are the generated configs.
type Files struct {
	// Good has the CA, and a certificate it signs, for mutual TLS.
	Good tlsconf.Config
	// Rogue has the same CA file but a certificate signed by another CA: a server
	// requiring client certificates refuses it.
	Rogue tlsconf.Config
	// Dir holds the PEM files.
	Dir string
}

// New writes the files into a temporary directory of t.
func New(t testing.TB) *Files {
	t.Helper()
	dir := t.TempDir()
	ca, caKey := authority(t, "monolith test CA")
	other, otherKey := authority(t, "another CA")
	writePEM(t, dir, "ca.pem", "CERTIFICATE", ca.Raw)
	good := leaf(t, dir, "good", ca, caKey)
	rogue := leaf(t, dir, "rogue", other, otherKey)
	caFile := filepath.Join(dir, "ca.pem")
	return &Files{
		Good:  tlsconf.Config{CA: caFile, Cert: good[0], Key: good[1], Mutual: true},
		Rogue: tlsconf.Config{CA: caFile, Cert: rogue[0], Key: rogue[1], Mutual: true},
		Dir:   dir,
	}
}

func key(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func authority(t testing.TB, name string) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	k := key(t)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c, k
}

// leaf writes a certificate for 127.0.0.1 and localhost signed by ca; it returns the
// certificate and key paths.
func leaf(t testing.TB, dir, name string, ca *x509.Certificate, caKey *ecdsa.PrivateKey) [2]string {
	t.Helper()
	k := key(t)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &k.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, dir, name+".pem", "CERTIFICATE", der)
	writePEM(t, dir, name+"-key.pem", "EC PRIVATE KEY", kb)
	return [2]string{filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem")}
}

func writePEM(t testing.TB, dir, name, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// Check calls rpc on connections to the mutual-TLS server at addr: with f.Good it must
// succeed; in plaintext, without a client certificate and with f.Rogue it must fail.
func Check(t testing.TB, f *Files, addr string, rpc func(context.Context, *grpc.ClientConn) error) {
	t.Helper()
	noCert := f.Good
	noCert.Cert, noCert.Key, noCert.Mutual = "", "", false
	for _, tc := range []struct {
		name string
		cfg  *tlsconf.Config
		ok   bool
	}{{"mutual TLS", &f.Good, true}, {"plaintext", nil, false}, {"no client certificate", &noCert, false}, {"another CA", &f.Rogue, false}} {
		var tc2 *tls.Config
		if tc.cfg != nil {
			var err error
			if tc2, err = tc.cfg.Client(); err != nil {
				t.Fatal(err)
			}
		}
		cc, err := grpc.NewClient(addr, tlsconf.DialOption(tc2))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err = rpc(ctx, cc)
		cancel()
		cc.Close()
		if (err == nil) != tc.ok {
			t.Errorf("%s: %v (want success %v)", tc.name, err, tc.ok)
		}
	}
}
