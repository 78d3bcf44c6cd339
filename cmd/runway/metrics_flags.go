package main

import (
	"github.com/spf13/pflag"

	"github.com/runwayhq/runway/cmd/runway/server"
)

// metricsFlags are the operations listener's flags of dev and serve.
type metricsFlags struct {
	listen, tokenFile string
}

func (m *metricsFlags) add(f *pflag.FlagSet, listenHelp string) {
	f.StringVar(&m.listen, "metrics-listen", "", listenHelp)
	f.StringVar(&m.tokenFile, "metrics-token-file", "",
		"file whose first line is the bearer token GET /metrics requires (required when --metrics-listen is not loopback)")
}

// config is the listener's configuration; beside, when set, is the API's
// address, the default's anchor (dev).
func (m *metricsFlags) config(beside string) (server.MetricsConfig, error) {
	cfg := server.MetricsConfig{Listen: m.listen, TokenFile: m.tokenFile}
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
