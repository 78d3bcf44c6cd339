package etcdstore_test

import (
	"fmt"
	"testing"

	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
	"github.com/runwayhq/runway/pkg/etcdstore"
	"github.com/runwayhq/runway/pkg/etcdstore/etcdtest"
)

func TestCollection_ListPages(t *testing.T) {
	_, c := newProjects(t)
	ctx := t.Context()
	mustCreate(t, c, 250)

	var ids []string
	var sizes []int
	token := ""
	var rev int64
	for page := 0; ; page++ {
		p, err := c.List(ctx, "", 100, token)
		if err != nil {
			t.Fatalf("List page %d: %v", page, err)
		}
		if page == 0 {
			rev = p.Revision
			// Writes between pages must not show up in this listing: one
			// that sorts into a later page, and a delete of a later item.
			if _, err := c.Create(ctx, "p200x", project("p200x", "late")); err != nil {
				t.Fatalf("Create between pages: %v", err)
			}
			if _, err := c.Delete(ctx, "p249", ""); err != nil {
				t.Fatalf("Delete between pages: %v", err)
			}
		} else if p.Revision != rev {
			t.Errorf("page %d read at revision %d, want the first page's %d", page, p.Revision, rev)
		}
		sizes = append(sizes, len(p.Items))
		for _, it := range p.Items {
			ids = append(ids, it.ID)
		}
		if p.NextPageToken == "" {
			break
		}
		token = p.NextPageToken
	}
	if d := diffProto([]int{100, 100, 50}, sizes); d != "" {
		t.Errorf("page sizes (-want +got):\n%s", d)
	}
	var wantIDs []string
	for i := range 250 {
		wantIDs = append(wantIDs, fmt.Sprintf("p%03d", i))
	}
	if d := diffProto(wantIDs, ids); d != "" {
		t.Errorf("listed ids (-want +got):\n%s", d)
	}

	// A fresh listing sees the writes.
	all, _, err := c.ListAll(ctx, "")
	if err != nil {
		t.Fatalf("ListAll: %v", err)
	}
	if len(all) != 250 || all[201].ID != "p200x" {
		t.Errorf("fresh listing has %d items (item 201 %q), want 250 with p200x at 201", len(all), all[201].ID)
	}
}

func TestCollection_ListWithinPrefix(t *testing.T) {
	cl := etcdtest.New(t)
	wl := etcdstore.NewCollection(cl.Client, etcdstore.PrefixWorkloads, newProject)
	ctx := t.Context()
	for _, id := range []string{"team-a/a1", "team-a/a2", "team-ab/x", "team-b/b1"} {
		if _, err := wl.Create(ctx, id, &quotav1.Project{Name: id}); err != nil {
			t.Fatalf("Create(%s): %v", id, err)
		}
	}
	p, err := wl.List(ctx, "team-a/", 0, "")
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	var ids []string
	for _, it := range p.Items {
		ids = append(ids, it.ID)
	}
	if d := diffProto([]string{"team-a/a1", "team-a/a2"}, ids); d != "" {
		t.Errorf("ids within team-a/ (-want +got):\n%s", d)
	}
}

func TestCollection_ListPageSize(t *testing.T) {
	_, c := newProjects(t)
	mustCreate(t, c, 1005)
	tests := []struct {
		name     string
		pageSize int
		wantLen  int
	}{
		{"zero means the default of 100", 0, etcdstore.DefaultPageSize},
		{"over the maximum is capped at 1000", 5000, etcdstore.MaxPageSize},
		{"a small size is honoured", 7, 7},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := c.List(t.Context(), "", tc.pageSize, "")
			if err != nil {
				t.Fatalf("List: %v", err)
			}
			if len(p.Items) != tc.wantLen || p.NextPageToken == "" {
				t.Errorf("got %d items (next token %q), want %d and a next page", len(p.Items), p.NextPageToken, tc.wantLen)
			}
		})
	}
	_, err := c.List(t.Context(), "", -1, "")
	wantErrIs(t, err, etcdstore.ErrInvalidArgument)
}

func TestCollection_ListBadPageToken(t *testing.T) {
	cl, c := newProjects(t)
	mustCreate(t, c, 3)
	p, err := c.List(t.Context(), "", 1, "")
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	other := etcdstore.NewCollection(cl.Client, etcdstore.PrefixDepartments, newProject)
	tests := []struct {
		name    string
		list    func() error
		wantErr error
	}{
		{"garbage is invalid", func() error {
			_, err := c.List(t.Context(), "", 1, "not-a-token!")
			return err
		}, etcdstore.ErrInvalidPageToken},
		{"valid base64 of the wrong shape is invalid", func() error {
			_, err := c.List(t.Context(), "", 1, "AQID")
			return err
		}, etcdstore.ErrInvalidPageToken},
		{"a token of another prefix within the collection is invalid", func() error {
			_, err := c.List(t.Context(), "p0", 1, p.NextPageToken)
			return err
		}, etcdstore.ErrInvalidPageToken},
		{"a token of another collection is invalid", func() error {
			_, err := other.List(t.Context(), "", 1, p.NextPageToken)
			return err
		}, etcdstore.ErrInvalidPageToken},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { wantErrIs(t, tc.list(), tc.wantErr) })
	}
}

func TestCollection_ListPageTokenExpiresOnCompaction(t *testing.T) {
	cl, c := newProjects(t)
	mustCreate(t, c, 3)
	p, err := c.List(t.Context(), "", 1, "")
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	// A later write, then compaction past the listing's revision.
	last, err := c.Update(t.Context(), "p000", project("p000", "later"), "")
	if err != nil {
		t.Fatalf("Update: %v", err)
	}
	if _, err := cl.Client.Compact(t.Context(), last.Revision); err != nil {
		t.Fatalf("Compact: %v", err)
	}
	_, err = c.List(t.Context(), "", 1, p.NextPageToken)
	wantErrIs(t, err, etcdstore.ErrPageTokenExpired)
}
