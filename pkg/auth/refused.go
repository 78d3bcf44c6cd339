package auth

import (
	"context"
	"net"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	identityv1 "github.com/runwayhq/runway/gen/go/runway/identity/v1"
	"github.com/runwayhq/runway/pkg/apierr"
	"github.com/runwayhq/runway/pkg/grpcserver"
)

// Refused calls (no or bad credentials, denied, a failed sign-in) change
// nothing and cost their caller nothing, so a client can send them faster
// than etcd takes audit events. Three things keep them from exhausting the
// audit log and the admins' writes that wait on it:
//
//   - aggregation: the refused calls alike (source host, principal,
//     method, outcome and resource) within a window are one event with a
//     count (AuditEvent.count, create_time to end_time). A host has at most
//     maxRefusedPerHost such keys a window, and the window at most
//     maxRefusedKeys; the calls beyond go to an aggregate with the
//     resource "*", or, past the window's bound, one with the method "*".
//   - a rate limit per source host: each call refused for its credentials
//     (none, invalid, a failed sign-in) takes a token of its host's bucket (Config.RefusedRate a second, Config.RefusedBurst at
//     most); a host whose bucket is empty has its calls refused before any
//     work (TOO_MANY_REFUSED_CALLS, counted in the aggregates), unless the
//     call carries a valid access token.
//   - a size cap: the aggregates are indexed (PrefixAuditRefused) and the
//     oldest beyond Config.AuditMaxRefused are deleted after each flush;
//     a change's event is never among them.

// Bounds of one window's aggregates (see above).
const (
	maxRefusedPerHost = 32
	maxRefusedKeys    = 1024
	// maxBuckets bounds the rate limit's hosts; at the bound the full
	// buckets (hosts that stopped) go, and if none has, all of them.
	maxBuckets = 16384
)

// refusedKey is what makes two refused calls alike.
type refusedKey struct {
	host, principal, method, resource, reason string
	code                                      int32
}

// refusals aggregates refused calls and limits their rate per host.
type refusals struct {
	rate, burst float64
	now         func() time.Time

	mu      sync.Mutex
	agg     map[refusedKey]*identityv1.AuditEvent
	perHost map[string]int
	buckets map[string]*bucket
}

type bucket struct {
	tokens float64
	at     time.Time
}

func newRefusals(rate, burst float64, now func() time.Time) *refusals {
	return &refusals{rate: rate, burst: burst, now: now, agg: map[refusedKey]*identityv1.AuditEvent{},
		perHost: map[string]int{}, buckets: map[string]*bucket{}}
}

// hostOf is the host of a peer address ("" for none).
func hostOf(addr string) string {
	if h, _, err := net.SplitHostPort(addr); err == nil {
		return h
	}
	return addr
}

// limited is how long host must wait before its next refused call is
// admitted (its bucket refilled to one token); 0 when it is not limited.
func (r *refusals) limited(host string) time.Duration {
	if host == "" {
		return 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	b := r.refill(host)
	if b.tokens >= 1 {
		return 0
	}
	return time.Duration((1 - b.tokens) / r.rate * float64(time.Second))
}

// refill brings host's bucket up to now; r.mu is held.
func (r *refusals) refill(host string) *bucket {
	now := r.now()
	b, ok := r.buckets[host]
	if !ok {
		if len(r.buckets) >= maxBuckets {
			for h, o := range r.buckets {
				if o.tokens+now.Sub(o.at).Seconds()*r.rate >= r.burst {
					delete(r.buckets, h)
				}
			}
			if len(r.buckets) >= maxBuckets {
				clear(r.buckets)
			}
		}
		b = &bucket{tokens: r.burst, at: now}
		r.buckets[host] = b
	}
	if now.After(b.at) { // a clock set back refills nothing
		b.tokens = min(r.burst, b.tokens+now.Sub(b.at).Seconds()*r.rate)
		b.at = now
	}
	return b
}

// add counts a refused call (ev, with its outcome) in its aggregate and,
// when it had no valid credentials, takes a token of its host's bucket.
func (r *refusals) add(ev *identityv1.AuditEvent) {
	host := hostOf(ev.GetPeerAddress())
	k := refusedKey{host: host, principal: ev.GetPrincipal(), method: ev.GetMethod(), resource: ev.GetResource(),
		reason: ev.GetErrorReason(), code: ev.GetStatusCode()}
	r.mu.Lock()
	defer r.mu.Unlock()
	if ev.GetPrincipal() == "" {
		r.spendLocked(host) // a denied call is its principal's, not its address's
	}
	a, ok := r.agg[k]
	if !ok && r.perHost[host] >= maxRefusedPerHost {
		k.resource = "*"
		a, ok = r.agg[k]
	}
	if !ok && len(r.agg) >= maxRefusedKeys {
		k = refusedKey{method: "*", resource: "*"}
		a, ok = r.agg[k]
	}
	if ok {
		a.Count++
		a.EndTime = ev.GetCreateTime()
		return
	}
	a = proto.Clone(ev).(*identityv1.AuditEvent)
	a.Count = 1
	a.Resource, a.Method = k.resource, k.method
	if k.method == "*" {
		a.Principal, a.PeerAddress, a.ErrorReason, a.StatusCode = "", "", "", 0
	}
	a.EndTime = a.GetCreateTime()
	r.agg[k] = a
	if k.resource != "*" {
		r.perHost[host]++
	}
}

// spend takes a token of host's bucket for a call without valid
// credentials that is not audited (a view).
func (r *refusals) spend(host string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.spendLocked(host)
}

func (r *refusals) spendLocked(host string) {
	if host != "" {
		b := r.refill(host)
		b.tokens = max(0, b.tokens-1)
	}
}

// take returns the window's aggregates and starts a new window.
func (r *refusals) take() []*identityv1.AuditEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]*identityv1.AuditEvent, 0, len(r.agg))
	for _, a := range r.agg {
		out = append(out, a)
	}
	clear(r.agg)
	clear(r.perHost)
	return out
}

// knownToken reports whether the call carries a valid access token (its
// signature checked once per process, then remembered): a limited host's
// calls with one are served, so its signed-in users keep working, while
// one without costs no more than this look.
func (g *Guard) knownToken(ctx context.Context) bool {
	md, _ := metadata.FromIncomingContext(ctx)
	vals := md.Get("authorization")
	if len(vals) == 0 {
		return false
	}
	scheme, token, ok := strings.Cut(vals[0], " ")
	if !ok || !strings.EqualFold(scheme, "bearer") {
		return false
	}
	// A tool session or ticket (the tool proxy's callers) is known too.
	_, err := g.parse(ctx, strings.TrimSpace(token), AccessToken, ToolSessionToken, ToolTicketToken)
	return err == nil
}

// refuseFlood refuses, before any work, a call from a host over its
// refused-call rate that carries no valid token; the refusal is counted
// like any other.
func (g *Guard) refuseFlood(ctx context.Context, method string) error {
	wait := g.audit.refused.limited(hostOf(grpcserver.PeerAddress(ctx)))
	if wait == 0 || g.knownToken(ctx) {
		return nil
	}
	err := apierr.TooManyRefusedCalls(wait)
	g.auditCall(ctx, Caller{}, method, "", err)
	return err
}

// probe reports whether method is gRPC's health or reflection service:
// never limited (a node's kubelet probes from the node's address).
func probe(method string) bool {
	return strings.HasPrefix(method, "/grpc.health.") || strings.HasPrefix(method, "/grpc.reflection.")
}
