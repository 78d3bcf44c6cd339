package workload

import (
	"context"
	"errors"
	"fmt"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/apierr"
	"github.com/runwayhq/runway/pkg/clusterproto"
	"github.com/runwayhq/runway/pkg/etcdstore"
)

// store keeps workloads under etcdstore.PrefixWorkloads, one key per
// workload: `/runway/v1/workloads/{project}/{workload}` (ClusterID below the
// prefix), so one project's workloads are one key range and a listing in key
// order is a listing by name.
//
// The etag is not stored: it is the key's ModRevision, set on every message
// read and cleared on every message written, so that a stored value never
// carries a stale etag and equal states encode to equal bytes.
type store struct {
	client *clientv3.Client
	coll   *etcdstore.Collection[*workloadv1.Workload]
	group  *groupCommitter // creates, committed together (groupcommit.go)
}

func newStore(client *clientv3.Client) *store {
	return &store{
		client: client,
		coll: etcdstore.NewCollection(client, etcdstore.PrefixWorkloads,
			func() *workloadv1.Workload { return new(workloadv1.Workload) }),
		group: &groupCommitter{client: client, prefix: etcdstore.PrefixWorkloads, maxOps: etcdstore.DefaultMaxOps},
	}
}

// within is the key range below the prefix for a parent id: one project's
// workloads ("team-a/"), or every workload for "-".
func within(project string) string {
	if project == "-" {
		return ""
	}
	return project + "/"
}

func (s *store) get(ctx context.Context, project, id string) (*workloadv1.Workload, error) {
	it, err := s.coll.Get(ctx, clusterproto.ClusterID(project, id))
	if err != nil {
		return nil, err
	}
	return withEtag(it), nil
}

// create writes w if its name is free (etcdstore.ErrAlreadyExists otherwise)
// and returns the stored copy with its etag. w itself is not changed.
// Concurrent creates are committed together (groupcommit.go), with the
// same answers as one create at a time.
//
// The project is read from the quota service's prefix first, and the
// create commits only while that project still exists (its
// CreateRevision), so a project deleted meanwhile leaves no orphan
// (errProjectGone).
func (s *store) create(ctx context.Context, project, id string, w *workloadv1.Workload) (*workloadv1.Workload, error) {
	return s.createUnderCap(ctx, project, id, w, 0)
}

// createUnderCap is create that first counts the project's workloads in the
// same read as the project's key (one read-only Txn, not two round trips):
// with maxWorkloads > 0, a project holding that many already is refused
// (OBJECT_LIMIT).
func (s *store) createUnderCap(ctx context.Context, project, id string, w *workloadv1.Workload, maxWorkloads int) (*workloadv1.Workload, error) {
	key := etcdstore.PrefixProjects + project
	reads := []clientv3.Op{clientv3.OpGet(key, clientv3.WithKeysOnly())}
	if maxWorkloads > 0 {
		reads = append(reads, clientv3.OpGet(etcdstore.PrefixWorkloads+project+"/", clientv3.WithPrefix(), clientv3.WithCountOnly()))
	}
	resp, err := s.client.Txn(ctx).Then(reads...).Commit()
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("read project %s: %w: %w", key, etcdstore.ErrUnavailable, err)
	}
	kvs := resp.Responses[0].GetResponseRange().GetKvs()
	if len(kvs) == 0 {
		return nil, fmt.Errorf("create in %s: %w", key, errProjectGone)
	}
	if maxWorkloads > 0 && resp.Responses[1].GetResponseRange().GetCount() >= int64(maxWorkloads) {
		return nil, apierr.ObjectLimit(projectsPrefix+project, "workloads", maxWorkloads)
	}
	it, err := s.groupCreate(ctx, clusterproto.ClusterID(project, id), forWrite(w), projectRef{key: key, rev: kvs[0].CreateRevision})
	if err != nil {
		return nil, err
	}
	return withEtag(it), nil
}

