package server_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	identityv1 "github.com/runwayhq/runway/gen/go/runway/identity/v1"
	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
	"github.com/runwayhq/runway/pkg/auth"
)

// TestAuditSurvivesKill9: `runway dev` (the built binary) is SIGKILLed in
// the middle of a burst of changes from eight clients; started again on the
// same data directory, every change that was acknowledged has its audit
// event (with its outcome, or marked outcome_unknown when the process died
// before it could record it).
func TestAuditSurvivesKill9(t *testing.T) {
	bin := buildRunway(t)
	dir := t.TempDir()
	p1 := startDevProc(t, bin, dir, "first")
	c := dialDev(t, p1.addr, p1.token)

	ctx, stop := context.WithCancel(t.Context())
	var mu sync.Mutex
	var acked []string
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				id := fmt.Sprintf("p%d-%d", g, i)
				if _, err := c.quota.CreateProject(ctx, &quotav1.CreateProjectRequest{ProjectId: id, Project: &quotav1.Project{}}); err != nil {
					return // the process is gone
				}
				mu.Lock()
				acked = append(acked, "projects/"+id)
				mu.Unlock()
			}
		})
	}
	// Kill once the burst is well under way.
	for {
		mu.Lock()
		n := len(acked)
		mu.Unlock()
		if n >= 150 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	p1.kill()
	wg.Wait()
	stop()
	mu.Lock()
	defer mu.Unlock()
	t.Logf("%d changes acknowledged before SIGKILL", len(acked))

	p2 := startDevProc(t, bin, dir, "second")
	conn, err := grpc.NewClient("passthrough:///"+p2.addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithPerRPCCredentials(auth.Bearer(p2.token)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ids := identityv1.NewIdentityServiceClient(conn)
	events := map[string]*identityv1.AuditEvent{}
	token := ""
	for {
		r, err := ids.ListAuditEvents(t.Context(), &identityv1.ListAuditEventsRequest{PageSize: 1000, PageToken: token,
			Filter: `method = "/runway.quota.v1.QuotaService/CreateProject"`})
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range r.GetAuditEvents() {
			events[ev.GetResource()] = ev
		}
		if token = r.GetNextPageToken(); token == "" {
			break
		}
	}
	unknown := 0
	for _, name := range acked {
		ev, ok := events[name]
		switch {
		case !ok:
			t.Errorf("acknowledged %s has no audit event", name)
		case ev.GetOutcomeUnknown():
			unknown++
		case ev.GetStatusCode() != 0 || ev.GetPrincipal() != "users/admin":
			t.Errorf("%s's event: %v", name, ev)
		}
	}
	t.Logf("%d events, %d of the acknowledged without a recorded outcome", len(events), unknown)
}
