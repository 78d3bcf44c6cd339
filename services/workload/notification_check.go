package workload

import (
	"context"
	"fmt"
	"net"
	"net/mail"
	"net/url"
	"strings"
	"time"

	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/apierr"
	"github.com/runwayhq/runway/pkg/auth"
)

// Bounds of a subscription's fields.
const (
	maxSubscriptionEvents = 10
	maxWebhookURLBytes    = 2048
	minThreshold          = time.Minute
	maxThreshold          = 30 * 24 * time.Hour
)

// checkSubscription lists what is wrong with a subscription to create; the
// channel's host is resolved and must be on an allowed address.
func (n *Notifications) checkSubscription(ctx context.Context, s *workloadv1.Subscription) error {
	var v violations
	events := s.GetEvents()
	if len(events) == 0 || len(events) > maxSubscriptionEvents {
		v.add("subscription.events", fmt.Sprintf("must name 1 to %d events", maxSubscriptionEvents))
	}
	seen := map[workloadv1.NotificationEvent]bool{}
	for i, e := range events {
		if _, ok := workloadv1.NotificationEvent_name[int32(e)]; !ok || e == workloadv1.NotificationEvent_NOTIFICATION_EVENT_UNSPECIFIED || seen[e] {
			v.add(fmt.Sprintf("subscription.events[%d]", i), "must be a known event, named once")
		}
		seen[e] = true
	}
	checkThreshold := func(field string, d interface{ AsDuration() time.Duration }, needed bool) {
		switch set := d != nil && d.AsDuration() != 0; {
		case needed && !set:
			v.add(field, "is required for its event: 1m to 30 days")
		case set && (d.AsDuration() < minThreshold || d.AsDuration() > maxThreshold):
			v.add(field, "must be 1m to 30 days")
		}
	}
	checkThreshold("subscription.pending_threshold", s.GetPendingThreshold(), seen[workloadv1.NotificationEvent_NOTIFICATION_EVENT_WORKLOAD_PENDING_TOO_LONG])
	checkThreshold("subscription.idle_threshold", s.GetIdleThreshold(), seen[workloadv1.NotificationEvent_NOTIFICATION_EVENT_WORKLOAD_IDLE_GPUS])
	if p := s.GetOverQuotaThresholdPercent(); p < 0 || p > 1000 {
		v.add("subscription.over_quota_threshold_percent", "must be 0 to 1000")
	}
	if p := s.GetProject(); p != "" {
		if _, ok := parseParent(p, false); !ok {
			v.add("subscription.project", "must be projects/{project}")
		}
	}
	switch ch := s.GetChannel().(type) {
	case *workloadv1.Subscription_Webhook:
		n.checkWebhook(ctx, &v, ch.Webhook)
	case *workloadv1.Subscription_Email:
		n.checkEmail(ctx, &v, ch.Email)
	default:
		v.add("subscription.channel", "is required: webhook or email")
	}
	return v.err()
}

// checkExists: the project and the credential a subscription names exist
// (asked after mayReceive, so that only who may see them learns it).
func (n *Notifications) checkExists(ctx context.Context, s *workloadv1.Subscription) error {
	if p := s.GetProject(); p != "" {
		if err := n.creds.g.checkScopeExists(ctx, p, "subscription.project"); err != nil {
			return err
		}
	}
	if c := s.GetEmail().GetCredential(); c != "" {
		scope, id, _ := credentialAsset.parse(c, "subscription.email.credential")
		if _, err := n.creds.g.creds.Get(ctx, storeKey(scope, id)); err != nil {
			return storeError(err, apierr.Credential, c)
		}
	}
	return nil
}

// webhookHost is a webhook URL's host:port, or why the URL is not one.
func webhookHost(raw string) (host string, err error) {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return "", fmt.Errorf("is not a URL: %v", err)
	case u.Scheme != "http" && u.Scheme != "https":
		return "", fmt.Errorf("must be an http or https URL")
	case u.Hostname() == "":
		return "", fmt.Errorf("must name a host")
	case u.User != nil:
		return "", fmt.Errorf("must not hold a user or password (they would show in every listing)")
	}
	return u.Hostname(), nil
}

func (n *Notifications) checkWebhook(ctx context.Context, v *violations, w *workloadv1.WebhookChannel) {
	const field = "subscription.webhook.url"
	if len(w.GetUrl()) > maxWebhookURLBytes {
		v.add(field, fmt.Sprintf("must be at most %d bytes", maxWebhookURLBytes))
		return
	}
	host, err := webhookHost(w.GetUrl())
	if err != nil {
		v.add(field, err.Error())
		return
	}
	if err := n.cfg.Egress.CheckHost(ctx, host); err != nil {
		v.add(field, "is refused: "+err.Error())
	}
}

