package auth

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	identityv1 "github.com/runwayhq/runway/gen/go/runway/identity/v1"
	"github.com/runwayhq/runway/pkg/etcdstore"
	"github.com/runwayhq/runway/pkg/etcdstore/etcdtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func newGuard(t testing.TB, cfg Config) (*Guard, *clock, *etcdtest.Cluster) {
	t.Helper()
	cluster := etcdtest.New(t)
	c := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	g, err := New(t.Context(), cfg, Deps{Client: cluster.Client, Now: c.now})
	if err != nil {
		t.Fatal(err)
	}
	return g, c, cluster
}

// Audit events are kept for the retention and then dropped, oldest first.
func TestAuditRetention(t *testing.T) {
	g, c, cluster := newGuard(t, Config{})
	var names []string
	for _, age := range []time.Duration{100, 91, 89, 1} { // days before "now"
		at := c.now().Add(-age * 24 * time.Hour)
		ev := &identityv1.AuditEvent{Name: "auditEvents/" + g.audit.eventID(at), CreateTime: timestamppb.New(at)}
		names = append(names, ev.GetName())
		g.audit.write(t.Context(), []queued{{ev: ev}})
	}
	g.audit.expire(t.Context())
	resp, err := cluster.Client.Get(t.Context(), etcdstore.PrefixAudit, clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	var kept []string
	for _, kv := range resp.Kvs {
		kept = append(kept, "auditEvents/"+string(kv.Key[len(etcdstore.PrefixAudit):]))
	}
	if !slices.Equal(kept, names[2:]) {
		t.Errorf("kept %v, want the events younger than 90 days %v", kept, names[2:])
	}
}

// Rotation adds a key once the newest is older than the period and deletes
// a key once no token it signed can be valid.
func TestKeyRetirement(t *testing.T) {
	g, c, _ := newGuard(t, Config{Rotation: time.Hour, MaxTokenTTL: 2 * time.Hour})
	first, _ := g.keys.signer()
	c.add(30 * time.Minute)
	if err := g.Rotate(t.Context()); err != nil {
		t.Fatal(err)
	}
	if k, _ := g.keys.signer(); k.GetId() != first.GetId() {
		t.Fatal("rotated before the period")
	}
	c.add(31 * time.Minute)
	if err := g.Rotate(t.Context()); err != nil {
		t.Fatal(err)
	}
	second, _ := g.keys.signer()
	if second.GetId() == first.GetId() {
		t.Fatal("no rotation after the period")
	}
	if _, ok := g.keys.verifier(first.GetId()); !ok {
		t.Fatal("the first key stopped verifying at once")
	}
	c.add(2 * time.Hour) // the first key's retire time: created + 1 h + 2 h
	if err := g.Rotate(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, ok := g.keys.verifier(first.GetId()); ok {
		t.Error("the first key verifies past its retire time")
	}
	resp, err := g.client.Get(context.Background(), etcdstore.PrefixSigningKeys+first.GetId())
	if err != nil || len(resp.Kvs) != 0 {
		t.Errorf("the retired key is still stored: %v %v", resp, err)
	}
}

// The table is complete: every role has a row for every entity, and only
// the internal service role cannot be granted.
func TestRoleTableComplete(t *testing.T) {
	want := []string{"department-admin", "editor", "l1-researcher", "l2-researcher", "ml-engineer", "research-manager",
		"system-admin", "viewer"}
	var got []string
	for _, r := range Roles() {
		got = append(got, r.ID)
		for _, e := range Entities {
			if _, ok := r.Table[e]; !ok {
				t.Errorf("%s has no row for %s", r.ID, e)
			}
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("grantable roles %v, want %v", got, want)
	}
	if r, ok := LookupRole(ServiceRole); !ok || len(r.Scopes) != 0 {
		t.Errorf("the service role must exist and be grantable nowhere: %v", r)
	}
}

// A session's access token is judged by the sessions mirror once the
// mirror has seen the session's start, and by etcd before (a token used on
// a replica the moment another issued it): neither a lagging mirror refuses
// a live session nor an ended one passes.
func TestSessionLiveWhileTheMirrorLags(t *testing.T) {
	g, _, cluster := newGuard(t, Config{}) // Run not started: the mirror stays at its load
	put, err := cluster.Client.Put(t.Context(), etcdstore.PrefixSessions+"s1", "")
	if err != nil {
		t.Fatal(err)
	}
	rev := put.Header.GetRevision()
	if !g.sessionLive(t.Context(), "s1", rev) {
		t.Error("a session started after the mirror's load is refused")
	}
	if _, err := cluster.Client.Delete(t.Context(), etcdstore.PrefixSessions+"s1"); err != nil {
		t.Fatal(err)
	}
	if g.sessionLive(t.Context(), "s1", rev) {
		t.Error("an ended session passes while the mirror lags")
	}
	if g.sessionLive(t.Context(), "never", g.sessions.revision()) {
		t.Error("a session the mirror has seen the revision of, and lacks, passes")
	}
}

// A login that changes the password bumps the user's credential generation
// and issues a token for the new one at once; a replica whose users mirror
// has not seen the change yet judges that token on etcd, not on the stale
// copy (CI once refused such a token as expired), and still refuses a
// token of the old generation.
func TestNewGenerationWhileTheMirrorLags(t *testing.T) {
	g, _, cluster := newGuard(t, Config{}) // Run not started: the mirrors stay at their load
	user, _ := proto.Marshal(&identityv1.StoredUser{User: &identityv1.User{Uid: "u1"}, CredentialGeneration: 2})
	if _, err := cluster.Client.Put(t.Context(), etcdstore.PrefixUsers+"alice", string(user)); err != nil {
		t.Fatal(err)
	}
	put, err := cluster.Client.Put(t.Context(), etcdstore.PrefixSessions+"s1", "")
	if err != nil {
		t.Fatal(err)
	}
	for gen, want := range map[int64]bool{2: true, 1: false} {
		tok, _, err := g.Issue(Subject{Principal: "users/alice", UID: "u1", Gen: gen, Session: "s1",
			SessionRevision: put.Header.GetRevision()}, AccessToken, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := g.parse(t.Context(), tok, AccessToken); (err == nil) != want {
			t.Errorf("a token of generation %d: parse error %v, want accepted %v", gen, err, want)
		}
	}
}
