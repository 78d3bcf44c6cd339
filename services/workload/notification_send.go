package workload

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/etcdstore"
)

// Limits of what one delivery carries and how long one attempt takes.
const (
	maxNotificationMessage = 4 << 10
	attemptTimeout         = 15 * time.Second
	// claimFor is how long a claimed delivery is left to its claimer: one
	// that dies mid-attempt is retried after it (at least once).
	claimFor = 2 * attemptTimeout
	// rescanEvery: every record is read again this often, for deliveries
	// another replica recorded or abandoned, and to drop the oldest.
	rescanEvery = time.Minute
	// parallelAttempts: attempts under way at once, so one slow receiver
	// does not hold up everyone else's.
	parallelAttempts = 8
)

// sender sends the due deliveries: claims each with a conditional write,
// checks the owner's access again, sends, and records the outcome.
type sender struct {
	n    *Notifications
	wls  *etcdstore.Collection[*workloadv1.Workload]
	kick chan struct{}

	slots chan struct{}  // parallelAttempts
	wg    sync.WaitGroup // the attempts under way

	mu       sync.Mutex
	due      map[string]time.Time // store key → next attempt, the ones this replica knows of
	inflight map[string]bool      // store keys being attempted now
	pending  map[string]int       // by user: deliveries not yet finished
	limiters map[string]*rate.Limiter
}

func newSender(n *Notifications) *sender {
	return &sender{n: n, kick: make(chan struct{}, 1), due: map[string]time.Time{}, pending: map[string]int{},
		limiters: map[string]*rate.Limiter{}, slots: make(chan struct{}, parallelAttempts), inflight: map[string]bool{},
		wls: etcdstore.NewCollection(n.client, etcdstore.PrefixWorkloads, func() *workloadv1.Workload { return new(workloadv1.Workload) })}
}

// deliveryID is the same for the same occurrence and subscription, on
// every replica and after every restart.
func deliveryID(s *workloadv1.Subscription, o occurrence) string {
	h := sha256.Sum256([]byte(s.GetUid() + "\x00" + o.key))
	return "d-" + hex.EncodeToString(h[:10])
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}

// record creates the delivery of o to s if absent.
func (x *sender) record(ctx context.Context, s *workloadv1.Subscription, o occurrence) error {
	id := deliveryID(s, o)
	key := subscriptionKeyOf(s.GetName()) + "/" + id
	now := timestamppb.New(x.n.clock.Now())
	dl := &workloadv1.Delivery{Name: s.GetName() + "/deliveries/" + id, State: workloadv1.DeliveryState_DELIVERY_STATE_PENDING,
		NextAttemptTime: now, CreateTime: now, UpdateTime: now, OwnerUid: s.GetOwnerUid(),
		Notification: &workloadv1.Notification{Subscription: s.GetName(), DeliveryId: id, Event: o.event, Resource: o.resource,
			Message: clip(o.message, maxNotificationMessage), EventTime: timestamppb.New(o.time)}}
	x.mu.Lock()
	full := x.pending[s.GetOwner()] >= x.n.cfg.MaxPendingPerUser
	x.mu.Unlock()
	if full {
		dl.State, dl.NextAttemptTime = workloadv1.DeliveryState_DELIVERY_STATE_FAILED, nil
		dl.LastError = fmt.Sprintf("not sent: %s already has %d notifications waiting to be sent", s.GetOwner(), x.n.cfg.MaxPendingPerUser)
	}
	_, err := x.n.deliveries.Create(ctx, key, dl)
	if errors.Is(err, etcdstore.ErrAlreadyExists) {
		return nil
	}
	if err != nil || full {
		return err
	}
	x.mu.Lock()
	x.due[key] = now.AsTime()
	x.pending[s.GetOwner()]++
	x.mu.Unlock()
	select {
	case x.kick <- struct{}{}:
	default:
	}
	return nil
}

// run sends until ctx ends, then waits for the attempts under way.
func (x *sender) run(ctx context.Context) {
	defer x.wg.Wait()
	x.rescan(ctx)
	tick := time.NewTicker(x.n.cfg.Tick)
	defer tick.Stop()
	last := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-x.kick:
		case <-tick.C:
		}
		if time.Since(last) > rescanEvery {
			x.rescan(ctx)
			last = time.Now()
		}
		x.sendDue(ctx)
	}
}

