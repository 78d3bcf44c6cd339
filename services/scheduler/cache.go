package scheduler

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	nodemanagerv1 "github.com/runwayhq/runway/gen/go/runway/nodemanager/v1"
	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/cluster"
	"github.com/runwayhq/runway/pkg/clusterproto"
	"github.com/runwayhq/runway/pkg/etcdstore"
	"github.com/runwayhq/runway/pkg/scheduling"
)

// kind is one watched collection. The order is the order dirty keys are
// synced in: what a later kind refers to (a pool, a project, a node, a
// workload) is added to the state before it.
type kind int

const (
	kindPool kind = iota
	kindDepartment
	kindProject
	kindNode
	kindWorkload
	kindBinding
	numKinds
)

var kindNames = [numKinds]string{"node pool", "department", "project", "node", "workload", "binding"}

// binding is one stored binding: pod Pod of workload Workload (a
// cluster ID, "project/workload") on Node, parsed from its key and value.
type binding struct {
	Node     string
	Workload string
	Pod      int
	Devices  []int
	Share    int64
	// Revision is the key's ModRevision: the condition its delete or move
	// is fenced with, and when the pod was placed where it is (only a
	// consolidation move rewrites a binding), as an order the whole
	// cluster agrees on (the model's Placement.Order).
	Revision int64
}

type podKey struct {
	workload string
	pod      int
}

// update is one watch event of any collection, or the error that ended a watch.
type update struct {
	kind    kind
	id      string
	msg     proto.Message // nil for a delete
	rev     int64
	err     error
	removed bool
}

// Cache keeps a cluster.State up to date with etcd: one ListAll per
// collection, then a watch from each list's revision + 1, each event applied
// incrementally (a node added, a workload submitted, a pod placed from its
// binding). Events of different collections may arrive in any order, so an
// event that refers to something not there yet (a workload before its
// project) stays dirty and is retried after the next event. After a
// compaction the cache rebuilds once from a new list.
//
// Every replica keeps a cache, leader or not: the queries read it, and a new
// leader starts scheduling at once.
type Cache struct {
	client  *clientv3.Client
	clock   func() time.Time
	log     *slog.Logger
	skipped *etcdstore.SkipLog // undecodable values left out of the model

	mu    sync.Mutex
	state *cluster.State
	// writing is the workload planWrites is taking up, for containment
	// (contain.go); onWrite is the test hook called then.
	writing     string
	onWrite     func(workload string)
	ready       bool // the initial lists are applied
	pools       map[string]*quotav1.NodePool
	departments map[string]*quotav1.Department
	projects    map[string]*quotav1.Project
	nodes       map[string]*nodemanagerv1.Node
	workloads   map[string]*workloadv1.Workload // by cluster ID
	bindings    map[string]binding              // by id below PrefixBindings
	byPod       map[podKey]string               // binding id of each bound pod
	orphans     orphanIndex                     // bindings by workload and node, and which may be orphans (orphans.go)
	submitted   map[string]*workloadv1.WorkloadSpec
	held        map[string]*workloadv1.WorkloadSpec // set aside after an invariant failure, with the spec it had (contain.go)
	dirty       [numKinds]map[string]bool
	bindingRev  int64         // last revision applied from the bindings watch
	applied     chan struct{} // closed (and replaced) whenever events are applied

	changed chan struct{} // a non-blocking "something changed" for the loop

	// graces are the nodes missing or NotReady, keeping their pods for
	// the grace period (grace.go).
	graces graces

	lists     int    // how many times the cache listed (1 + relists), for tests
	afterList func() // test seam: runs between a list and its watch
	// beforeApply is a test seam: it runs, without the lock, before each
	// batch of watch events is applied (a test holds the model back).
	beforeApply func([]update)
}

func newCache(client *clientv3.Client, clock func() time.Time, log *slog.Logger, m *metrics, lostGrace time.Duration) *Cache {
	c := &Cache{client: client, clock: clock, log: log, changed: make(chan struct{}, 1), graces: newGraces(lostGrace),
		skipped: etcdstore.NewSkipLog(log, "scheduler cache", func(prefix string) { m.undecodable.WithLabelValues(prefix).Inc() })}
	c.reset()
	return c
}

