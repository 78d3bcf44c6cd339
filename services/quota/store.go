package quota

import (
	"context"
	"errors"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	nodemanagerv1 "github.com/runwayhq/runway/gen/go/runway/nodemanager/v1"
	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/etcdstore"
)

// settingsID is the id of the Settings singleton in a collection rooted at
// etcdstore.Root, so that its key is exactly etcdstore.KeySettings (a
// Collection needs a prefix ending in "/"; the singleton is one key).
const settingsID = "settings"

// store is the service's view of etcd: a typed collection per resource it
// owns (keys are the resource ids: PrefixProjects + "team-a"), read-only
// views of the keys of the node manager and the workload service it
// consults, and commit, its only way to write.
type store struct {
	client      *clientv3.Client
	pools       *etcdstore.Collection[*quotav1.NodePool]
	departments *etcdstore.Collection[*quotav1.Department]
	projects    *etcdstore.Collection[*quotav1.Project]
	settings    *etcdstore.Collection[*quotav1.Settings] // only settingsID
	nodes       *etcdstore.Collection[*nodemanagerv1.Node]
	workloads   *etcdstore.Collection[*workloadv1.Workload]
}

func newStore(client *clientv3.Client) *store {
	s := &store{
		client:      client,
		pools:       etcdstore.NewCollection(client, etcdstore.PrefixNodePools, func() *quotav1.NodePool { return new(quotav1.NodePool) }),
		departments: etcdstore.NewCollection(client, etcdstore.PrefixDepartments, func() *quotav1.Department { return new(quotav1.Department) }),
		projects:    etcdstore.NewCollection(client, etcdstore.PrefixProjects, func() *quotav1.Project { return new(quotav1.Project) }),
		settings:    etcdstore.NewCollection(client, etcdstore.Root, func() *quotav1.Settings { return new(quotav1.Settings) }),
		nodes:       etcdstore.NewCollection(client, etcdstore.PrefixNodes, func() *nodemanagerv1.Node { return new(nodemanagerv1.Node) }),
		workloads:   etcdstore.NewCollection(client, etcdstore.PrefixWorkloads, func() *workloadv1.Workload { return new(workloadv1.Workload) }),
	}
	if s.settings.Key(settingsID) != etcdstore.KeySettings {
		panic("quota: the settings key moved in pkg/etcdstore/schema.go")
	}
	return s
}

// marshal is the stored encoding, the same as etcdstore's: deterministic.
var marshal = proto.MarshalOptions{Deterministic: true}

// errConflict means a condition of a change failed: something the request
// read was written since. The handler re-reads and tries again (retry).
var errConflict = errors.New("a concurrent write changed what the request read")

// change is one atomic write: puts and deletes, each conditioned on the
// ModRevision of its key, plus conditions on keys only read (a project's
// department, the node pools its quotas name) and guards on whole prefixes.
// It commits as ONE etcd Txn: everything or, when any condition fails,
// nothing (errConflict).
//
// Why not etcdstore.Batch: a Batch conditions on single keys, and two of the
// service's rules need a condition on a prefix ("no project was written since
// I counted the department's projects", "no department was written since I
// summed their quotas"): without it a project created while its department
// is deleted, or two projects created at once under reject_over_subscription,
// could both commit. etcd compares a range in one Txn (Compare(...).WithPrefix),
// which Batch does not expose; if Batch gains that, change can become a Batch.
type change struct {
	conds []clientv3.Cmp
	ops   []clientv3.Op
	err   error
}

// put writes msg (its etag already cleared) to key if the key's ModRevision
// is modRev, 0 meaning the key must be absent.
func (c *change) put(key string, msg proto.Message, modRev int64) {
	b, err := marshal.Marshal(msg)
	if err != nil {
		c.err = fmt.Errorf("encode %s: %w", key, err)
		return
	}
	c.ops = append(c.ops, clientv3.OpPut(key, string(b)))
	c.check(key, modRev)
}

// del deletes key if its ModRevision is modRev.
func (c *change) del(key string, modRev int64) {
	c.ops = append(c.ops, clientv3.OpDelete(key))
	c.check(key, modRev)
}

// check conditions the change on key's ModRevision being modRev (0: absent).
func (c *change) check(key string, modRev int64) {
	c.conds = append(c.conds, clientv3.Compare(clientv3.ModRevision(key), "=", modRev))
}

// unchangedSince conditions the change on no key under prefix having been
// created or updated after rev (deleted keys are gone and do not count).
func (c *change) unchangedSince(prefix string, rev int64) {
	c.conds = append(c.conds, clientv3.Compare(clientv3.ModRevision(prefix), "<", rev+1).WithPrefix())
}

// commit applies c and returns the revision it was written at.
func (s *store) commit(ctx context.Context, c *change) (int64, error) {
	if c.err != nil {
		return 0, c.err
	}
	if len(c.ops) > etcdstore.DefaultMaxOps || len(c.conds) > etcdstore.DefaultMaxOps {
		return 0, fmt.Errorf("commit: %d writes and %d conditions: %w", len(c.ops), len(c.conds), etcdstore.ErrBatchTooLarge)
	}
	resp, err := s.client.Txn(ctx).If(c.conds...).Then(c.ops...).Commit()
	if err != nil {
		return 0, etcdErr(ctx, err)
	}
	if !resp.Succeeded {
		return 0, errConflict
	}
	return resp.Header.Revision, nil
}

// exists reports whether key is present.
func (s *store) exists(ctx context.Context, key string) (bool, error) {
	resp, err := s.client.Get(ctx, key, clientv3.WithCountOnly())
	if err != nil {
		return false, etcdErr(ctx, err)
	}
	return resp.Count > 0, nil
}

// etcdErr classifies an error of the etcd client as etcdstore does: context
// errors as they are, connectivity as etcdstore.ErrUnavailable.
func etcdErr(ctx context.Context, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return ctxErr
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	code := status.Code(err)
	var coded interface{ Code() codes.Code }
	if errors.As(err, &coded) {
		code = coded.Code()
	}
	if code == codes.Unavailable || code == codes.DeadlineExceeded {
		return fmt.Errorf("commit: %w: %w", etcdstore.ErrUnavailable, err)
	}
	return fmt.Errorf("commit: %w", err)
}
