package nodemanager

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	nodemanagerv1 "github.com/runwayhq/runway/gen/go/runway/nodemanager/v1"
	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
	"github.com/runwayhq/runway/pkg/clusterproto"
	"github.com/runwayhq/runway/pkg/etcdstore"
)

// The node manager's keys (pkg/etcdstore/schema.go):
//
//	nodes/{node}                      Node, put by the agent with its lease
//	leases/{node}                     the lease id (hex), same lease
//	drains/{node}                     DrainNodeRequest (etag cleared); no lease
//	noderoles/{node}                  SetNodeRolesRequest (etag cleared); no lease
//	runs/{node}/{project}.{workload}.{pod}  ReportWorkloadStateRequest (keyed like bindings/)
//
// A drain lives in its own key so that it outlives the node key: when the
// lease expires the node key goes, the drain stays, and the agent's next
// registration copies it into the new node key in the same Txn that checks
// the drain key did not change (RegisterNode). DrainNode and UndrainNode
// write both keys in one Txn, so the node key always agrees with the drain
// key and readers of the node key alone (the quota service's pool
// capacity) see `drained`. A node's roles live in a key of their own for
// the same reason, written and copied the same way.

// maxRetries bounds the read-modify-write loops.
const maxRetries = 5

var errConflict = errors.New("changed concurrently")

func drainKey(node string) string { return etcdstore.PrefixDrains + node }

// RolesKey is the key of a node's roles (a SetNodeRolesRequest, etag
// cleared): set by SetNodeRoles, copied into the node key at each
// registration; in Kubernetes mode the runtime writes them to the node's
// labels and then deletes the key (kube/roles.go).
func RolesKey(node string) string { return etcdstore.PrefixNodeRoles + node }
func leaseKey(node string) string { return etcdstore.PrefixLeases + node }
func nodeKey(node string) string  { return etcdstore.PrefixNodes + node }

// AgentKey is the key of the address of a Kubernetes node's agent (its
// pod output), which that agent keeps under a lease of its own.
func AgentKey(node string) string { return etcdstore.PrefixAgents + node }

// RunKey is the key of one pod's run report.
func RunKey(node, project, workload string, pod int) string {
	return etcdstore.PrefixRuns + node + "/" + project + "." + workload + "." + strconv.Itoa(pod)
}

var marshal = proto.MarshalOptions{Deterministic: true}

// store reads and writes the node manager's keys.
type store struct {
	client *clientv3.Client
	nodes  *etcdstore.Collection[*nodemanagerv1.Node]
	drains *etcdstore.Collection[*nodemanagerv1.DrainNodeRequest]
	roles  *etcdstore.Collection[*nodemanagerv1.SetNodeRolesRequest]
	runs   *etcdstore.Collection[*nodemanagerv1.ReportWorkloadStateRequest]
}

func newStore(c *clientv3.Client) *store {
	return &store{
		client: c,
		nodes:  etcdstore.NewCollection(c, etcdstore.PrefixNodes, func() *nodemanagerv1.Node { return new(nodemanagerv1.Node) }),
		drains: etcdstore.NewCollection(c, etcdstore.PrefixDrains, func() *nodemanagerv1.DrainNodeRequest { return new(nodemanagerv1.DrainNodeRequest) }),
		roles:  etcdstore.NewCollection(c, etcdstore.PrefixNodeRoles, func() *nodemanagerv1.SetNodeRolesRequest { return new(nodemanagerv1.SetNodeRolesRequest) }),
		runs:   etcdstore.NewCollection(c, etcdstore.PrefixRuns, func() *nodemanagerv1.ReportWorkloadStateRequest { return new(nodemanagerv1.ReportWorkloadStateRequest) }),
	}
}

// getNode reads a node with its etag set.
func (s *store) getNode(ctx context.Context, node string) (etcdstore.Item[*nodemanagerv1.Node], error) {
	it, err := s.nodes.Get(ctx, node)
	if err != nil {
		return it, err
	}
	it.Msg.Etag = it.Etag
	return it, nil
}