// update replaces w if the stored etag is still etag (etcdstore's rule: an
// empty etag writes whatever is there) and returns the stored copy.
func (s *store) update(ctx context.Context, project, id string, w *workloadv1.Workload, etag string) (*workloadv1.Workload, error) {
	it, err := s.coll.Update(ctx, clusterproto.ClusterID(project, id), forWrite(w), etag)
	if err != nil {
		return nil, err
	}
	return withEtag(it), nil
}

func (s *store) delete(ctx context.Context, project, id, etag string) error {
	_, err := s.coll.Delete(ctx, clusterproto.ClusterID(project, id), etag)
	return err
}

// list is one page of a parent's workloads in name order (see etcdstore.List
// for the token and its consistent-snapshot rule).
func (s *store) list(ctx context.Context, project string, pageSize int, token string) ([]*workloadv1.Workload, string, error) {
	page, err := s.coll.List(ctx, within(project), pageSize, token)
	if err != nil {
		return nil, "", err
	}
	out := make([]*workloadv1.Workload, len(page.Items))
	for i, it := range page.Items {
		out[i] = withEtag(it)
	}
	return out, page.NextPageToken, nil
}

// listAll reads a parent's workloads at one revision, which it returns.
func (s *store) listAll(ctx context.Context, project string) ([]*workloadv1.Workload, int64, error) {
	items, rev, err := s.coll.ListAll(ctx, within(project))
	if err != nil {
		return nil, 0, err
	}
	out := make([]*workloadv1.Workload, len(items))
	for i, it := range items {
		out[i] = withEtag(it)
	}
	return out, rev, nil
}

// errFutureRevision: listAt was asked for a revision the store has not
// reached, which no token this service issued can name.
var errFutureRevision = errors.New("revision is in the future")

// listAt reads a parent's workloads as they were at revision rev, for a
// watch that resumes from a token: it fails with etcdstore.ErrCompacted
// once etcd has compacted rev, and errFutureRevision past the current one.
// etcdstore pages only from the current revision, so this reads etcd itself.
func (s *store) listAt(ctx context.Context, project string, rev int64) ([]*workloadv1.Workload, error) {
	prefix := s.coll.Prefix() + within(project)
	end := clientv3.GetPrefixRangeEnd(prefix)
	var out []*workloadv1.Workload
	for start := prefix; ; {
		resp, err := s.client.Get(ctx, start, clientv3.WithRange(end), clientv3.WithRev(rev),
			clientv3.WithLimit(etcdstore.MaxPageSize))
		switch {
		case errors.Is(err, rpctypes.ErrCompacted):
			return nil, fmt.Errorf("list %s at revision %d: %w", prefix, rev, etcdstore.ErrCompacted)
		case errors.Is(err, rpctypes.ErrFutureRev):
			return nil, fmt.Errorf("list %s at revision %d: %w", prefix, rev, errFutureRevision)
		case err != nil:
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, fmt.Errorf("list %s at revision %d: %w: %w", prefix, rev, etcdstore.ErrUnavailable, err)
		}
		for _, kv := range resp.Kvs {
			w := new(workloadv1.Workload)
			if err := proto.Unmarshal(kv.Value, w); err != nil {
				return nil, fmt.Errorf("decode %s: %w", kv.Key, err)
			}
			w.Etag = etcdstore.FormatEtag(kv.ModRevision)
			out = append(out, w)
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return out, nil
		}
		start = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}

// watch streams the changes to a parent's workloads from revision from.
func (s *store) watch(ctx context.Context, project string, from int64) <-chan etcdstore.WatchEvent[*workloadv1.Workload] {
	return s.coll.WatchWithin(ctx, within(project), from)
}

// forWrite is a copy of w without its etag, as it is stored.
func forWrite(w *workloadv1.Workload) *workloadv1.Workload {
	c := proto.Clone(w).(*workloadv1.Workload)
	c.Etag = ""
	return c
}