func (n *Notifications) checkEmail(ctx context.Context, v *violations, e *workloadv1.EmailChannel) {
	for field, addr := range map[string]string{"subscription.email.to": e.GetTo(), "subscription.email.from": e.GetFrom()} {
		if a, err := mail.ParseAddress(addr); err != nil || a.Name != "" || strings.ContainsAny(addr, "\r\n") {
			v.add(field, "must be one email address, such as ops@example.com")
		}
	}
	host, port, err := net.SplitHostPort(e.GetSmtpServer())
	if err != nil || host == "" || port == "" {
		v.add("subscription.email.smtp_server", "must be host:port, such as smtp.example.com:587")
	} else if err := n.cfg.Egress.CheckHost(ctx, host); err != nil {
		v.add("subscription.email.smtp_server", "is refused: "+err.Error())
	}
	if _, ok := workloadv1.SmtpTls_name[int32(e.GetTls())]; !ok {
		v.add("subscription.email.tls", "must be STARTTLS, IMPLICIT or NONE")
	}
	if c := e.GetCredential(); c != "" {
		if _, _, err := credentialAsset.parse(c, "subscription.email.credential"); err != nil {
			v.add("subscription.email.credential", "must be a credential's full name: credentials/{c}, departments/{d}/credentials/{c} or projects/{p}/credentials/{c}")
		}
		if e.GetTls() == workloadv1.SmtpTls_SMTP_TLS_NONE {
			v.add("subscription.email.credential", "is never sent without TLS: choose STARTTLS or IMPLICIT")
		}
	}
}

// allowed asks the guard whether who holds p on t; an Own grant counts
// (the caller may view its own workloads there).
func (n *Notifications) allowed(who auth.Caller, p auth.Permission, t auth.Target, at auth.Attrs) bool {
	ok, _ := n.guard.Allowed(who, p, t, func() (auth.Attrs, error) { return at, nil })
	return ok
}

var (
	viewWorkloads   = auth.Permission{Entity: auth.Workloads, Action: auth.View}
	editNodes       = auth.Permission{Entity: auth.Nodes, Action: auth.Edit}
	viewProjects    = auth.Permission{Entity: auth.Projects, Action: auth.View}
	viewDepartments = auth.Permission{Entity: auth.Departments, Action: auth.View}
	editPolicies    = auth.Permission{Entity: auth.Policies, Action: auth.Edit}
)

// eventPermission is what an event of the cluster needs of its receiver,
// on project (its project filter or "").
func (n *Notifications) eventPermission(e workloadv1.NotificationEvent, project string) (auth.Permission, auth.Target, bool) {
	account := auth.Target{Level: auth.AccountLevel, Resource: "cluster"}
	switch e {
	case workloadv1.NotificationEvent_NOTIFICATION_EVENT_NODE_LOST, workloadv1.NotificationEvent_NOTIFICATION_EVENT_GPU_UNHEALTHY:
		return editNodes, account, true
	case workloadv1.NotificationEvent_NOTIFICATION_EVENT_PROJECT_OVER_QUOTA:
		if project != "" {
			return viewProjects, n.guard.ProjectTarget(project, project), true
		}
		return viewProjects, account, true
	case workloadv1.NotificationEvent_NOTIFICATION_EVENT_DEPARTMENT_OVER_QUOTA:
		return viewDepartments, account, true
	}
	return auth.Permission{}, auth.Target{}, false
}

// credentialTarget is where a credential's values are administered.
func (n *Notifications) credentialTarget(name string) auth.Target {
	scope, _, _ := parseScoped(name, credentialsCollection)
	switch {
	case strings.HasPrefix(scope, projectsPrefix):
		return n.guard.ProjectTarget(scope, name)
	case strings.HasPrefix(scope, departmentsPrefix):
		return auth.Target{Level: auth.DepartmentLevel, Department: scope, Resource: name}
	}
	return auth.Target{Level: auth.AccountLevel, Resource: name}
}

// mayReceive checks that who may be told of every event of s: the project
// filter's workloads, the cluster's events, the SMTP credential's values.
// It runs at subscribe time and again before every delivery.
func (n *Notifications) mayReceive(who auth.Caller, s *workloadv1.Subscription) error {
	if who.Principal == "" {
		return apierr.PermissionDenied(viewWorkloads.String(), "subscriptions")
	}
	own := auth.Attrs{Creator: who.Principal, CreatorUID: who.UserUID}
	if p := s.GetProject(); p != "" && !n.allowed(who, viewWorkloads, n.guard.ProjectTarget(p, p), own) {
		return apierr.PermissionDenied(viewWorkloads.String(), p)
	}
	for _, e := range s.GetEvents() {
		if p, t, ok := n.eventPermission(e, s.GetProject()); ok && !n.allowed(who, p, t, auth.Attrs{}) {
			return apierr.PermissionDenied(p.String(), t.Resource)
		}
	}
	if c := s.GetEmail().GetCredential(); c != "" && !n.allowed(who, editPolicies, n.credentialTarget(c), auth.Attrs{}) {
		return apierr.PermissionDenied(editPolicies.String(), c)
	}
	return nil
}
