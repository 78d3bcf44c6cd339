package auth

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"time"

	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/apierr"
)

// Tokens of Runway's tool proxy. A browser cannot send the UI's API token
// to another origin, and the proxy must never take one from a cookie: the
// signed-in UI asks for a ticket (ToolService.CreateToolTicket, an API
// call), a one-time token bound to one workload's tool; the proxy trades it
// (ExchangeToolTicket, with the ticket as the bearer) for a tool session
// bound to that workload, which becomes its cookie. Both carry the caller's
// principal and session, so that the guard judges them as it judges the
// caller's API token (the user's credentials, the sign-in's session, the
// access rules on every call), and only the methods that list their type
// in Method.Tokens accept them: no other call is made with them.
const (
	ToolTicketToken  TokenType = "tool-ticket"
	ToolSessionToken TokenType = "tool-session"
)

// Their lifetimes: a ticket only bridges the UI's click to the proxy; a
// session is the cookie's life, after which the UI issues a new ticket.
const (
	ToolTicketTTL  = 30 * time.Second
	ToolSessionTTL = 10 * time.Minute
)

// Bound is what a tool ticket or session reaches.
type Bound struct {
	Workload string    // projects/{project}/workloads/{workload}
	Tool     string    // a ticket's tool; "" for a session
	ID       string    // a ticket's id: it is accepted once
	Type     TokenType // ToolTicketToken or ToolSessionToken
}

// IssueToolTicket signs a one-time ticket for c (an API caller) to one
// tool of workload.
func (g *Guard) IssueToolTicket(c Caller, workload, tool string) (string, time.Time, error) {
	if c.subject.Principal == "" || c.Bound.Type != "" {
		return "", time.Time{}, errors.New("a tool ticket is issued to an API caller only")
	}
	id := make([]byte, 16)
	if _, err := rand.Read(id); err != nil {
		return "", time.Time{}, err
	}
	bound := claims{Res: workload, Tool: tool}
	bound.ID = base64.RawURLEncoding.EncodeToString(id)
	return g.issue(c.subject, ToolTicketToken, ToolTicketTTL, bound)
}

// IssueToolSession signs the tool session a ticket's caller c trades it
// for: bound to the ticket's workload, never longer than the sign-in's
// session lasts (the guard checks it on every call).
func (g *Guard) IssueToolSession(c Caller) (string, time.Time, error) {
	if c.Bound.Type != ToolTicketToken {
		return "", time.Time{}, errors.New("a tool session is issued for a tool ticket only")
	}
	return g.issue(c.subject, ToolSessionToken, ToolSessionTTL, claims{Res: c.Bound.Workload})
}

// Authenticate is the caller of the call's API token: for a public method
// that authorises its callers itself (ToolService.ResolveEndpoint, whose
// access is the inference workload's).
func (g *Guard) Authenticate(ctx context.Context) (Caller, error) {
	return g.authenticate(ctx, Method{})
}

// MayViewWorkload reports whether c may view w.
func (g *Guard) MayViewWorkload(c Caller, w *workloadv1.Workload) (bool, error) {
	return g.Allowed(c, perm(Workloads, View), g.ProjectTarget(w.GetProject(), w.GetName()),
		func() (Attrs, error) { return workloadAttrs(w), nil })
}

// checkPublicServing: a public inference endpoint (no token at all) is the
// account administrator's to open, whoever may create the workload.
func checkPublicServing(_ context.Context, g *Guard, c Caller, r any) error {
	if r.(*workloadv1.CreateWorkloadRequest).GetWorkload().GetSpec().GetServing().GetAccess() != workloadv1.ServingAccess_SERVING_ACCESS_PUBLIC {
		return nil
	}
	p := perm(AccessRules, Create)
	ok, err := g.Allowed(c, p, account(""), func() (Attrs, error) { return Attrs{}, nil })
	if err != nil {
		return err
	}
	if !ok {
		return apierr.PermissionDenied(p.String(), "workload.spec.serving.access=public")
	}
	return nil
}