// rescan reads every record: the pending ones are due, the oldest
// finished ones past each subscription's cap go.
func (x *sender) rescan(ctx context.Context) {
	items, _, err := x.n.deliveries.ListAll(ctx, "")
	if err != nil {
		x.n.log.Warn("notification sender: read deliveries", "err", err)
		return
	}
	due, pending := map[string]time.Time{}, map[string]int{}
	bySub := map[string][]etcdstore.Item[*workloadv1.Delivery]{}
	for _, it := range items {
		sub := it.Msg.GetNotification().GetSubscription()
		if it.Msg.GetState() == workloadv1.DeliveryState_DELIVERY_STATE_PENDING {
			due[it.ID] = it.Msg.GetNextAttemptTime().AsTime()
			pending[ownerOf(sub)]++
			continue
		}
		bySub[sub] = append(bySub[sub], it)
	}
	x.mu.Lock()
	x.due, x.pending = due, pending
	x.mu.Unlock()
	for _, done := range bySub {
		if len(done) <= x.n.cfg.MaxDeliveriesKept {
			continue
		}
		sortByCreate(done)
		for _, it := range done[:len(done)-x.n.cfg.MaxDeliveriesKept] {
			if _, err := x.n.deliveries.Delete(ctx, it.ID, it.Etag); err != nil && ctx.Err() == nil {
				x.n.log.Warn("notification sender: drop an old delivery", "key", it.ID, "err", err)
			}
		}
	}
}

// ownerOf is the user of a subscription name.
func ownerOf(sub string) string {
	u, _, _ := strings.Cut(sub, "/subscriptions/")
	return u
}

// sendDue starts an attempt at every delivery whose time has come and
// that is not being attempted already, parallelAttempts at a time.
func (x *sender) sendDue(ctx context.Context) {
	now := x.n.clock.Now()
	x.mu.Lock()
	var keys []string
	for k, t := range x.due {
		if !t.After(now) && !x.inflight[k] {
			keys = append(keys, k)
			x.inflight[k] = true
		}
	}
	x.mu.Unlock()
	for i, k := range keys {
		select {
		case x.slots <- struct{}{}:
		case <-ctx.Done():
			x.mu.Lock()
			for _, k := range keys[i:] {
				delete(x.inflight, k)
			}
			x.mu.Unlock()
			return
		}
		x.wg.Go(func() {
			defer func() {
				<-x.slots
				x.mu.Lock()
				delete(x.inflight, k)
				x.mu.Unlock()
			}()
			x.attempt(ctx, k)
		})
	}
}

// limiter is the user's rate.
func (x *sender) limiter(user string) *rate.Limiter {
	x.mu.Lock()
	defer x.mu.Unlock()
	l, ok := x.limiters[user]
	if !ok {
		per := x.n.cfg.RatePerMinute
		l = rate.NewLimiter(rate.Limit(float64(per)/60), per)
		x.limiters[user] = l
	}
	return l
}

// settle records where a key stands for this replica after an attempt.
func (x *sender) settle(key, user string, dl *workloadv1.Delivery) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if dl != nil && dl.GetState() == workloadv1.DeliveryState_DELIVERY_STATE_PENDING {
		x.due[key] = dl.GetNextAttemptTime().AsTime()
		return
	}
	if _, ok := x.due[key]; ok {
		delete(x.due, key)
		x.pending[user]--
	}
}

