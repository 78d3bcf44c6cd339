package workload

import (
	"context"
	"errors"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	nodemanagerv1 "github.com/runwayhq/runway/gen/go/runway/nodemanager/v1"
	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/auth"
	"github.com/runwayhq/runway/pkg/etcdstore"
)

// Dispatcher follows the workloads and nodes in etcd, matches what happens
// against the subscriptions, records a Delivery for each match (once: its
// id is derived from the occurrence and the subscription, and records are
// created only if absent) and sends the due ones (sender). Replicas may
// each run one: a delivery is claimed with a conditional write before it
// is sent.
type Dispatcher struct {
	n        *Notifications
	wls      *etcdstore.Collection[*workloadv1.Workload]
	nodes    *etcdstore.Collection[*nodemanagerv1.Node]
	projects *etcdstore.Collection[*quotav1.Project]
	depts    *etcdstore.Collection[*quotav1.Department]
	send     *sender

	model     map[string]*workloadv1.Workload // by store key
	nodeModel map[string]*nodemanagerv1.Node
	subs      []*workloadv1.Subscription
	subsRead  time.Time
	subsRev   int64 // the revision subs were read at
	// firing: the lasting conditions already recorded, by subscription and
	// occurrence key, so one that goes on is recorded once (ended ones
	// leave it).
	firing map[string]bool
}

func newDispatcher(n *Notifications) *Dispatcher {
	c := n.client
	return &Dispatcher{n: n, send: newSender(n),
		wls:      etcdstore.NewCollection(c, etcdstore.PrefixWorkloads, func() *workloadv1.Workload { return new(workloadv1.Workload) }),
		nodes:    etcdstore.NewCollection(c, etcdstore.PrefixNodes, func() *nodemanagerv1.Node { return new(nodemanagerv1.Node) }),
		projects: etcdstore.NewCollection(c, etcdstore.PrefixProjects, func() *quotav1.Project { return new(quotav1.Project) }),
		depts:    etcdstore.NewCollection(c, etcdstore.PrefixDepartments, func() *quotav1.Department { return new(quotav1.Department) }),
		firing:   map[string]bool{}}
}

