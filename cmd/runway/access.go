package main

import (
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/timestamppb"

	identityv1 "github.com/runwayhq/runway/gen/go/runway/identity/v1"
	"github.com/runwayhq/runway/pkg/sdk"
)

func timeOrDash(t *timestamppb.Timestamp) string {
	if t == nil {
		return "-"
	}
	return formatTime(t.AsTime())
}

// subjectText and scopeText write a rule's parts as `access-rule create`
// takes them.
func subjectText(s *identityv1.Subject) string {
	kind := strings.ToLower(strings.TrimPrefix(s.GetKind().String(), "SUBJECT_KIND_"))
	return kind + ":" + sdk.ID(s.GetName())
}

func scopeText(s *identityv1.Scope) string {
	if s.GetKind() == identityv1.ScopeKind_SCOPE_KIND_ACCOUNT {
		return "account"
	}
	return strings.ToLower(strings.TrimPrefix(s.GetKind().String(), "SCOPE_KIND_")) + ":" + sdk.ID(s.GetName())
}

func ruleTable(w io.Writer, rules []*identityv1.AccessRule) error {
	t := newTable(w, "Rule", "Subject", "Role", "Scope", "Created By")
	for _, r := range rules {
		t.row(sdk.ID(r.GetName()), subjectText(r.GetSubject()), sdk.ID(r.GetRole()), scopeText(r.GetScope()), orDefault(r.GetCreator(), "-"))
	}
	return t.flush()
}

// parseSubject reads user:EMAIL|ID, group:NAME or application:NAME; a user
// given by email is looked up.
func parseSubject(ctx context.Context, c *sdk.Client, s string) (*identityv1.Subject, error) {
	kind, name, ok := strings.Cut(s, ":")
	if !ok || name == "" {
		return nil, usageError("--subject must be user:EMAIL, group:NAME or application:NAME")
	}
	switch kind {
	case "user":
		if !strings.Contains(name, "@") {
			return &identityv1.Subject{Kind: identityv1.SubjectKind_SUBJECT_KIND_USER, Name: sdk.UserName(name)}, nil
		}
		us, err := sdk.Collect(c.Users(ctx, "email = "+strconv.Quote(strings.ToLower(name))))
		if err != nil {
			return nil, err
		}
		if len(us) != 1 {
			return nil, &exitError{code: 1, msg: fmt.Sprintf("no user has the email %q [USER_NOT_FOUND]", name)}
		}
		return &identityv1.Subject{Kind: identityv1.SubjectKind_SUBJECT_KIND_USER, Name: us[0].GetName()}, nil
	case "group":
		return &identityv1.Subject{Kind: identityv1.SubjectKind_SUBJECT_KIND_GROUP, Name: name}, nil
	case "application":
		return &identityv1.Subject{Kind: identityv1.SubjectKind_SUBJECT_KIND_APPLICATION, Name: sdk.ApplicationName(name)}, nil
	}
	return nil, usageError("--subject must be user:EMAIL, group:NAME or application:NAME")
}

func parseScope(s string) (*identityv1.Scope, error) {
	if s == "account" {
		return &identityv1.Scope{Kind: identityv1.ScopeKind_SCOPE_KIND_ACCOUNT}, nil
	}
	kind, name, _ := strings.Cut(s, ":")
	switch {
	case kind == "department" && name != "":
		return &identityv1.Scope{Kind: identityv1.ScopeKind_SCOPE_KIND_DEPARTMENT, Name: sdk.DepartmentName(name)}, nil
	case kind == "project" && name != "":
		return &identityv1.Scope{Kind: identityv1.ScopeKind_SCOPE_KIND_PROJECT, Name: sdk.ProjectName(name)}, nil
	}
	return nil, usageError("--scope must be account, department:NAME or project:NAME")
}

func accessRuleCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "access-rule", Aliases: []string{"access-rules"},
		Short: "Access rules: <subject> is <role> in <scope>; created and deleted, never edited"}
	var subject, role, scope string
	create := &cobra.Command{
		Use:   "create --subject user:EMAIL|group:NAME|application:NAME --role ROLE --scope account|department:NAME|project:NAME",
		Short: "Grant a role to a user, group or application in a scope",
		Example: `  runway access-rule create --subject user:alice@example.com --role l1-researcher --scope project:team-a
  runway access-rule create --subject group:ml-team --role viewer --scope department:research`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			sc, err := parseScope(scope)
			if err != nil {
				return err
			}
			return withClient(cmd, func(ctx context.Context, c *sdk.Client) error {
				sub, err := parseSubject(ctx, c, subject)
				if err != nil {
					return err
				}
				r, err := c.IdentityService.CreateAccessRule(ctx, &identityv1.CreateAccessRuleRequest{AccessRule: &identityv1.AccessRule{
					Subject: sub, Role: sdk.RoleName(strings.TrimPrefix(role, "roles/")), Scope: sc}})
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "access rule %q created: %s is %s in %s\n", sdk.ID(r.GetName()),
					subjectText(r.GetSubject()), sdk.ID(r.GetRole()), scopeText(r.GetScope()))
				return nil
			})
		},
	}
	create.Flags().StringVar(&subject, "subject", "", "user:EMAIL (or user:ID), group:NAME or application:NAME (required)")
	create.Flags().StringVar(&role, "role", "", "the role, see `runway role list` (required)")
	create.Flags().StringVar(&scope, "scope", "", "account, department:NAME or project:NAME (required)")
	for _, f := range []string{"subject", "role", "scope"} {
		_ = create.MarkFlagRequired(f)
	}
	var output string
	var watch bool
	list := &cobra.Command{
		Use:     "list",
		Short:   "List the access rules you may see",
		Example: "  runway access-rule list",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return listLoop(cmd, output, watch, func(ctx context.Context, c *sdk.Client, w io.Writer) error {
				rs, err := sdk.Collect(c.AccessRules(ctx, ""))
				if err != nil {
					return err
				}
				if output != formatTable {
					return printMessages(w, output, true, rs...)
				}
				return ruleTable(w, rs)
			})
		},
	}
	outputFlag(list, &output)
	watchFlag(list, &watch)
	del := deleteCommand("access rule", "Delete an access rule",
		func(ctx context.Context, c *sdk.Client, id string) error {
			_, err := c.IdentityService.DeleteAccessRule(ctx, &identityv1.DeleteAccessRuleRequest{Name: sdk.AccessRuleName(id)})
			return err
		})
	del.Example = "  runway access-rule delete r-1a2b3c4d5e6f7a8b"
	cmd.AddCommand(create, list, del)
	return cmd
}

// roleCommand prints the permission table, one row per role and entity.
func roleCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "role", Aliases: []string{"roles"}, Short: "The built-in roles and what they permit"}
	var output string
	list := &cobra.Command{
		Use:     "list",
		Short:   "Print the permission table: each role's view, create, edit and delete per entity",
		Example: "  runway role list\n  runway role list -o yaml",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFormat(output); err != nil {
				return err
			}
			return withClient(cmd, func(ctx context.Context, c *sdk.Client) error {
				r, err := c.IdentityService.ListRoles(ctx, &identityv1.ListRolesRequest{})
				if err != nil {
					return err
				}
				w := cmd.OutOrStdout()
				if output != formatTable {
					return printMessages(w, output, true, r.GetRoles()...)
				}
				t := newTable(w, "Role", "Scopes", "Entity", "View", "Create", "Edit", "Delete")
				for _, role := range r.GetRoles() {
					var scopes []string
					for _, k := range role.GetAllowedScopes() {
						scopes = append(scopes, strings.ToLower(strings.TrimPrefix(k.String(), "SCOPE_KIND_")))
					}
					for _, e := range entities(role) {
						cells := []string{sdk.ID(role.GetName()), strings.Join(scopes, ","), e}
						for _, act := range []string{"view", "create", "edit", "delete"} {
							p := e + "." + act
							switch {
							case slices.Contains(role.GetPermissions(), p):
								cells = append(cells, "yes")
							case slices.Contains(role.GetOwnPermissions(), p):
								cells = append(cells, "own")
							case slices.Contains(role.GetInferencePermissions(), p):
								cells = append(cells, "inference")
							default:
								cells = append(cells, "-")
							}
						}
						t.row(cells...)
					}
				}
				return t.flush()
			})
		},
	}
	outputFlag(list, &output)
	cmd.AddCommand(list)
	return cmd
}

