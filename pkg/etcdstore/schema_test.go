package etcdstore_test

import (
	"strings"
	"testing"

	"github.com/runwayhq/runway/pkg/etcdstore"
	"github.com/runwayhq/runway/pkg/etcdstore/etcdtest"
)

func TestPrefixes(t *testing.T) {
	owners := map[etcdstore.Owner]bool{
		etcdstore.OwnerRunway: true, etcdstore.OwnerQuota: true, etcdstore.OwnerWorkload: true,
		etcdstore.OwnerScheduler: true, etcdstore.OwnerNodeManager: true, etcdstore.OwnerIdentity: true,
		etcdstore.OwnerMetrics: true,
	}
	ps := etcdstore.Prefixes()
	for i, p := range ps {
		if !strings.HasPrefix(p.Key, etcdstore.Root) {
			t.Errorf("%s is outside %s", p.Key, etcdstore.Root)
		}
		if !owners[p.Owner] {
			t.Errorf("%s has unknown owner %q", p.Key, p.Owner)
		}
		if p.Doc == "" {
			t.Errorf("%s has no doc", p.Key)
		}
		// A collection prefix ends in "/" so it cannot match a sibling
		// ("nodes/" vs "nodepools/"); the election prefix gets its "/"
		// from concurrency.Election.
		if !p.Single && !strings.HasSuffix(p.Key, "/") && p.Key != etcdstore.PrefixElectionScheduler {
			t.Errorf("collection prefix %s does not end in /", p.Key)
		}
		for j, q := range ps {
			if i != j && strings.HasPrefix(q.Key, p.Key) {
				t.Errorf("%s (%s) contains %s (%s): every key needs exactly one owner", p.Key, p.Owner, q.Key, q.Owner)
			}
		}
	}
	if len(ps) != 45 {
		t.Errorf("%d entries, want 45; update this test with schema.go", len(ps))
	}
}

func TestEnsureSchemaVersion(t *testing.T) {
	cl := etcdtest.New(t)
	ctx := t.Context()
	for i := range 2 { // the first call writes, the second checks
		if err := etcdstore.EnsureSchemaVersion(ctx, cl.Client); err != nil {
			t.Fatalf("EnsureSchemaVersion #%d: %v", i+1, err)
		}
	}
	if _, err := cl.Client.Put(ctx, etcdstore.KeySchemaVersion, "999"); err != nil {
		t.Fatalf("Put: %v", err)
	}
	wantErrIs(t, etcdstore.EnsureSchemaVersion(ctx, cl.Client), etcdstore.ErrSchemaVersion)
}