// Run dispatches until ctx ends; a failed watch (compaction, etcd away) is
// followed again from a fresh list.
func (d *Dispatcher) Run(ctx context.Context) error {
	go d.send.run(ctx)
	for {
		err := d.follow(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		d.n.log.Warn("notification dispatcher: following again", "err", err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// follow lists the workloads and nodes, matches what happened recently,
// then watches both and checks the lasting conditions every tick.
func (d *Dispatcher) follow(ctx context.Context) error {
	wls, wrev, err := d.wls.ListAll(ctx, "")
	if err != nil {
		return err
	}
	nodes, nrev, err := d.nodes.ListAll(ctx, "")
	if err != nil {
		return err
	}
	since := d.n.clock.Now().Add(-d.n.cfg.Lookback)
	d.model, d.nodeModel = map[string]*workloadv1.Workload{}, map[string]*nodemanagerv1.Node{}
	for _, it := range nodes {
		d.nodeModel[it.Msg.GetName()] = it.Msg
	}
	for _, it := range wls {
		d.model[it.Msg.GetName()] = it.Msg
		d.dispatch(ctx, wrev, workloadChanges(nil, it.Msg, since))
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wch := d.wls.Watch(ctx, wrev+1)
	nch := d.nodes.Watch(ctx, nrev+1)
	tick := time.NewTicker(d.n.cfg.Tick)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case ev, ok := <-wch:
			if !ok || ev.Err != nil {
				return errors.Join(errors.New("workload watch ended"), ev.Err)
			}
			d.workloadEvent(ctx, ev)
		case ev, ok := <-nch:
			if !ok || ev.Err != nil {
				return errors.Join(errors.New("node watch ended"), ev.Err)
			}
			d.nodeEvent(ctx, ev)
		case <-tick.C:
			d.conditions(ctx)
		}
	}
}

func (d *Dispatcher) workloadEvent(ctx context.Context, ev etcdstore.WatchEvent[*workloadv1.Workload]) {
	name := ev.Item.Msg.GetName()
	if ev.Type == etcdstore.EventDelete {
		delete(d.model, name)
		return
	}
	prev := d.model[name]
	if prev.GetUid() != ev.Item.Msg.GetUid() {
		prev = nil // created again under the same name
	}
	d.model[name] = ev.Item.Msg
	d.dispatch(ctx, ev.Item.Revision, workloadChanges(prev, ev.Item.Msg, d.n.clock.Now().Add(-d.n.cfg.Lookback)))
}

func (d *Dispatcher) nodeEvent(ctx context.Context, ev etcdstore.WatchEvent[*nodemanagerv1.Node]) {
	name := ev.Item.Msg.GetName()
	prev := d.nodeModel[name]
	if ev.Type == etcdstore.EventDelete {
		delete(d.nodeModel, name)
		d.dispatch(ctx, ev.Item.Revision, nodeChanges(ev.Item.Msg, nil, true, d.n.clock.Now()))
		return
	}
	d.nodeModel[name] = ev.Item.Msg
	d.dispatch(ctx, ev.Item.Revision, nodeChanges(prev, ev.Item.Msg, false, d.n.clock.Now()))
}

// conditions finds the lasting conditions now: pending or idle too long,
// projects and departments over quota.
func (d *Dispatcher) conditions(ctx context.Context) {
	now := d.n.clock.Now()
	var occ []occurrence
	allocated := map[string]int64{}
	for _, w := range d.model {
		occ = append(occ, workloadConditions(w, now)...)
		allocated[w.GetProject()] += w.GetStatus().GetAllocatedMilliGpus()
	}
	if d.wantsQuota(ctx) {
		projects, _, err := d.projects.ListAll(ctx, "")
		if err == nil {
			depts, _, derr := d.depts.ListAll(ctx, "")
			err = derr
			occ = append(occ, quotaConditions(msgs(projects), msgs(depts), allocated, now)...)
		}
		if err != nil {
			d.n.log.Warn("notification dispatcher: read quotas", "err", err)
		}
	}
	d.dispatchLasting(ctx, occ)
}

func msgs[T proto.Message](items []etcdstore.Item[T]) []T {
	out := make([]T, len(items))
	for i, it := range items {
		out[i] = it.Msg
	}
	return out
}

// wantsQuota: is any subscription about quotas (reading every project
// and department is then worth it)?
func (d *Dispatcher) wantsQuota(ctx context.Context) bool {
	for _, s := range d.subscriptions(ctx, 0) {
		for _, e := range s.GetEvents() {
			if e == workloadv1.NotificationEvent_NOTIFICATION_EVENT_PROJECT_OVER_QUOTA ||
				e == workloadv1.NotificationEvent_NOTIFICATION_EVENT_DEPARTMENT_OVER_QUOTA {
				return true
			}
		}
	}
	return false
}

// subscriptions is every subscription as of revision rev or later (read
// again when the copy is older), or for rev 0 as of a quarter of a second
// ago: an event is matched against every subscription made before it.
func (d *Dispatcher) subscriptions(ctx context.Context, rev int64) []*workloadv1.Subscription {
	if rev == 0 && time.Since(d.subsRead) < 250*time.Millisecond || rev != 0 && rev <= d.subsRev {
		return d.subs
	}
	items, at, err := d.n.subs.ListAll(ctx, "")
	if err != nil {
		d.n.log.Warn("notification dispatcher: read subscriptions", "err", err)
		return d.subs
	}
	d.subs, d.subsRead, d.subsRev = msgs(items), time.Now(), at
	return d.subs
}

// dispatch records a delivery for every subscription an occurrence (of
// etcd revision rev) matches and its owner may view.
func (d *Dispatcher) dispatch(ctx context.Context, rev int64, occ []occurrence) {
	if len(occ) == 0 {
		return
	}
	subs := d.subscriptions(ctx, rev)
	for _, o := range occ {
		for _, s := range subs {
			if matches(s, o) {
				d.record(ctx, s, o)
			}
		}
	}
}

// dispatchLasting is dispatch for conditions that go on: each is
// recorded when it begins (for each subscription), not at every tick.
func (d *Dispatcher) dispatchLasting(ctx context.Context, occ []occurrence) {
	subs := d.subscriptions(ctx, 0)
	now := map[string]bool{}
	for _, o := range occ {
		for _, s := range subs {
			if !matches(s, o) {
				continue
			}
			k := s.GetUid() + "\x00" + o.key
			now[k] = true
			if !d.firing[k] {
				d.record(ctx, s, o)
			}
		}
	}
	d.firing = now
}

// record stores the delivery of o to s, unless the owner may not view it
// (then nothing is recorded: the record itself would tell them).
func (d *Dispatcher) record(ctx context.Context, s *workloadv1.Subscription, o occurrence) {
	who, ok := d.n.guard.CallerOf(s.GetOwner())
	if !ok || who.UserUID != s.GetOwnerUid() {
		return
	}
	if !d.n.mayView(who, s, o, d.attrsOf(o)) || d.n.mayReceive(who, s) != nil {
		return
	}
	if err := d.send.record(ctx, s, o); err != nil && ctx.Err() == nil {
		d.n.log.Warn("notification dispatcher: record a delivery", "subscription", s.GetName(), "err", err)
	}
}

// subscriptionKeyOf is a subscription name's store id ({user}/{id}).
func subscriptionKeyOf(name string) string {
	user, id, _ := strings.Cut(strings.TrimPrefix(name, usersPrefix), "/subscriptions/")
	return user + "/" + id
}

// attrsOf is what conditional grants look at for o: its workload's creator
// and type, from the model.
func (d *Dispatcher) attrsOf(o occurrence) auth.Attrs {
	return workloadAttrs(d.model[o.resource])
}

// workloadAttrs is w's creator and type (nothing for nil: only full grants
// then hold).
func workloadAttrs(w *workloadv1.Workload) auth.Attrs {
	if w == nil {
		return auth.Attrs{}
	}
	return auth.Attrs{Creator: w.GetCreator(), CreatorUID: w.GetCreatorUid(),
		Inference: w.GetType() == workloadv1.WorkloadType_WORKLOAD_TYPE_INFERENCE}
}
