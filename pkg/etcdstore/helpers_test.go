package etcdstore_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
	"github.com/runwayhq/runway/pkg/etcdstore"
	"github.com/runwayhq/runway/pkg/etcdstore/etcdtest"
	"google.golang.org/protobuf/testing/protocmp"
)

func newProject() *quotav1.Project { return new(quotav1.Project) }

// project builds the message stored under projects/<id>.
func project(id, description string) *quotav1.Project {
	return &quotav1.Project{Name: "projects/" + id, Description: description, Department: "departments/default"}
}

// newProjects starts an etcd and returns it with the projects collection.
func newProjects(t *testing.T) (*etcdtest.Cluster, *etcdstore.Collection[*quotav1.Project]) {
	t.Helper()
	cl := etcdtest.New(t)
	return cl, etcdstore.NewCollection(cl.Client, etcdstore.PrefixProjects, newProject)
}

// mustCreate creates n projects p000..p<n-1>.
func mustCreate(t *testing.T, c *etcdstore.Collection[*quotav1.Project], n int) {
	t.Helper()
	for i := range n {
		id := fmt.Sprintf("p%03d", i)
		if _, err := c.Create(t.Context(), id, project(id, "")); err != nil {
			t.Fatalf("Create(%s): %v", id, err)
		}
	}
}

func diffProto(want, got any) string { return cmp.Diff(want, got, protocmp.Transform()) }

func wantErrIs(t *testing.T, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("error = %v, want errors.Is %v", err, target)
	}
}

// nextEvent waits for the next watch event, failing after a deadline (a
// bound on a hang, not a sleep: it returns as soon as the event arrives).
func nextEvent[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case e, ok := <-ch:
		if !ok {
			t.Fatal("watch channel closed, want an event")
		}
		return e
	case <-time.After(15 * time.Second):
		t.Fatal("no watch event within 15s")
	}
	panic("unreachable")
}