// setWith writes the node key updated by a change, and with it the node's
// key of that change (its drain or roles key: val, or a delete when nil), in
// one Txn fenced on the node key's revision rev. The node key keeps its
// lease. errConflict when the node changed since rev.
func (s *store) setWith(ctx context.Context, node string, rev int64, n *nodemanagerv1.Node, key string, val proto.Message) (int64, error) {
	n = proto.Clone(n).(*nodemanagerv1.Node)
	n.Etag = ""
	b, err := marshal.Marshal(n)
	if err != nil {
		return 0, err
	}
	ops := []clientv3.Op{clientv3.OpPut(nodeKey(node), string(b), clientv3.WithIgnoreLease())}
	if val != nil {
		vb, err := marshal.Marshal(val)
		if err != nil {
			return 0, err
		}
		ops = append(ops, clientv3.OpPut(key, string(vb)))
	} else {
		ops = append(ops, clientv3.OpDelete(key))
	}
	resp, err := s.client.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(nodeKey(node)), "=", rev)).
		Then(ops...).Commit()
	if err != nil {
		return 0, fmt.Errorf("update node %s: %w", node, err)
	}
	if !resp.Succeeded {
		return 0, errConflict
	}
	return resp.Header.Revision, nil
}

// RegisterNode writes a node key under lease, with its drain state copied
// from the drain key and its roles from the roles key (when there is one:
// else the roles n has, which only the Kubernetes runtime gives, from the
// node's labels), and the lease id under leases/. The Txn checks that
// neither key changed since it was read, so a drain or a role change that
// races the registration is never lost. It is the agent's registration; n
// is not modified.
func RegisterNode(ctx context.Context, client *clientv3.Client, n *nodemanagerv1.Node, lease clientv3.LeaseID) error {
	id, ok := cutNodeName(n.GetName())
	if !ok {
		return fmt.Errorf("register node: invalid name %q", n.GetName())
	}
	st := newStore(client)
	pool, err := nodePool(ctx, client, n)
	if err != nil {
		return fmt.Errorf("register node %s: %w", id, err)
	}
	for range maxRetries {
		n := proto.Clone(n).(*nodemanagerv1.Node)
		n.NodePool = pool
		var drainRev, rolesRev int64
		d, err := st.drains.Get(ctx, id)
		switch {
		case err == nil:
			drainRev = d.Revision
			n.Drained, n.DrainReason, n.DrainEvicts = true, d.Msg.GetReason(), d.Msg.GetEvictWorkloads()
		case !errors.Is(err, etcdstore.ErrNotFound):
			return err
		}
		r, err := st.roles.Get(ctx, id)
		switch {
		case err == nil:
			rolesRev = r.Revision
			n.Roles = r.Msg.GetRoles()
		case !errors.Is(err, etcdstore.ErrNotFound):
			return err
		}
		val, err := marshal.Marshal(n)
		if err != nil {
			return err
		}
		resp, err := client.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(drainKey(id)), "=", drainRev),
				clientv3.Compare(clientv3.ModRevision(RolesKey(id)), "=", rolesRev)).
			Then(clientv3.OpPut(nodeKey(id), string(val), clientv3.WithLease(lease)),
				clientv3.OpPut(leaseKey(id), strconv.FormatInt(int64(lease), 16), clientv3.WithLease(lease))).
			Commit()
		if err != nil {
			return fmt.Errorf("register node %s: %w", id, err)
		}
		if resp.Succeeded {
			return nil
		}
	}
	return fmt.Errorf("register node %s: drain or roles key kept changing: %w", id, errConflict)
}

// putRun stores a run report unless the stored one was observed later.
// It returns false when the report was older and ignored.
func (s *store) putRun(ctx context.Context, key string, r *nodemanagerv1.ReportWorkloadStateRequest) (bool, error) {
	val, err := marshal.Marshal(r)
	if err != nil {
		return false, err
	}
	for range maxRetries {
		resp, err := s.client.Get(ctx, key)
		if err != nil {
			return false, err
		}
		var rev int64
		if len(resp.Kvs) == 1 {
			old := new(nodemanagerv1.ReportWorkloadStateRequest)
			if err := proto.Unmarshal(resp.Kvs[0].Value, old); err == nil &&
				old.GetObserveTime().AsTime().After(r.GetObserveTime().AsTime()) {
				return false, nil
			}
			rev = resp.Kvs[0].ModRevision
		}
		txn, err := s.client.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(key), "=", rev)).
			Then(clientv3.OpPut(key, string(val))).Commit()
		if err != nil {
			return false, err
		}
		if txn.Succeeded {
			return true, nil
		}
	}
	return false, errConflict
}

