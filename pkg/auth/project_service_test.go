package auth

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"
)

// A service acting for one project (ProjectCredentials) creates and
// deletes workloads there and nowhere else; the plain service role creates
// none anywhere; and a call that names no project sends no token at all.
func TestProjectService(t *testing.T) {
	g, _, _ := newGuard(t, Config{})
	creds := g.ProjectCredentials("kubernetes")
	md, err := creds.GetRequestMetadata(ForProject(t.Context(), "projects/team-a"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := g.authenticate(metadata.NewIncomingContext(t.Context(), metadata.Pairs("authorization", md["authorization"])), Method{})
	if err != nil {
		t.Fatal(err)
	}
	if c.Principal != "services/kubernetes/projects/team-a" {
		t.Fatalf("principal %q", c.Principal)
	}
	service := Caller{Principal: "services/scheduler", Expire: time.Now().Add(time.Hour)}
	for _, tc := range []struct {
		who     Caller
		p       Permission
		project string
		want    bool
	}{
		{c, perm(Workloads, Create), "projects/team-a", true},
		{c, perm(Workloads, Delete), "projects/team-a", true},
		{c, perm(Workloads, View), "projects/team-a", true},
		{c, perm(Workloads, Create), "projects/team-b", false},
		{c, perm(Workloads, Delete), "projects/team-b", false},
		{c, perm(Workloads, Edit), "projects/team-a", false},
		{c, perm(Projects, Edit), "projects/team-a", false},
		{c, perm(AccessRules, Create), "projects/team-a", false},
		{service, perm(Workloads, Create), "projects/team-a", false},
		{service, perm(Workloads, Delete), "projects/team-a", false},
		{service, perm(Workloads, View), "projects/team-a", true},
	} {
		got, err := g.Allowed(tc.who, tc.p, g.ProjectTarget(tc.project, tc.project+"/workloads/w"), nil)
		if err != nil || got != tc.want {
			t.Errorf("%s %s in %s: %v (%v), want %v", tc.who.Principal, tc.p, tc.project, got, err, tc.want)
		}
	}
	for _, ctx := range []context.Context{t.Context(), ForProject(t.Context(), ""), ForProject(t.Context(), "projects/a/b"), ForProject(t.Context(), "departments/d")} {
		if md, err := creds.GetRequestMetadata(ctx); err == nil || !strings.Contains(err.Error(), "one project") {
			t.Errorf("a call naming no project: %v, %v; want it refused", md, err)
		}
	}
}

// A runtime playing many nodes' agents (NodeAgentsCredentials) calls as
// the agent of the node each call names, and sends no token for a call
// that names none.
func TestNodeAgentsCredentials(t *testing.T) {
	g, _, _ := newGuard(t, Config{})
	creds := g.NodeAgentsCredentials()
	for _, node := range []string{"nodes/n1", "nodes/n2", "nodes/n1"} {
		md, err := creds.GetRequestMetadata(ForNode(t.Context(), node))
		if err != nil {
			t.Fatal(err)
		}
		c, err := g.authenticate(metadata.NewIncomingContext(t.Context(), metadata.Pairs("authorization", md["authorization"])), Method{})
		if err != nil {
			t.Fatal(err)
		}
		if c.Principal != NodeAgentPrincipal(node) {
			t.Errorf("a call for %s is %q", node, c.Principal)
		}
	}
	for _, ctx := range []context.Context{t.Context(), ForNode(t.Context(), ""), ForNode(t.Context(), "nodes/a/b"), ForNode(t.Context(), "projects/p"),
		ForProject(t.Context(), "projects/p")} {
		if md, err := creds.GetRequestMetadata(ctx); err == nil || !strings.Contains(err.Error(), "names its node") {
			t.Errorf("a call naming no node: %v, %v; want it refused", md, err)
		}
	}
}
