package main

import (
	"github.com/spf13/pflag"

	"github.com/runwayhq/runway/cmd/runway/server"
)

// metricsFlags are the operations listener's flags of dev and serve.
type metricsFlags struct {
	listen, tokenFile string
	tls               server.ServerTLS
}

func (m *metricsFlags) add(f *pflag.FlagSet, listenHelp string) {
	f.StringVar(&m.listen, "metrics-listen", "", listenHelp)
	f.StringVar(&m.tokenFile, "metrics-token-file", "",
		"file whose first line is the bearer token GET /metrics requires (required when --metrics-listen is not loopback)")
	addMetricsTLSFlags(f, &m.tls)
}

// addMetricsTLSFlags adds the operations listener's TLS flags, which
// default to the API listener's (--tls-cert-file, --tls-key-file,
// --tls-client-ca-file).
func addMetricsTLSFlags(f *pflag.FlagSet, t *server.ServerTLS) {
	f.StringVar(&t.CertFile, "metrics-tls-cert-file", "", "certificate (PEM): serve --metrics-listen over TLS only (default: --tls-cert-file)")
	f.StringVar(&t.KeyFile, "metrics-tls-key-file", "", "key (PEM) for --metrics-tls-cert-file (default: --tls-key-file)")
	f.StringVar(&t.ClientCAFile, "metrics-tls-client-ca-file", "", "CA bundle (PEM) scrapers' certificates must chain to: mutual TLS (default: --tls-client-ca-file)")
}

// config is the listener's configuration; beside, when set, is the API's
// address, the default's anchor (dev).
func (m *metricsFlags) config(beside string) (server.MetricsConfig, error) {
	cfg := server.MetricsConfig{Listen: m.listen, TokenFile: m.tokenFile, TLS: m.tls}
	if cfg.Listen == "" && beside != "" {
		l, err := server.MetricsListenBeside(beside)
		if err != nil {
			return cfg, err
		}
		cfg.Listen = l
	}
	if cfg.Listen == "none" {
		cfg.Listen = ""
	}
	return cfg, nil
}
