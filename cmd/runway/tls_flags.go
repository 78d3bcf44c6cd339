package main

import (
	"github.com/spf13/pflag"

	"github.com/runwayhq/runway/cmd/runway/server"
)

// addListenerTLSFlags adds the TLS flags of a listener (serve's and the
// agent's --listen): its certificate and, for mutual TLS, the CA its
// clients' certificates must chain to.
func addListenerTLSFlags(f *pflag.FlagSet, t *server.ServerTLS) {
	f.StringVar(&t.CertFile, "tls-cert-file", "", "server certificate (PEM): serve --listen over TLS only")
	f.StringVar(&t.KeyFile, "tls-key-file", "", "server key (PEM) for --tls-cert-file")
	f.StringVar(&t.ClientCAFile, "tls-client-ca-file", "", "CA bundle (PEM) clients' certificates must chain to: mutual TLS")
}