// attempt makes one attempt at a delivery: it is read, its subscription
// and its owner's access checked now, claimed, sent and its outcome
// written (each write conditional on the one before, so two replicas never
// both send).
func (x *sender) attempt(ctx context.Context, key string) {
	it, err := x.n.deliveries.Get(ctx, key)
	if err != nil {
		if errors.Is(err, etcdstore.ErrNotFound) {
			x.settle(key, "", nil)
		}
		return
	}
	dl := it.Msg
	user := ownerOf(dl.GetNotification().GetSubscription())
	now := x.n.clock.Now()
	if dl.GetState() != workloadv1.DeliveryState_DELIVERY_STATE_PENDING || dl.GetNextAttemptTime().AsTime().After(now) {
		x.settle(key, user, dl)
		return
	}
	sub, err := x.n.subs.Get(ctx, subscriptionKeyOf(dl.GetNotification().GetSubscription()))
	if errors.Is(err, etcdstore.ErrNotFound) {
		_, _ = x.n.deliveries.Delete(ctx, key, it.Etag) // its subscription is gone
		x.settle(key, user, nil)
		return
	}
	if err != nil {
		return
	}
	if why := x.withheld(ctx, sub.Msg, dl); why != "" {
		out := proto.Clone(dl).(*workloadv1.Delivery)
		out.State, out.LastError, out.NextAttemptTime, out.UpdateTime = workloadv1.DeliveryState_DELIVERY_STATE_FAILED, why, nil, timestamppb.New(now)
		// Nothing of what it was about stays for someone who may not see it.
		out.Notification.Resource, out.Notification.Message = "", ""
		x.write(ctx, key, user, out, it.Revision)
		return
	}
	if !x.limiter(user).Allow() {
		out := proto.Clone(dl).(*workloadv1.Delivery)
		out.NextAttemptTime = timestamppb.New(now.Add(time.Minute / time.Duration(x.n.cfg.RatePerMinute)))
		out.LastError = fmt.Sprintf("waiting: %s is sent at most %d notifications a minute", user, x.n.cfg.RatePerMinute)
		x.write(ctx, key, user, out, it.Revision)
		return
	}
	claim := proto.Clone(dl).(*workloadv1.Delivery)
	claim.Attempts++
	claim.NextAttemptTime, claim.UpdateTime = timestamppb.New(now.Add(claimFor)), timestamppb.New(now)
	rev, err := etcdstore.NewBatch(x.n.client).PutIf(x.n.deliveries.Key(key), claim, it.Revision).Commit(ctx)
	if err != nil {
		return // another replica claimed it, or etcd is away: the next pass sees
	}
	actx, cancel := context.WithTimeout(ctx, attemptTimeout)
	sendErr := x.n.deliver(actx, sub.Msg, claim.GetNotification())
	cancel()
	out := proto.Clone(claim).(*workloadv1.Delivery)
	done := x.n.clock.Now()
	out.UpdateTime = timestamppb.New(done)
	switch {
	case sendErr == nil:
		// last_error stays: the record of the attempts that failed first.
		out.State, out.SentTime, out.NextAttemptTime = workloadv1.DeliveryState_DELIVERY_STATE_SENT, timestamppb.New(done), nil
	case out.GetAttempts() >= int32(x.n.cfg.MaxAttempts):
		out.State, out.NextAttemptTime = workloadv1.DeliveryState_DELIVERY_STATE_FAILED, nil
		out.LastError = clip(fmt.Sprintf("gave up after %d attempts: %v", out.GetAttempts(), sendErr), 1024)
	default:
		out.NextAttemptTime = timestamppb.New(done.Add(x.backoff(int(out.GetAttempts()))))
		out.LastError = clip(fmt.Sprintf("attempt %d: %v", out.GetAttempts(), sendErr), 1024)
	}
	x.write(ctx, key, user, out, rev)
}

// backoff is the wait after the attempts-th failure: Backoff doubled
// each time, at most MaxBackoff.
func (x *sender) backoff(attempts int) time.Duration {
	d := x.n.cfg.Backoff
	for range attempts - 1 {
		if d *= 2; d >= x.n.cfg.MaxBackoff {
			return x.n.cfg.MaxBackoff
		}
	}
	return d
}

func (x *sender) write(ctx context.Context, key, user string, dl *workloadv1.Delivery, rev int64) {
	if _, err := etcdstore.NewBatch(x.n.client).PutIf(x.n.deliveries.Key(key), dl, rev).Commit(ctx); err != nil {
		x.n.log.Warn("notification sender: record an attempt", "delivery", dl.GetName(), "err", err)
		return
	}
	x.settle(key, user, dl)
}

// withheld says why a delivery may not be sent now ("" when it may): its
// owner is gone (or is another user of the same id), or may no longer view
// what it is about, receive the subscription's events, or use its SMTP
// credential.
func (x *sender) withheld(ctx context.Context, s *workloadv1.Subscription, dl *workloadv1.Delivery) string {
	who, ok := x.n.guard.CallerOf(s.GetOwner())
	if !ok || who.UserUID != s.GetOwnerUid() || dl.GetOwnerUid() != s.GetOwnerUid() {
		return "withheld: the subscriber no longer exists"
	}
	nt := dl.GetNotification()
	o := occurrence{event: nt.GetEvent(), resource: nt.GetResource()}
	var attrs = workloadAttrs(nil)
	if project, id, ok := ParseWorkloadName(nt.GetResource()); ok {
		o.project = projectsPrefix + project
		if w, err := x.wls.Get(ctx, project+"/"+id); err == nil {
			attrs = workloadAttrs(w.Msg)
		}
	} else if strings.HasPrefix(nt.GetResource(), projectsPrefix) {
		o.project = nt.GetResource()
	}
	if !x.n.mayView(who, s, o, attrs) || x.n.mayReceive(who, s) != nil {
		return "withheld: the subscriber may no longer view what it is about"
	}
	return ""
}
