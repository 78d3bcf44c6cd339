package identity

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"golang.org/x/crypto/bcrypt"

	commonv1 "github.com/runwayhq/runway/gen/go/runway/common/v1"
	"github.com/runwayhq/runway/pkg/apierr"
	"github.com/runwayhq/runway/pkg/etcdstore"
	"github.com/runwayhq/runway/pkg/grpcserver"
)

// throttle counts failed sign-ins per user or client id in etcd, so that
// every replica of the service counts the same failures: after max within
// window, sign-ins for that key are refused until the oldest leaves the
// window. The key (chosen by the caller) is stored as its SHA-256, at most
// max failures are kept per key, and each sits under a lease that outlives
// the window only briefly: the state is bounded and goes by itself.
type throttle struct {
	client *clientv3.Client
	max    int
	window time.Duration
	now    func() time.Time
	log    *slog.Logger

	mu         sync.Mutex
	lease      clientv3.LeaseID
	leaseUntil time.Time // the lease is shared by the failures of leaseShare
}

// leaseShare is how long one lease is reused: failures recorded within it
// expire together, at most leaseShare after their window.
const leaseShare = time.Minute

func newThrottle(c *clientv3.Client, max int, window time.Duration, now func() time.Time, log *slog.Logger) *throttle {
	return &throttle{client: c, max: max, window: window, now: now, log: log}
}

func (t *throttle) prefix(key string) string {
	h := sha256.Sum256([]byte(key))
	return etcdstore.PrefixSignInFailures + hex.EncodeToString(h[:16]) + "/"
}

// recent are the times of key's failures within the window.
func (t *throttle) recent(ctx context.Context, key string) ([]time.Time, error) {
	resp, err := t.client.Get(ctx, t.prefix(key), clientv3.WithPrefix(), clientv3.WithKeysOnly(),
		clientv3.WithLimit(int64(4*t.max)))
	if err != nil {
		return nil, fmt.Errorf("read sign-in failures: %w", err)
	}
	cut := t.now().Add(-t.window)
	var out []time.Time
	for _, kv := range resp.Kvs {
		stamp, _, _ := strings.Cut(strings.TrimPrefix(string(kv.Key), t.prefix(key)), "-")
		n, err := strconv.ParseInt(stamp, 16, 64)
		if err != nil {
			continue
		}
		if at := time.Unix(0, n); at.After(cut) {
			out = append(out, at)
		}
	}
	return out, nil // in key order, which is time order
}

// blocked is how long key must wait; 0 when it may try.
func (t *throttle) blocked(ctx context.Context, key string) (time.Duration, error) {
	fs, err := t.recent(ctx, key)
	if err != nil || len(fs) < t.max {
		return 0, err
	}
	return fs[len(fs)-t.max].Add(t.window).Sub(t.now()), nil
}

// fail records a failure of key, unless max are already recorded.
func (t *throttle) fail(ctx context.Context, key string) {
	fs, err := t.recent(ctx, key)
	if err == nil && len(fs) >= t.max {
		return
	}
	lease, err := t.leaseFor(ctx)
	if err == nil {
		var b [4]byte
		_, _ = rand.Read(b[:])
		_, err = t.client.Put(ctx, fmt.Sprintf("%s%016x-%s", t.prefix(key), t.now().UnixNano(), hex.EncodeToString(b[:])), "",
			clientv3.WithLease(lease))
	}
	if err != nil {
		t.log.Warn("identity: a failed sign-in not counted", "err", err)
	}
}

// reset forgets key's failures (a successful sign-in).
func (t *throttle) reset(ctx context.Context, key string) {
	if _, err := t.client.Delete(ctx, t.prefix(key), clientv3.WithPrefix()); err != nil {
		t.log.Debug("identity: sign-in failures not cleared", "err", err)
	}
}

// leaseFor is the lease new failures are put under: one per leaseShare,
// lasting the window and the share.
func (t *throttle) leaseFor(ctx context.Context) (clientv3.LeaseID, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.lease != 0 && time.Now().Before(t.leaseUntil) {
		return t.lease, nil
	}
	ttl := int64((t.window + 2*leaseShare).Seconds())
	l, err := t.client.Grant(ctx, ttl)
	if err != nil {
		return 0, fmt.Errorf("lease for sign-in failures: %w", err)
	}
	t.lease, t.leaseUntil = l.ID, time.Now().Add(leaseShare)
	return l.ID, nil
}

// throttled is the error of a refused sign-in: the wait, or the store's
// failure (a throttle that cannot count refuses rather than lets through).
func throttled(wait time.Duration, err error) error {
	if err != nil {
		return apierr.Unavailable(commonv1.ErrorReason_STORE_UNAVAILABLE, time.Second)
	}
	return apierr.TooManySignInAttempts(wait)
}

// sourceHost is the host of the caller's address ("" outside a served
// call): what a source's failures count under.
func sourceHost(ctx context.Context) string {
	addr := grpcserver.PeerAddress(ctx)
	if host, _, err := net.SplitHostPort(addr); err == nil {
		return host
	}
	return addr
}

// admitSignIn refuses a sign-in while key (the resolved user, client id or
// unknown name) or the caller's address has too many recent failures.
func (s *Server) admitSignIn(ctx context.Context, key string) error {
	if wait, err := s.throttle.blocked(ctx, key); err != nil || wait > 0 {
		return throttled(wait, err)
	}
	if host := sourceHost(ctx); host != "" {
		if wait, err := s.sources.blocked(ctx, "source:"+host); err != nil || wait > 0 {
			return throttled(wait, err)
		}
	}
	return nil
}

// failSignIn counts a failed sign-in against key and the caller's address.
func (s *Server) failSignIn(ctx context.Context, key string) {
	s.throttle.fail(ctx, key)
	if host := sourceHost(ctx); host != "" {
		s.sources.fail(ctx, "source:"+host)
	}
}

// decoyHash is a bcrypt hash at the configured cost that no password
// matches: an unknown name is compared with it, so it costs what a known
// one does.
func (s *Server) decoyHash() []byte {
	s.decoyOnce.Do(func() {
		h, err := bcrypt.GenerateFromPassword([]byte(randomSecret(32)), s.cfg.BcryptCost)
		if err != nil {
			panic(fmt.Sprintf("identity: decoy password hash: %v", err)) // only for a cost out of range, checked in New
		}
		s.decoy = h
	})
	return s.decoy
}