// entities are the entities a role grants anything on, in the order the
// API lists its permissions.
func entities(r *identityv1.Role) []string {
	var out []string
	for _, ps := range [][]string{r.GetPermissions(), r.GetOwnPermissions(), r.GetInferencePermissions()} {
		for _, p := range ps {
			e, _, _ := strings.Cut(p, ".")
			if !slices.Contains(out, e) {
				out = append(out, e)
			}
		}
	}
	slices.Sort(out)
	return out
}

const formatCSV = "csv"

func auditCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "audit", Short: "The audit log of every change and sign-in"}
	var since time.Duration
	var output, principal string
	list := &cobra.Command{
		Use:   "list [--since 24h] [--principal users/ID] [-o table|csv|json|yaml]",
		Short: "List audit events, newest first",
		Example: `  runway audit list --since 24h
  runway audit list --since 1h -o csv > audit.csv`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != formatCSV {
				if err := checkFormat(output); err != nil {
					return usageError("unknown output format %q (want table, csv, json or yaml)", output)
				}
			}
			filter := `create_time >= "` + time.Now().Add(-since).UTC().Format(time.RFC3339) + `"`
			if principal != "" {
				filter += " AND principal = " + strconv.Quote(principal)
			}
			return withClient(cmd, func(ctx context.Context, c *sdk.Client) error {
				evs, err := sdk.Collect(c.AuditEvents(ctx, filter))
				if err != nil {
					return err
				}
				w := cmd.OutOrStdout()
				switch output {
				case formatJSON, formatYAML:
					return printMessages(w, output, true, evs...)
				case formatCSV:
					cw := csv.NewWriter(w)
					_ = cw.Write([]string{"time", "principal", "method", "resource", "result", "reason", "source", "request_id"})
					for _, e := range evs {
						_ = cw.Write([]string{e.GetCreateTime().AsTime().UTC().Format(time.RFC3339Nano), e.GetPrincipal(),
							e.GetMethod(), e.GetResource(), codes.Code(e.GetStatusCode()).String(), e.GetErrorReason(),
							e.GetPeerAddress(), e.GetRequestId()})
					}
					cw.Flush()
					return cw.Error()
				}
				t := newTable(w, "Time", "Principal", "Action", "Resource", "Result", "Source")
				for _, e := range evs {
					result := codes.Code(e.GetStatusCode()).String()
					if e.GetErrorReason() != "" {
						result += " " + e.GetErrorReason()
					}
					_, method, _ := strings.Cut(strings.TrimPrefix(e.GetMethod(), "/runway."), "/")
					t.row(formatTime(e.GetCreateTime().AsTime()), orDefault(e.GetPrincipal(), "-"), method,
						orDefault(e.GetResource(), "-"), result, e.GetPeerAddress())
				}
				return t.flush()
			})
		},
	}
	list.Flags().DurationVar(&since, "since", 24*time.Hour, "how far back")
	list.Flags().StringVar(&principal, "principal", "", "only this principal's calls, users/ID or applications/NAME")
	list.Flags().StringVarP(&output, "output", "o", formatTable, "output format: table, csv, json or yaml")
	cmd.AddCommand(list)
	return cmd
}
