package workload

import (
	"context"
	"crypto/rand"
	"crypto/x509"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/timestamppb"

	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/apierr"
	"github.com/runwayhq/runway/pkg/auth"
	"github.com/runwayhq/runway/pkg/egress"
	"github.com/runwayhq/runway/pkg/etcdstore"
)

// NotificationConfig bounds the notifications: how many subscriptions and
// records each user holds, how fast they are sent, how often retried, and
// where they may go.
type NotificationConfig struct {
	// Egress is where webhooks and SMTP servers may be: public addresses,
	// and loopback or private ones only when allowed (`runway dev` allows
	// loopback).
	Egress egress.Policy
	// RootCAs check the certificates of https webhooks and of SMTP servers
	// over TLS (a private CA); the system's roots when nil.
	RootCAs *x509.CertPool
	// MaxSubscriptionsPerUser: 0 means 20.
	MaxSubscriptionsPerUser int
	// MaxDeliveriesKept per subscription (the oldest finished go first): 0
	// means 200.
	MaxDeliveriesKept int
	// MaxPendingPerUser: deliveries waiting to be sent, past which a new
	// one is recorded FAILED unsent: 0 means 100.
	MaxPendingPerUser int
	// RatePerMinute is how many notifications one user is sent a minute
	// (a burst of as many); the rest wait. 0 means 30.
	RatePerMinute int
	// MaxAttempts before a delivery is FAILED: 0 means 8.
	MaxAttempts int
	// Backoff is the wait after the first failed attempt, doubled after
	// each (at most MaxBackoff): 0 means 2 s and 5 min.
	Backoff, MaxBackoff time.Duration
	// Tick is how often the dispatcher looks at the due deliveries and the
	// conditions that last (pending, idle, over quota): 0 means 2 s.
	Tick time.Duration
	// Lookback: when the dispatcher starts, workload events this recent
	// are matched again (a delivery already recorded is not repeated): 0
	// means 10 min.
	Lookback time.Duration
}

func (c *NotificationConfig) defaults() {
	for _, d := range []struct {
		v   *int
		def int
	}{{&c.MaxSubscriptionsPerUser, 20}, {&c.MaxDeliveriesKept, 200}, {&c.MaxPendingPerUser, 100},
		{&c.RatePerMinute, 30}, {&c.MaxAttempts, 8}} {
		if *d.v <= 0 {
			*d.v = d.def
		}
	}
	for _, d := range []struct {
		v   *time.Duration
		def time.Duration
	}{{&c.Backoff, 2 * time.Second}, {&c.MaxBackoff, 5 * time.Minute}, {&c.Tick, 2 * time.Second}, {&c.Lookback, 10 * time.Minute}} {
		if *d.v <= 0 {
			*d.v = d.def
		}
	}
}

// Notifications implements workloadv1.NotificationServiceServer: each
// user's subscriptions (subscriptions/{user}/{id}) and delivery records
// (deliveries/{user}/{subscription}/{id}). The Dispatcher sends them.
type Notifications struct {
	workloadv1.UnimplementedNotificationServiceServer

	cfg        NotificationConfig
	client     *clientv3.Client
	guard      *auth.Guard
	subs       *etcdstore.Collection[*workloadv1.Subscription]
	deliveries *etcdstore.Collection[*workloadv1.Delivery]
	creds      *Credentials
	clock      Clock
	log        *slog.Logger
}

func newNotifications(cfg NotificationConfig, deps Deps, creds *Credentials) *Notifications {
	cfg.defaults()
	return &Notifications{cfg: cfg, client: deps.Client, guard: deps.Guard, creds: creds, clock: deps.Clock,
		log: deps.Logger.With("service", "notification"),
		subs: etcdstore.NewCollection(deps.Client, etcdstore.PrefixSubscriptions,
			func() *workloadv1.Subscription { return new(workloadv1.Subscription) }),
		deliveries: etcdstore.NewCollection(deps.Client, etcdstore.PrefixDeliveries,
			func() *workloadv1.Delivery { return new(workloadv1.Delivery) })}
}

