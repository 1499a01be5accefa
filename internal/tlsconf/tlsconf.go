// Package tlsconf is the TLS option of every gRPC server and client of monolith-go: one
// certificate per process, one CA for its peers, mutual TLS on request, and the command
// flags that set them. Without files the connection stays plaintext (servers bind 127.0.0.1).
package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"os"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// Config names the PEM files of one process. The zero Config is plaintext.
type Config struct {
	// CA verifies the peers: a client checks a server's certificate against it and, with
	// Mutual, a server its clients'. Setting it (or Cert) turns TLS on.
	CA string
	// Cert and Key are this process's certificate chain and key: a server presents them,
	// and a client presents them to a server that asks (mutual TLS).
	Cert, Key string
	// Mutual makes servers require a client certificate signed by CA.
	Mutual bool
	// ServerName is the name a client verifies in a server's certificate (default: the
	// host of the address it dials).
	ServerName string
}

// AddFlags binds the config to --tls-ca, --tls-cert, --tls-key, --tls-mutual and
// --tls-server-name of fs.
func AddFlags(fs *flag.FlagSet) *Config {
	c := &Config{}
	fs.StringVar(&c.CA, "tls-ca", "", "TLS: the CA `FILE` (PEM) that verifies peers; turns TLS on for this command's gRPC servers and clients")
	fs.StringVar(&c.Cert, "tls-cert", "", "TLS: this process's certificate `FILE` (PEM), presented as a server and, under mutual TLS, as a client")
	fs.StringVar(&c.Key, "tls-key", "", "TLS: the key `FILE` (PEM) of --tls-cert")
	fs.BoolVar(&c.Mutual, "tls-mutual", false, "TLS: servers require client certificates signed by --tls-ca (mutual TLS)")
	fs.StringVar(&c.ServerName, "tls-server-name", "", "TLS: the name clients verify in servers' certificates (default: the host dialled)")
	return c
}

// Enabled reports whether TLS is on.
func (c Config) Enabled() bool { return c.CA != "" || c.Cert != "" || c.Key != "" }

// Args are the command-line flags that give a child process the same config.
func (c Config) Args() []string {
	var out []string
	for _, f := range [][2]string{{"--tls-ca", c.CA}, {"--tls-cert", c.Cert}, {"--tls-key", c.Key}, {"--tls-server-name", c.ServerName}} {
		if f[1] != "" {
			out = append(out, f[0], f[1])
		}
	}
	if c.Mutual {
		out = append(out, "--tls-mutual")
	}
	return out
}

// Validate reports a config that cannot work, naming the flags.
func (c Config) Validate() error {
	switch {
	case !c.Enabled():
		if c.Mutual || c.ServerName != "" {
			return errors.New("tlsconf: --tls-mutual and --tls-server-name need --tls-ca")
		}
	case (c.Cert == "") != (c.Key == ""):
		return errors.New("tlsconf: --tls-cert and --tls-key go together")
	case c.CA == "":
		return errors.New("tlsconf: TLS needs --tls-ca, the CA that verifies peers")
	case c.Mutual && c.Cert == "":
		return errors.New("tlsconf: --tls-mutual needs --tls-cert and --tls-key (the clients present them)")
	}
	return nil
}

// Server is the *tls.Config of a server (nil when TLS is off). A server needs Cert and Key.
func (c Config) Server() (*tls.Config, error) {
	if err := c.Validate(); err != nil || !c.Enabled() {
		return nil, err
	}
	if c.Cert == "" {
		return nil, errors.New("tlsconf: a TLS server needs --tls-cert and --tls-key")
	}
	cert, err := tls.LoadX509KeyPair(c.Cert, c.Key)
	if err != nil {
		return nil, fmt.Errorf("tlsconf: --tls-cert %s / --tls-key %s: %w", c.Cert, c.Key, err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if c.Mutual {
		pool, err := c.pool()
		if err != nil {
			return nil, err
		}
		cfg.ClientCAs, cfg.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}

// Client is the *tls.Config of a client (nil when TLS is off).
func (c Config) Client() (*tls.Config, error) {
	if err := c.Validate(); err != nil || !c.Enabled() {
		return nil, err
	}
	pool, err := c.pool()
	if err != nil {
		return nil, err
	}
	cfg := &tls.Config{RootCAs: pool, ServerName: c.ServerName, MinVersion: tls.VersionTLS12}
	if c.Cert != "" {
		cert, err := tls.LoadX509KeyPair(c.Cert, c.Key)
		if err != nil {
			return nil, fmt.Errorf("tlsconf: --tls-cert %s / --tls-key %s: %w", c.Cert, c.Key, err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

func (c Config) pool() (*x509.CertPool, error) {
	b, err := os.ReadFile(c.CA)
	if err != nil {
		return nil, fmt.Errorf("tlsconf: --tls-ca: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("tlsconf: --tls-ca %s: no PEM certificate in it", c.CA)
	}
	return pool, nil
}

// ServerOption is the grpc.ServerOption of a server's TLS config: plaintext for nil.
func ServerOption(cfg *tls.Config) grpc.ServerOption {
	if cfg == nil {
		return grpc.Creds(insecure.NewCredentials())
	}
	return grpc.Creds(credentials.NewTLS(cfg))
}

// DialOption is the grpc.DialOption of a client's TLS config: plaintext for nil.
func DialOption(cfg *tls.Config) grpc.DialOption {
	if cfg == nil {
		return grpc.WithTransportCredentials(insecure.NewCredentials())
	}
	return grpc.WithTransportCredentials(credentials.NewTLS(cfg))
}
