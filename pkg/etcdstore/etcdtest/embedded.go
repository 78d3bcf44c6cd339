package etcdtest

import (
	"errors"
	"fmt"
	"net/url"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// ReadyTimeout bounds how long StartEmbedded waits for the server to serve.
const ReadyTimeout = 30 * time.Second

// Option adjusts the embed.Config used by StartEmbedded.
type Option func(*embed.Config)

// WithLogger sends etcd's logs to lg (zap.NewNop() silences them). Without
// it etcd logs errors to stderr.
func WithLogger(lg *zap.Logger) Option {
	return func(cfg *embed.Config) { cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(lg) }
}

// WithTestSpeedups trades durability for speed, for tests only: no fsync
// (a machine crash loses acknowledged writes; a killed process does not),
// and a 10 ms tick / 50 ms election so the single member leads in ~20 ms.
func WithTestSpeedups() Option {
	return func(cfg *embed.Config) {
		cfg.UnsafeNoFsync = true
		cfg.TickMs = 10
		cfg.ElectionMs = 50
	}
}

// WithConfig applies an arbitrary change, e.g. MaxTxnOps or auto-compaction.
func WithConfig(f func(*embed.Config)) Option { return Option(f) }

// StartEmbedded starts a single-member etcd keeping its data in dir and
// serving clients at clientURL (e.g. "http://127.0.0.1:2379"; port 0 picks
// a free one, read it back from e.Clients[0].Addr()). It returns once the
// server is ready to serve. Starting again on the same dir resumes the same
// data; the member name and peer URL are fixed so that a restart matches
// the membership stored in dir. The peer listener is on 127.0.0.1 at a
// random port and unused (one member). Stop it with e.Close().
//
// Defaults are production-safe (fsync on, etcd's default timing, errors
// logged to stderr); the `runway dev` mode can use them as they are.
func StartEmbedded(dir string, clientURL string, opts ...Option) (*embed.Etcd, error) {
	cu, err := url.Parse(clientURL)
	if err != nil {
		return nil, fmt.Errorf("etcd client url %q: %w", clientURL, err)
	}
	pu, _ := url.Parse("http://127.0.0.1:0")
	cfg := embed.NewConfig()
	cfg.Name = "runway"
	cfg.Dir = dir
	cfg.LogLevel = "error"
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*cu}, []url.URL{*cu}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*pu}, []url.URL{*pu}
	cfg.InitialCluster = cfg.Name + "=" + pu.String()
	for _, o := range opts {
		o(cfg)
	}
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("start etcd in %s: %w", dir, err)
	}
	timer := time.NewTimer(ReadyTimeout)
	defer timer.Stop()
	select {
	case <-e.Server.ReadyNotify():
		return e, nil
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("start etcd in %s: %w", dir, err)
	case <-timer.C:
		e.Close()
		return nil, fmt.Errorf("start etcd in %s: %w", dir, errors.New("not ready after "+ReadyTimeout.String()))
	}
}