const usersPrefix = "users/"

// owner is the user the caller acts as: a user, or a user application's
// creator. Others (services, managed applications) hold no subscriptions.
func owner(ctx context.Context) (string, error) {
	c, ok := auth.CallerFrom(ctx)
	switch {
	case !ok:
	case strings.HasPrefix(c.Creator, usersPrefix):
		return c.Creator, nil
	case strings.HasPrefix(c.Principal, usersPrefix):
		return c.Principal, nil
	}
	return "", apierr.PermissionDenied("workloads.view", "subscriptions").
		WithCause(fmt.Errorf("only users hold subscriptions"))
}

// ownParent checks that parent (`users/{user}` or `users/-`) is the caller
// and returns the caller's user.
func ownParent(ctx context.Context, parent string) (string, error) {
	user, err := owner(ctx)
	if err != nil {
		return "", err
	}
	if parent != "users/-" && parent != user {
		if !strings.HasPrefix(parent, usersPrefix) || strings.Count(parent, "/") != 1 {
			return "", apierr.InvalidField("parent", "must be users/{user} (the caller) or users/-")
		}
		return "", apierr.PermissionDenied("workloads.view", parent+"/subscriptions").
			WithCause(fmt.Errorf("a user sees only their own subscriptions"))
	}
	return user, nil
}

// subscriptionKey is the store id of `users/{u}/subscriptions/{s}` when it
// is the caller's; another user's is NotFound (its existence is not theirs
// to learn).
func subscriptionKey(ctx context.Context, name, field string) (string, error) {
	user, err := owner(ctx)
	if err != nil {
		return "", err
	}
	rest, ok := strings.CutPrefix(name, usersPrefix)
	u, id, ok2 := strings.Cut(rest, "/subscriptions/")
	if !ok || !ok2 || u == "" || strings.Contains(u, "/") || !validID(id) {
		return "", apierr.InvalidField(field, "must be users/{user}/subscriptions/{subscription}")
	}
	if usersPrefix+u != user {
		return "", apierr.NotFound(apierr.Subscription, name)
	}
	return u + "/" + id, nil
}

// CreateSubscription checks the subscription (events the caller may be
// told of, a channel whose host is allowed) and stores it, within the
// caller's cap.
func (n *Notifications) CreateSubscription(ctx context.Context, req *workloadv1.CreateSubscriptionRequest) (*workloadv1.Subscription, error) {
	user, err := ownParent(ctx, req.GetParent())
	if err != nil {
		return nil, err
	}
	id := req.GetSubscriptionId()
	if id == "" {
		id = "s-" + strings.ToLower(rand.Text()[:10])
	} else if !validID(id) {
		return nil, apierr.InvalidField("subscription_id", idRule)
	}
	in := req.GetSubscription()
	if in == nil {
		return nil, apierr.InvalidField("subscription", "is required")
	}
	if err := n.checkSubscription(ctx, in); err != nil {
		return nil, err
	}
	who, ok := n.guard.CallerOf(user)
	if !ok {
		return nil, apierr.PermissionDenied(viewWorkloads.String(), req.GetParent())
	}
	if err := n.mayReceive(who, in); err != nil {
		return nil, err
	}
	if err := n.checkExists(ctx, in); err != nil {
		return nil, err
	}
	uid := strings.TrimPrefix(user, usersPrefix)
	existing, _, err := n.subs.ListAll(ctx, uid+"/")
	if err != nil {
		return nil, storeError(err, apierr.Subscription, req.GetParent())
	}
	if len(existing) >= n.cfg.MaxSubscriptionsPerUser {
		return nil, apierr.ObjectLimit(user, "subscriptions", n.cfg.MaxSubscriptionsPerUser).With("project", "")
	}
	out := proto.Clone(in).(*workloadv1.Subscription)
	now := timestamppb.New(n.clock.Now())
	out.Name, out.Uid, out.Owner, out.OwnerUid = user+"/subscriptions/"+id, newUID(), user, who.UserUID
	out.CreateTime, out.UpdateTime, out.Etag = now, now, ""
	it, err := n.subs.Create(ctx, uid+"/"+id, out)
	if err != nil {
		return nil, storeError(err, apierr.Subscription, out.GetName())
	}
	return withEtag(it), nil
}