// reset forgets everything: a new, empty state.
func (c *Cache) reset() {
	c.state = cluster.New()
	c.ready = false
	c.pools = map[string]*quotav1.NodePool{}
	c.departments = map[string]*quotav1.Department{}
	c.projects = map[string]*quotav1.Project{}
	c.nodes = map[string]*nodemanagerv1.Node{}
	c.workloads = map[string]*workloadv1.Workload{}
	c.bindings = map[string]binding{}
	c.byPod = map[podKey]string{}
	c.orphans = newOrphanIndex()
	c.submitted = map[string]*workloadv1.WorkloadSpec{}
	if c.held == nil { // kept across relists: the same state fails the same way
		c.held = map[string]*workloadv1.WorkloadSpec{}
	}
	for k := range c.dirty {
		c.dirty[k] = map[string]bool{}
	}
	c.bindingRev = 0
	if c.applied == nil {
		c.applied = make(chan struct{})
	}
}

// Changed is signalled (without blocking) after every applied batch of events.
func (c *Cache) Changed() <-chan struct{} { return c.changed }

// Run lists and watches until ctx ends. It relists after a compaction or a
// failed watch.
func (c *Cache) Run(ctx context.Context) {
	for ctx.Err() == nil {
		err := c.runOnce(ctx)
		if ctx.Err() != nil {
			return
		}
		c.log.Warn("scheduler cache: relisting", "err", err)
		t := time.NewTimer(100 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// runOnce does one list and watch; it returns when a watch fails.
func (c *Cache) runOnce(ctx context.Context) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ups := make(chan update, 256)
	var wg sync.WaitGroup
	defer wg.Wait() // after cancel: the watch goroutines end
	defer cancel()
	lists, err := c.list(wctx)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.reset()
	c.lists++
	hook := c.afterList
	for _, u := range lists.updates {
		c.record(u)
	}
	c.bindingRev = lists.revs[kindBinding]
	c.sync()
	c.ready = true
	c.mu.Unlock()
	c.notify()
	if hook != nil {
		hook()
	}
	c.watch(wctx, &wg, ups, lists.revs)
	for {
		var u update
		select {
		case <-ctx.Done():
			return ctx.Err()
		case u = <-ups:
		}
		batch := []update{u}
	drain:
		for len(batch) < 1024 {
			select {
			case u := <-ups:
				batch = append(batch, u)
			default:
				break drain
			}
		}
		if c.beforeApply != nil {
			c.beforeApply(batch)
		}
		c.mu.Lock()
		for _, u := range batch {
			if u.err != nil {
				c.mu.Unlock()
				return u.err
			}
			c.record(u)
		}
		c.sync()
		c.mu.Unlock()
		c.notify()
	}
}

// notify wakes WaitRevision callers and the loop.
func (c *Cache) notify() {
	c.mu.Lock()
	close(c.applied)
	c.applied = make(chan struct{})
	c.mu.Unlock()
	select {
	case c.changed <- struct{}{}:
	default:
	}
}

type listed struct {
	updates []update
	revs    [numKinds]int64
}

// collections are the watched collections; a value that does not decode
// is left out of the model (skipped), not a reason to stop following etcd.
func (c *Cache) collections() (
	*etcdstore.Collection[*quotav1.NodePool], *etcdstore.Collection[*quotav1.Department],
	*etcdstore.Collection[*quotav1.Project], *etcdstore.Collection[*nodemanagerv1.Node],
	*etcdstore.Collection[*workloadv1.Workload], *etcdstore.Collection[*workloadv1.PodStatus],
) {
	client, skip := c.client, c.skipped.Report
	return etcdstore.NewCollection(client, etcdstore.PrefixNodePools, func() *quotav1.NodePool { return new(quotav1.NodePool) }).SkipUndecodable(skip),
		etcdstore.NewCollection(client, etcdstore.PrefixDepartments, func() *quotav1.Department { return new(quotav1.Department) }).SkipUndecodable(skip),
		etcdstore.NewCollection(client, etcdstore.PrefixProjects, func() *quotav1.Project { return new(quotav1.Project) }).SkipUndecodable(skip),
		etcdstore.NewCollection(client, etcdstore.PrefixNodes, func() *nodemanagerv1.Node { return new(nodemanagerv1.Node) }).SkipUndecodable(skip),
		etcdstore.NewCollection(client, etcdstore.PrefixWorkloads, func() *workloadv1.Workload { return new(workloadv1.Workload) }).SkipUndecodable(skip),
		etcdstore.NewCollection(client, etcdstore.PrefixBindings, func() *workloadv1.PodStatus { return new(workloadv1.PodStatus) }).SkipUndecodable(skip)
}

func (c *Cache) list(ctx context.Context) (listed, error) {
	pools, depts, projects, nodes, workloads, bindings := c.collections()
	var out listed
	var err error
	out.updates, out.revs[kindPool], err = listOf(ctx, pools, kindPool, out.updates, err)
	out.updates, out.revs[kindDepartment], err = listOf(ctx, depts, kindDepartment, out.updates, err)
	out.updates, out.revs[kindProject], err = listOf(ctx, projects, kindProject, out.updates, err)
	out.updates, out.revs[kindNode], err = listOf(ctx, nodes, kindNode, out.updates, err)
	out.updates, out.revs[kindWorkload], err = listOf(ctx, workloads, kindWorkload, out.updates, err)
	out.updates, out.revs[kindBinding], err = listOf(ctx, bindings, kindBinding, out.updates, err)
	return out, err
}

func listOf[T proto.Message](ctx context.Context, coll *etcdstore.Collection[T], k kind, out []update, prev error) ([]update, int64, error) {
	if prev != nil {
		return out, 0, prev
	}
	items, rev, err := coll.ListAll(ctx, "")
	if err != nil {
		return out, 0, fmt.Errorf("list %ss: %w", kindNames[k], err)
	}
	for _, it := range items {
		out = append(out, update{kind: k, id: it.ID, msg: it.Msg, rev: it.Revision})
	}
	return out, rev, nil
}

func (c *Cache) watch(ctx context.Context, wg *sync.WaitGroup, ups chan<- update, revs [numKinds]int64) {
	pools, depts, projects, nodes, workloads, bindings := c.collections()
	watchOf(ctx, wg, pools, kindPool, revs[kindPool]+1, ups)
	watchOf(ctx, wg, depts, kindDepartment, revs[kindDepartment]+1, ups)
	watchOf(ctx, wg, projects, kindProject, revs[kindProject]+1, ups)
	watchOf(ctx, wg, nodes, kindNode, revs[kindNode]+1, ups)
	watchOf(ctx, wg, workloads, kindWorkload, revs[kindWorkload]+1, ups)
	watchOf(ctx, wg, bindings, kindBinding, revs[kindBinding]+1, ups)
}

func watchOf[T proto.Message](ctx context.Context, wg *sync.WaitGroup, coll *etcdstore.Collection[T], k kind, from int64, ups chan<- update) {
	events := coll.Watch(ctx, from)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ev := range events {
			u := update{kind: k, id: ev.Item.ID, rev: ev.Item.Revision, err: ev.Err}
			if ev.Err != nil {
				u.err = fmt.Errorf("watch %ss: %w", kindNames[k], ev.Err)
			} else if ev.Type == etcdstore.EventDelete {
				u.removed = true
			} else {
				u.msg = ev.Item.Msg
			}
			select {
			case ups <- u:
			case <-ctx.Done():
				return
			}
			if u.err != nil {
				return
			}
		}
	}()
}

// record stores an event's object and marks its key dirty. Called with mu held.
func (c *Cache) record(u update) {
	switch u.kind {
	case kindPool:
		setOrDelete(c.pools, u)
	case kindDepartment:
		setOrDelete(c.departments, u)
	case kindProject:
		setOrDelete(c.projects, u)
	case kindNode:
		old, had := c.nodes[u.id]
		setOrDelete(c.nodes, u)
		c.graces.note(u.id, old, had, c.nodes[u.id], c.clock())
		c.orphans.nodes[u.id] = true
	case kindWorkload:
		setOrDelete(c.workloads, u)
		c.orphans.workloads[u.id] = true
	case kindBinding:
		c.recordBinding(u)
		if u.rev > c.bindingRev {
			c.bindingRev = u.rev
		}
	}
	c.dirty[u.kind][u.id] = true
}

func setOrDelete[T proto.Message](m map[string]T, u update) {
	if u.removed {
		delete(m, u.id)
		return
	}
	m[u.id] = u.msg.(T)
}

// recordBinding keeps the bindings and their pod index; a removed binding
// is taken off the state at once (its workload and node are known).
func (c *Cache) recordBinding(u update) {
	if u.removed {
		b, ok := c.bindings[u.id]
		if !ok {
			return
		}
		delete(c.bindings, u.id)
		c.orphans.remove(u.id, b)
		pk := podKey{b.Workload, b.Pod}
		if c.byPod[pk] == u.id {
			delete(c.byPod, pk)
		}
		// A move writes the new binding before it deletes the old one: a
		// pod bound again is moving, and its workload stays Running.
		_, moving := c.byPod[pk]
		c.unplace(b, !moving)
		return
	}
	b, err := parseBinding(u.id, u.msg.(*workloadv1.PodStatus))
	if err != nil {
		c.log.Warn("scheduler cache: ignoring binding", "key", etcdstore.PrefixBindings+u.id, "err", err)
		return
	}
	b.Revision = u.rev
	if old, ok := c.bindings[u.id]; ok {
		c.orphans.remove(u.id, old)
	}
	c.bindings[u.id] = b
	c.orphans.add(u.id, b)
	c.byPod[podKey{b.Workload, b.Pod}] = u.id
}

// unplace takes a binding's pod off the state if it is placed there; a
// workload left with no pod goes back to Pending when requeue is set.
func (c *Cache) unplace(b binding, requeue bool) {
	w := c.state.Workload(b.Workload)
	if w == nil || b.Pod >= len(w.Placed) {
		return
	}
	if at := w.Placed[b.Pod]; at.Node != nil && at.Node.Name == b.Node {
		c.state.Unplace(w, b.Pod)
		if requeue && w.PlacedPods() == 0 {
			scheduling.Requeue(c.state, w)
		}
	}
}

// sync applies every dirty key to the state, kind by kind; a key whose
// dependencies are missing stays dirty. Called with mu held.
func (c *Cache) sync() {
	for k := kind(0); k < numKinds; k++ {
		ids := sortedKeys(c.dirty[k])
		switch k {
		case kindDepartment:
			byCreation(ids, func(id string) *timestamppb.Timestamp { return c.departments[id].GetCreateTime() })
		case kindProject:
			byCreation(ids, func(id string) *timestamppb.Timestamp { return c.projects[id].GetCreateTime() })
		}
		for _, id := range ids {
			if c.syncOne(k, id) {
				delete(c.dirty[k], id)
			}
		}
	}
	c.state.StampBelowMinimum(since(c.clock()))
}

func (c *Cache) syncOne(k kind, id string) bool {
	switch k {
	case kindPool:
		if np, ok := c.pools[id]; ok {
			c.state.AddPool(id).TimeBased = clusterproto.TimeBased(np)
		} else if p := c.state.Pool(id); p != nil {
			c.removePool(p)
		}
		return true
	case kindDepartment:
		return c.syncDepartment(id)
	case kindProject:
		return c.syncProject(id)
	case kindNode:
		return c.syncNode(id)
	case kindWorkload:
		return c.syncWorkload(id)
	default:
		return c.syncBinding(id)
	}
}

func (c *Cache) syncDepartment(id string) bool {
	d, ok := c.departments[id]
	if !ok {
		if q := c.state.Queue(id); q != nil {
			c.removeQueue(q)
		}
		return true
	}
	_, quotas := clusterproto.DepartmentQueue(d)
	if q := c.state.Queue(id); q != nil {
		base := cluster.DefaultQuota()
		if id == cluster.DefaultDepartment {
			base = cluster.UnlimitedQuota()
		}
		return c.setQuotas(q, quotas, base)
	}
	_, err := c.state.AddDepartment(id, quotas)
	return err == nil
}

func (c *Cache) syncProject(id string) bool {
	p, ok := c.projects[id]
	q := c.state.Queue(id)
	if !ok {
		if q != nil {
			c.removeQueue(q)
		}
		return true
	}
	_, dept, quotas := clusterproto.ProjectQueue(p)
	if q != nil && q.Parent != nil && q.Parent.Name != dept {
		// State cannot move a queue: it goes, and comes back under dept.
		c.removeQueue(q)
		q = nil
	}
	if q != nil {
		return c.setQuotas(q, quotas, cluster.DefaultQuota())
	}
	if dept != cluster.DefaultDepartment && c.state.Queue(dept) == nil {
		return false
	}
	if _, err := c.state.AddProject(id, dept, quotas); err != nil {
		return false
	}
	// Workloads that arrived first can be submitted now.
	for wid := range c.workloads {
		if strings.HasPrefix(wid, id+"/") && c.state.Workload(wid) == nil {
			c.dirty[kindWorkload][wid] = true
		}
	}
	return true
}

// setQuotas replaces a queue's quotas in place; false if one names a pool
// the state does not have yet.
func (c *Cache) setQuotas(q *cluster.Queue, quotas map[string]cluster.Quota, base cluster.Quota) bool {
	for pool := range quotas {
		if c.state.Pool(pool) == nil {
			return false
		}
	}
	for _, p := range c.state.Pools {
		if qu, ok := quotas[p.Name]; ok {
			q.Quotas[p.Index] = qu
		} else {
			q.Quotas[p.Index] = base
		}
	}
	return true
}

// syncNode adds a node, follows its readiness and its shape (GPUs that
// another scheduler takes or frees on a Kubernetes node, labels), and
// removes a deleted one (its pods are lost, and re-placed by the leader).
// A node that moves to another pool is removed and added there, its pods
// put back from their bindings.
func (c *Cache) syncNode(id string) bool {
	raw, ok := c.nodes[id]
	n := c.state.Node(id)
	if n == nil {
		if !ok {
			return true
		}
		spec := nodeSpec(id, raw)
		if c.state.Pool(spec.Pool) == nil {
			return false
		}
		if c.graces.unreadyInGrace(id, raw) {
			spec.NotReady, spec.Cordoned = false, true
		}
		_, err := c.state.AddNode(spec)
		c.markBindingsOn(id)
		return err == nil
	}
	// A node gone past its grace goes; one moved to another pool goes and
	// comes back there. Within the grace it stays, cordoned, as does a
	// NotReady one.
	inGrace := c.graces.missingInGrace(id)
	if !ok && !inGrace {
		c.requeueLost(c.state.RemoveNode(n))
		return true
	}
	if ok && nodeSpec(id, raw).Pool != n.Pool.Name {
		lost := c.state.RemoveNode(n)
		added := c.syncNode(id)
		for _, ref := range lost {
			if w := ref.Workload; w.PlacedPods() == 0 && !(added && c.hasBindingOn(id, ref)) {
				scheduling.Requeue(c.state, w)
			}
		}
		return added
	}
	var lost []cluster.PodRef
	if spec := nodeSpec(id, raw); ok && !n.SameShape(spec) {
		// Its pods come back from their bindings below, as far as the new
		// shape has their devices.
		lost = c.state.Reshape(n, spec)
	}
	unready := ok && c.graces.unreadyInGrace(id, raw)
	ready := (ok && (nodeReady(raw) || unready)) || (!ok && inGrace && n.Ready)
	c.state.SetCordoned(n, ready && (!ok || unready || cordoned(raw)))
	lost = append(lost, c.state.SetReady(n, ready)...)
	if ready {
		c.markBindingsOn(id)
	}
	for _, ref := range lost {
		if ref.Workload.PlacedPods() == 0 && !(ready && c.hasBindingOn(id, ref)) {
			scheduling.Requeue(c.state, ref.Workload)
		}
	}
	return true
}

// hasBindingOn: the pod is still bound to node (its binding will put it back).
func (c *Cache) hasBindingOn(node string, ref cluster.PodRef) bool {
	_, ok := c.bindings[bindingID(node, ref.Workload.ID, ref.Pod)]
	return ok
}

// nodeSpec describes a stored node (nodes/{node}, written by the node
// manager) to the model: its pool is node_pool ("default" when empty), its
// GPUs the listed devices (else capacity / 1000), GPU memory the first
// device's, CPU and memory the allocatable amounts (else capacity).
func nodeSpec(id string, n *nodemanagerv1.Node) cluster.NodeSpec {
	pool := clusterproto.ID(clusterproto.NodePoolName(n.GetNodePool()))
	res := n.GetAllocatable()
	if res == nil {
		res = n.GetCapacity()
	}
	gpus := len(n.GetDevices())
	var mem int64
	if gpus > 0 {
		mem = n.GetDevices()[0].GetMemoryBytes()
	} else {
		gpus = int(n.GetCapacity().GetMilliGpus() / cluster.FullDevice)
	}
	var unhealthy map[int]string
	for i, d := range n.GetDevices() {
		if !d.GetHealthy() {
			if unhealthy == nil {
				unhealthy = map[int]string{}
			}
			unhealthy[i] = cmp.Or(d.GetHealthMessage(), "unhealthy")
		}
	}
	return cluster.NodeSpec{
		Name: id, Pool: pool, GPUs: gpus, GPUMemory: mem,
		CPU: res.GetMilliCpu(), Memory: res.GetMemoryBytes(),
		Labels: n.GetLabels(), NotReady: !nodeReady(n), Cordoned: cordoned(n), Unhealthy: unhealthy,
		Roles: clusterproto.ToNodeRoles(n.GetRoles()),
	}
}

// nodeReady: Ready and not drained with eviction (its pods are then lost,
// NODE_DRAINED).
func nodeReady(n *nodemanagerv1.Node) bool {
	return n.GetReadiness() == nodemanagerv1.Readiness_READINESS_READY && !(n.GetDrained() && n.GetDrainEvicts())
}

// cordoned: drained without eviction, the node keeps its pods and takes
// nothing new.
func cordoned(n *nodemanagerv1.Node) bool { return n.GetDrained() && !n.GetDrainEvicts() }

// schedulable reports whether the scheduler should hold a workload in its
// model: not final and not suspended.
func schedulable(w *workloadv1.Workload) bool {
	if w == nil || w.GetSpec().GetSuspended() {
		return false
	}
	p := w.GetStatus().GetPhase()
	return p != workloadv1.WorkloadPhase_WORKLOAD_PHASE_COMPLETED && p != workloadv1.WorkloadPhase_WORKLOAD_PHASE_FAILED
}

// syncWorkload submits a new workload, resubmits one whose spec changed
// (then re-places it from its bindings), and removes one that was deleted,
// finished or suspended. Status-only updates (the Workload service folding
// events) change nothing.
func (c *Cache) syncWorkload(id string) bool {
	raw := c.workloads[id]
	cur := c.state.Workload(id)
	aside := false
	if spec, ok := c.held[id]; ok {
		if !schedulable(raw) || !proto.Equal(spec, raw.GetSpec()) {
			delete(c.held, id)
		} else if cur != nil || !c.boundAny(id, raw) {
			return true // still set aside
		} else {
			aside = true // a relist: its pods must be counted, the workload left alone
		}
	}
	if !schedulable(raw) {
		if cur != nil {
			c.state.Remove(cur)
			delete(c.submitted, id)
		}
		return true
	}
	if cur != nil && proto.Equal(c.submitted[id], raw.GetSpec()) {
		return true
	}
	spec, err := clusterproto.ToClusterSpec(raw)
	if err != nil {
		c.log.Warn("scheduler cache: ignoring workload", "workload", id, "err", err)
		return true
	}
	if len(spec.Pools) == 0 {
		for _, np := range c.projects[spec.Project].GetDefaultNodePools() {
			spec.Pools = append(spec.Pools, clusterproto.ID(np))
		}
	}
	if cur != nil {
		c.state.Remove(cur)
		delete(c.submitted, id)
	}
	w, err := c.state.Submit(spec)
	if err != nil {
		return false // its project or a pool is not there yet
	}
	w.Aside = aside
	c.submitted[id] = raw.GetSpec()
	for pod := range spec.Pods {
		if bid, ok := c.byPod[podKey{id, pod}]; ok {
			c.dirty[kindBinding][bid] = true
		}
	}
	return true
}

// boundAny reports whether any pod of the workload has a binding.
func (c *Cache) boundAny(id string, raw *workloadv1.Workload) bool {
	for pod := range clusterproto.EffectivePods(raw.GetSpec()) {
		if _, ok := c.byPod[podKey{id, int(pod)}]; ok {
			return true
		}
	}
	return false
}

// syncBinding places a bound pod on its node. A binding whose workload or
// node is not in the model (yet) stays dirty; the leader deletes bindings of
// workloads that are gone (orphans).
func (c *Cache) syncBinding(id string) bool {
	b, ok := c.bindings[id]
	if !ok {
		return true
	}
	w, n := c.state.Workload(b.Workload), c.state.Node(b.Node)
	if w == nil || n == nil || !n.Ready {
		return false
	}
	if b.Pod >= len(w.Placed) {
		return true
	}
	for _, d := range b.Devices {
		if d < 0 || d >= len(n.Devices) {
			c.log.Warn("scheduler cache: binding names a device the node does not have", "binding", id)
			return true
		}
	}
	at := w.Placed[b.Pod]
	if at.Node == n && at.Order == b.Revision {
		return true
	}
	if at.Node != nil {
		c.state.Unplace(w, b.Pod) // elsewhere, or moved on this node (a rewritten binding)
	}
	// The binding's revision orders the pods as they were placed, however
	// the cache lists or watches them (a restart, another replica).
	c.state.PlaceInOrder(w, b.Pod, n, b.Devices, b.Share, b.Revision)
	if w.Phase == cluster.Pending && w.PlacedPods() >= w.MinPods {
		w.Phase = cluster.Running
		if w.FirstRunning < 0 {
			w.FirstRunning = since(c.clock())
		}
	}
	return true
}

// since is a wall-clock time as the model's duration since the Unix epoch,
// the unit of WorkloadSpec.Submitted (clusterproto.ToClusterSpec).
func since(t time.Time) time.Duration { return time.Duration(t.UnixNano()) }

// bindingID is a pod's key below PrefixBindings: {node}/{project}.{workload}.{pod}.
// Project and workload ids are [a-z0-9-], so the dots separate them.
func bindingID(node, workloadID string, pod int) string {
	return node + "/" + strings.Replace(workloadID, "/", ".", 1) + "." + strconv.Itoa(pod)
}

var errBindingKey = errors.New("binding key is not {node}/{project}.{workload}.{pod}")

func parseBinding(id string, ps *workloadv1.PodStatus) (binding, error) {
	node, rest, ok := strings.Cut(id, "/")
	parts := strings.Split(rest, ".")
	if !ok || len(parts) != 3 {
		return binding{}, errBindingKey
	}
	pod, err := strconv.Atoi(parts[2])
	if err != nil || pod < 0 || parts[0] == "" || parts[1] == "" {
		return binding{}, errBindingKey
	}
	b := binding{Node: node, Workload: clusterproto.ClusterID(parts[0], parts[1]), Pod: pod, Share: int64(ps.GetFractionMilli())}
	for _, d := range ps.GetDeviceIndexes() {
		b.Devices = append(b.Devices, int(d))
	}
	return b, nil
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// byCreation orders queue ids by create_time, then name: cluster orders
// sibling queues by when they were added, and the API says the one created
// first is served first (services/quota/README.md).
func byCreation(ids []string, created func(string) *timestamppb.Timestamp) {
	sort.SliceStable(ids, func(i, j int) bool {
		a, b := created(ids[i]), created(ids[j])
		if a.GetSeconds() != b.GetSeconds() {
			return a.GetSeconds() < b.GetSeconds()
		}
		return a.GetNanos() < b.GetNanos()
	})
}
