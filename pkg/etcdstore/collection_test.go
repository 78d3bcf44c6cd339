package etcdstore_test

import (
	"context"
	"errors"
	"testing"

	"github.com/runwayhq/runway/pkg/etcdstore"
)

func TestCollection_CreateGetUpdateDelete(t *testing.T) {
	_, c := newProjects(t)
	ctx := t.Context()

	created, err := c.Create(ctx, "team-a", project("team-a", "v1"))
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	if created.ID != "team-a" || created.Etag != etcdstore.FormatEtag(created.Revision) || created.Revision <= 0 {
		t.Fatalf("Create returned %+v, want id team-a and etag = revision", created)
	}

	got, err := c.Get(ctx, "team-a")
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if d := diffProto(project("team-a", "v1"), got.Msg); d != "" {
		t.Errorf("Get msg (-want +got):\n%s", d)
	}
	if got.Etag != created.Etag {
		t.Errorf("Get etag = %s, want %s", got.Etag, created.Etag)
	}

	updated, err := c.Update(ctx, "team-a", project("team-a", "v2"), got.Etag)
	if err != nil {
		t.Fatalf("Update: %v", err)
	}
	if updated.Revision <= got.Revision {
		t.Errorf("Update revision %d, want > %d", updated.Revision, got.Revision)
	}
	// An empty etag updates whatever is there.
	if _, err := c.Update(ctx, "team-a", project("team-a", "v3"), ""); err != nil {
		t.Fatalf("Update without etag: %v", err)
	}
	got, err = c.Get(ctx, "team-a")
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if d := diffProto(project("team-a", "v3"), got.Msg); d != "" {
		t.Errorf("Get after updates (-want +got):\n%s", d)
	}
	// Updates move the revision, never the creation revision.
	if got.Created != created.Revision || created.Created != created.Revision || got.Revision <= got.Created {
		t.Errorf("after updates: created %d, revision %d; want created %d (Create returned %d)", got.Created, got.Revision, created.Revision, created.Created)
	}

	if _, err := c.Delete(ctx, "team-a", got.Etag); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	_, err = c.Get(ctx, "team-a")
	wantErrIs(t, err, etcdstore.ErrNotFound)
}

func TestCollection_Errors(t *testing.T) {
	_, c := newProjects(t)
	ctx := t.Context()
	first, err := c.Create(ctx, "team-a", project("team-a", "original"))
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	stale := first.Etag
	if _, err := c.Update(ctx, "team-a", project("team-a", "changed"), first.Etag); err != nil {
		t.Fatalf("Update: %v", err)
	}
	current, err := c.Get(ctx, "team-a")
	if err != nil {
		t.Fatalf("Get: %v", err)
	}

	tests := []struct {
		name    string
		call    func() error
		wantErr error
	}{
		{"create with a taken id is AlreadyExists", func() error {
			_, err := c.Create(ctx, "team-a", project("team-a", "overwrite?"))
			return err
		}, etcdstore.ErrAlreadyExists},
		{"get of a missing id is NotFound", func() error {
			_, err := c.Get(ctx, "nope")
			return err
		}, etcdstore.ErrNotFound},
		{"update of a missing id is NotFound, not a create", func() error {
			_, err := c.Update(ctx, "nope", project("nope", ""), "")
			return err
		}, etcdstore.ErrNotFound},
		{"delete of a missing id is NotFound", func() error {
			_, err := c.Delete(ctx, "nope", "")
			return err
		}, etcdstore.ErrNotFound},
		{"update with a stale etag is EtagMismatch", func() error {
			_, err := c.Update(ctx, "team-a", project("team-a", "lost update"), stale)
			return err
		}, etcdstore.ErrEtagMismatch},
		{"update with a malformed etag is EtagMismatch", func() error {
			_, err := c.Update(ctx, "team-a", project("team-a", "lost update"), "W/abc")
			return err
		}, etcdstore.ErrEtagMismatch},
		{"delete with a stale etag is EtagMismatch", func() error {
			_, err := c.Delete(ctx, "team-a", stale)
			return err
		}, etcdstore.ErrEtagMismatch},
		{"an empty id is InvalidArgument", func() error {
			_, err := c.Get(ctx, "")
			return err
		}, etcdstore.ErrInvalidArgument},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			wantErrIs(t, err, tc.wantErr)
			// Nothing half-written: team-a is exactly as before.
			after, gerr := c.Get(ctx, "team-a")
			if gerr != nil {
				t.Fatalf("Get after rejected call: %v", gerr)
			}
			if after.Etag != current.Etag {
				t.Errorf("etag after rejected call = %s, want unchanged %s", after.Etag, current.Etag)
			}
			if d := diffProto(current.Msg, after.Msg); d != "" {
				t.Errorf("value changed by a rejected call (-want +got):\n%s", d)
			}
		})
	}
	if _, err := c.Get(ctx, "nope"); !errors.Is(err, etcdstore.ErrNotFound) {
		t.Errorf("rejected update created the key: Get = %v", err)
	}
}

func TestCollection_EtagMismatchCarriesCurrentEtag(t *testing.T) {
	_, c := newProjects(t)
	first, err := c.Create(t.Context(), "team-a", project("team-a", ""))
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	second, err := c.Update(t.Context(), "team-a", project("team-a", "x"), "")
	if err != nil {
		t.Fatalf("Update: %v", err)
	}
	_, err = c.Update(t.Context(), "team-a", project("team-a", "y"), first.Etag)
	var mismatch *etcdstore.EtagMismatchError
	if !errors.As(err, &mismatch) {
		t.Fatalf("error = %v, want *EtagMismatchError", err)
	}
	if mismatch.CurrentEtag != second.Etag || mismatch.Etag != first.Etag {
		t.Errorf("mismatch = %+v, want current %s, sent %s", mismatch, second.Etag, first.Etag)
	}
}

func TestCollection_ContextErrorsPassThrough(t *testing.T) {
	_, c := newProjects(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := c.Get(ctx, "team-a")
	if err != context.Canceled {
		t.Errorf("Get with canceled ctx = %#v, want context.Canceled unchanged", err)
	}
	_, err = c.Create(ctx, "team-a", project("team-a", ""))
	if err != context.Canceled {
		t.Errorf("Create with canceled ctx = %#v, want context.Canceled unchanged", err)
	}
}

func TestNewCollection_PrefixWithoutSlashPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("NewCollection with prefix without trailing slash did not panic")
		}
	}()
	etcdstore.NewCollection(nil, "/runway/v1/projects", newProject)
}