// GetSubscription returns one of the caller's subscriptions.
func (n *Notifications) GetSubscription(ctx context.Context, req *workloadv1.GetSubscriptionRequest) (*workloadv1.Subscription, error) {
	key, err := subscriptionKey(ctx, req.GetName(), "name")
	if err != nil {
		return nil, err
	}
	it, err := n.subs.Get(ctx, key)
	if err != nil {
		return nil, storeError(err, apierr.Subscription, req.GetName())
	}
	return withEtag(it), nil
}

// ListSubscriptions returns all of the caller's subscriptions (capped, so
// one page).
func (n *Notifications) ListSubscriptions(ctx context.Context, req *workloadv1.ListSubscriptionsRequest) (*workloadv1.ListSubscriptionsResponse, error) {
	user, err := ownParent(ctx, req.GetParent())
	if err != nil {
		return nil, err
	}
	items, _, err := n.subs.ListAll(ctx, strings.TrimPrefix(user, usersPrefix)+"/")
	if err != nil {
		return nil, storeError(err, apierr.Subscription, req.GetParent())
	}
	out := &workloadv1.ListSubscriptionsResponse{}
	for _, it := range items {
		out.Subscriptions = append(out.Subscriptions, withEtag(it))
	}
	return out, nil
}

// DeleteSubscription deletes a subscription and then its records (a
// record left by a failure to delete them is no one's: the dispatcher
// sends nothing without its subscription).
func (n *Notifications) DeleteSubscription(ctx context.Context, req *workloadv1.DeleteSubscriptionRequest) (*emptypb.Empty, error) {
	key, err := subscriptionKey(ctx, req.GetName(), "name")
	if err != nil {
		return nil, err
	}
	if _, err := n.subs.Delete(ctx, key, req.GetEtag()); err != nil {
		return nil, storeError(err, apierr.Subscription, req.GetName())
	}
	if _, err := n.client.Delete(ctx, etcdstore.PrefixDeliveries+key+"/", clientv3.WithPrefix()); err != nil {
		n.log.Warn("delete a subscription's deliveries", "subscription", req.GetName(), "err", err)
	}
	return &emptypb.Empty{}, nil
}

// ListDeliveries returns a subscription's records, newest first.
func (n *Notifications) ListDeliveries(ctx context.Context, req *workloadv1.ListDeliveriesRequest) (*workloadv1.ListDeliveriesResponse, error) {
	key, err := subscriptionKey(ctx, req.GetParent(), "parent")
	if err != nil {
		return nil, err
	}
	if _, err := n.subs.Get(ctx, key); err != nil {
		return nil, storeError(err, apierr.Subscription, req.GetParent())
	}
	items, _, err := n.deliveries.ListAll(ctx, key+"/")
	if err != nil {
		return nil, storeError(err, apierr.Subscription, req.GetParent())
	}
	out := &workloadv1.ListDeliveriesResponse{}
	for _, it := range items {
		out.Deliveries = append(out.Deliveries, it.Msg)
	}
	slices.SortFunc(out.Deliveries, func(a, b *workloadv1.Delivery) int {
		if c := b.GetCreateTime().AsTime().Compare(a.GetCreateTime().AsTime()); c != 0 {
			return c
		}
		return strings.Compare(b.GetName(), a.GetName())
	})
	return out, nil
}