// PutRun stores a run report at its key (RunKey) unless a report observed
// later is already stored: the agent's direct write, with the same rule as
// ReportWorkloadState.
func PutRun(ctx context.Context, client *clientv3.Client, r *nodemanagerv1.ReportWorkloadStateRequest) error {
	node, _ := cutNodeName(r.GetNode())
	project, workload, ok := ParseWorkload(r.GetWorkload())
	if !ok {
		return fmt.Errorf("run report: invalid workload %q", r.GetWorkload())
	}
	_, err := newStore(client).putRun(ctx, RunKey(node, project, workload, int(r.GetPodIndex())), r)
	return err
}

func cutNodeName(name string) (string, bool) {
	if len(name) <= len(nodesPrefix) || name[:len(nodesPrefix)] != nodesPrefix {
		return "", false
	}
	id := name[len(nodesPrefix):]
	return id, ValidNodeID(id)
}

// nodePool is the pool a registering node belongs to: the one its agent
// named, else the oldest pool whose selector its labels match, else the
// default pool. The answer is recorded in the node, so every reader (the
// scheduler, the quota capacity check) agrees on it.
func nodePool(ctx context.Context, client *clientv3.Client, n *nodemanagerv1.Node) (string, error) {
	if n.GetNodePool() != "" {
		return n.GetNodePool(), nil
	}
	pools := etcdstore.NewCollection(client, etcdstore.PrefixNodePools, func() *quotav1.NodePool { return new(quotav1.NodePool) })
	items, _, err := pools.ListAll(ctx, "")
	if err != nil {
		return "", fmt.Errorf("read node pools: %w", err)
	}
	msgs := make([]*quotav1.NodePool, len(items))
	for i, it := range items {
		msgs[i] = it.Msg
	}
	return clusterproto.PoolOf(n.GetLabels(), msgs), nil
}

// maxBatch bounds the operations of one Txn (etcd's default limit is 128).
const maxBatch = 64

// PutRuns stores many run reports (by run key) with PutRun's newer-wins
// rule in two round trips per maxBatch reports: one read of them all, one
// Txn fenced on what was read. It returns the keys not stored (all of a
// batch whose read or Txn failed; a batch that lost a race is retried one
// report at a time).
func PutRuns(ctx context.Context, client *clientv3.Client, reqs map[string]*nodemanagerv1.ReportWorkloadStateRequest) (map[string]bool, error) {
	keys := make([]string, 0, len(reqs))
	for k := range reqs {
		keys = append(keys, k)
	}
	failed := map[string]bool{}
	var errs []error
	s := newStore(client)
	for len(keys) > 0 {
		n := min(len(keys), maxBatch)
		batch := keys[:n]
		keys = keys[n:]
		if err := s.putRunBatch(ctx, batch, reqs); err != nil {
			if !errors.Is(err, errConflict) {
				for _, k := range batch {
					failed[k] = true
				}
				errs = append(errs, err)
				continue
			}
			for _, k := range batch {
				if _, err := s.putRun(ctx, k, reqs[k]); err != nil {
					failed[k] = true
					errs = append(errs, err)
				}
			}
		}
	}
	return failed, errors.Join(errs...)
}

func (s *store) putRunBatch(ctx context.Context, keys []string, reqs map[string]*nodemanagerv1.ReportWorkloadStateRequest) error {
	gets := make([]clientv3.Op, len(keys))
	for i, k := range keys {
		gets[i] = clientv3.OpGet(k)
	}
	read, err := s.client.Txn(ctx).Then(gets...).Commit()
	if err != nil {
		return fmt.Errorf("read run reports: %w", err)
	}
	var cmps []clientv3.Cmp
	var puts []clientv3.Op
	for i, k := range keys {
		var rev int64
		if kvs := read.Responses[i].GetResponseRange().GetKvs(); len(kvs) == 1 {
			old := new(nodemanagerv1.ReportWorkloadStateRequest)
			if err := proto.Unmarshal(kvs[0].Value, old); err == nil &&
				old.GetObserveTime().AsTime().After(reqs[k].GetObserveTime().AsTime()) {
				continue // a later report is stored: this one is done
			}
			rev = kvs[0].ModRevision
		}
		val, err := marshal.Marshal(reqs[k])
		if err != nil {
			return err
		}
		cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(k), "=", rev))
		puts = append(puts, clientv3.OpPut(k, string(val)))
	}
	if len(puts) == 0 {
		return nil
	}
	resp, err := s.client.Txn(ctx).If(cmps...).Then(puts...).Commit()
	if err != nil {
		return fmt.Errorf("store run reports: %w", err)
	}
	if !resp.Succeeded {
		return errConflict
	}
	return nil
}
