package sdk

import (
	"context"
	"iter"

	identityv1 "github.com/runwayhq/runway/gen/go/runway/identity/v1"
)

// Resource names of the identity service.
func UserName(user string) string               { return "users/" + user }
func ApplicationName(application string) string { return "applications/" + application }
func AccessRuleName(rule string) string         { return "accessRules/" + rule }
func RoleName(role string) string               { return "roles/" + role }

// Users walks the users matching filter (ListUsersRequest.filter; "" for
// all), by name.
func (c *Client) Users(ctx context.Context, filter string) iter.Seq2[*identityv1.User, error] {
	return All(ctx, func(ctx context.Context, token string) (Page[*identityv1.User], error) {
		r, err := c.IdentityService.ListUsers(ctx, &identityv1.ListUsersRequest{PageToken: token, PageSize: 1000, Filter: filter})
		return Page[*identityv1.User]{Items: r.GetUsers(), Next: r.GetNextPageToken()}, err
	})
}

// Applications walks the applications the caller may see, by name.
func (c *Client) Applications(ctx context.Context) iter.Seq2[*identityv1.Application, error] {
	return All(ctx, func(ctx context.Context, token string) (Page[*identityv1.Application], error) {
		r, err := c.IdentityService.ListApplications(ctx, &identityv1.ListApplicationsRequest{PageToken: token, PageSize: 1000})
		return Page[*identityv1.Application]{Items: r.GetApplications(), Next: r.GetNextPageToken()}, err
	})
}

// AccessRules walks the access rules the caller may see matching filter
// (ListAccessRulesRequest.filter), by name.
func (c *Client) AccessRules(ctx context.Context, filter string) iter.Seq2[*identityv1.AccessRule, error] {
	return All(ctx, func(ctx context.Context, token string) (Page[*identityv1.AccessRule], error) {
		r, err := c.IdentityService.ListAccessRules(ctx, &identityv1.ListAccessRulesRequest{PageToken: token, PageSize: 1000, Filter: filter})
		return Page[*identityv1.AccessRule]{Items: r.GetAccessRules(), Next: r.GetNextPageToken()}, err
	})
}

// AuditEvents walks the audit events matching filter
// (ListAuditEventsRequest.filter), newest first.
func (c *Client) AuditEvents(ctx context.Context, filter string) iter.Seq2[*identityv1.AuditEvent, error] {
	return All(ctx, func(ctx context.Context, token string) (Page[*identityv1.AuditEvent], error) {
		r, err := c.IdentityService.ListAuditEvents(ctx, &identityv1.ListAuditEventsRequest{PageToken: token, PageSize: 1000, Filter: filter})
		return Page[*identityv1.AuditEvent]{Items: r.GetAuditEvents(), Next: r.GetNextPageToken()}, err
	})
}
