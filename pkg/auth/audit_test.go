package auth

import (
	"context"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	identityv1 "github.com/runwayhq/runway/gen/go/runway/identity/v1"
	"github.com/runwayhq/runway/pkg/etcdstore"
)

// One event too large for etcd costs only itself: the legitimate events of
// its batch are written, and every event that goes through record or
// commit is cut to a size etcd always takes.
func TestAuditBatchFailureLosesOnlyTheBadEvent(t *testing.T) {
	g, c, cluster := newGuard(t, Config{})
	event := func(resource string) *identityv1.AuditEvent {
		return &identityv1.AuditEvent{Name: "auditEvents/" + g.audit.eventID(c.now()), CreateTime: timestamppb.New(c.now()),
			Method: "/runway.identity.v1.IdentityService/Login", Resource: resource}
	}
	huge := strings.Repeat("x", 2<<20) // over etcd's 1.5 MiB request limit
	batch := []queued{{ev: event("users/a")}, {ev: event(huge)}, {ev: event("users/b")}}
	g.audit.write(t.Context(), batch)
	resp, err := cluster.Client.Get(t.Context(), etcdstore.PrefixAudit, clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, kv := range resp.Kvs {
		ev := &identityv1.AuditEvent{}
		if err := proto.Unmarshal(kv.Value, ev); err != nil {
			t.Fatal(err)
		}
		got = append(got, ev.GetResource())
	}
	if strings.Join(got, ",") != "users/a,users/b" {
		t.Errorf("written %d events %.40q, want users/a and users/b", len(got), got)
	}

	// Through commit, the same huge field is cut and the event written.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	done := make(chan struct{})
	go func() { g.audit.run(ctx); close(done) }()
	ev := event(huge)
	if err := g.audit.commit(ctx, ev); err != nil {
		t.Fatalf("commit: %v", err)
	}
	r, err := cluster.Client.Get(t.Context(), etcdstore.PrefixAudit+strings.TrimPrefix(ev.GetName(), "auditEvents/"))
	if err != nil || len(r.Kvs) != 1 || len(r.Kvs[0].Value) > 2*maxAuditField+200 {
		t.Errorf("the committed event: %v, %v", r, err)
	}
	cancel()
	<-done
	if err := g.audit.commit(t.Context(), event("late")); err != errAuditStopped {
		t.Errorf("commit after the recorder stopped: %v, want errAuditStopped", err)
	}
}
