package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	identityv1 "github.com/runwayhq/runway/gen/go/runway/identity/v1"
	"github.com/runwayhq/runway/pkg/sdk"
)

func userCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "user", Aliases: []string{"users"}, Short: "Local users: create, list, delete, reset passwords"}
	var email, display string
	var groups []string
	create := &cobra.Command{
		Use:     "create ID --email EMAIL [--group G]...",
		Short:   "Create a user with a temporary password, printed once",
		Example: "  runway user create alice --email alice@example.com --group ml-team",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withClient(cmd, func(ctx context.Context, c *sdk.Client) error {
				u, err := c.IdentityService.CreateUser(ctx, &identityv1.CreateUserRequest{UserId: args[0],
					User: &identityv1.User{Email: email, DisplayName: display, Groups: groups}})
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "user %q created; temporary password (shown once, to change at the first sign-in): %s\n",
					args[0], u.GetTemporaryPassword())
				return nil
			})
		},
	}
	create.Flags().StringVar(&email, "email", "", "the user's email (required)")
	create.Flags().StringVar(&display, "display-name", "", "the name shown to people")
	create.Flags().StringSliceVar(&groups, "group", nil, "a group the user is in (repeat)")
	_ = create.MarkFlagRequired("email")

	var output string
	var watch bool
	list := &cobra.Command{
		Use:     "list",
		Short:   "List users",
		Example: "  runway user list",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return listLoop(cmd, output, watch, func(ctx context.Context, c *sdk.Client, w io.Writer) error {
				us, err := sdk.Collect(c.Users(ctx, ""))
				if err != nil {
					return err
				}
				if output != formatTable {
					return printMessages(w, output, true, us...)
				}
				t := newTable(w, "User", "Email", "Groups", "Source", "Last Sign-in")
				for _, u := range us {
					src := "local"
					if u.GetIdentityProvider() != "" {
						src = "sso"
					}
					t.row(sdk.ID(u.GetName()), u.GetEmail(), orDefault(strings.Join(u.GetGroups(), ","), "-"), src, timeOrDash(u.GetLastLoginTime()))
				}
				return t.flush()
			})
		},
	}
	outputFlag(list, &output)
	watchFlag(list, &watch)

	del := deleteCommand("user", "Delete a user and its access rules",
		func(ctx context.Context, c *sdk.Client, id string) error {
			_, err := c.IdentityService.DeleteUser(ctx, &identityv1.DeleteUserRequest{Name: sdk.UserName(id)})
			return err
		})
	reset := &cobra.Command{
		Use:     "reset-password ID",
		Short:   "Give a user a new temporary password, printed once",
		Example: "  runway user reset-password alice",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withClient(cmd, func(ctx context.Context, c *sdk.Client) error {
				u, err := c.IdentityService.ResetUserPassword(ctx, &identityv1.ResetUserPasswordRequest{Name: sdk.UserName(args[0])})
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "temporary password of %q (shown once): %s\n", args[0], u.GetTemporaryPassword())
				return nil
			})
		},
	}
	cmd.AddCommand(create, list, del, reset)
	return cmd
}

// applicationKind is one of the two kinds of applications, as the CLI names
// them apart.
type applicationKind struct {
	use     string
	aliases []string
	short   string
	kind    identityv1.ApplicationKind
}

var (
	userApplications = applicationKind{"application", []string{"applications", "app"},
		"Your user applications: client credentials for your scripts, acting with your access (at most 20)",
		identityv1.ApplicationKind_APPLICATION_KIND_USER}
	managedApplications = applicationKind{"managed-application", []string{"managed-applications"},
		"Applications managed under Access: client credentials holding only the access rules granted to them",
		identityv1.ApplicationKind_APPLICATION_KIND_MANAGED}
)

func applicationCommand(k applicationKind) *cobra.Command {
	cmd := &cobra.Command{Use: k.use, Aliases: k.aliases, Short: k.short}
	printSecret := func(w io.Writer, a *identityv1.Application) {
		fmt.Fprintf(w, "application %q\nclient id:     %s\nclient secret: %s\n(the secret is shown only now)\n",
			sdk.ID(a.GetName()), a.GetClientId(), a.GetClientSecret())
	}
	create := &cobra.Command{
		Use:     "create NAME",
		Short:   "Create an application; prints its client id and secret once",
		Example: "  runway " + k.use + " create ci",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withClient(cmd, func(ctx context.Context, c *sdk.Client) error {
				a, err := c.IdentityService.CreateApplication(ctx, &identityv1.CreateApplicationRequest{ApplicationId: args[0],
					Application: &identityv1.Application{Kind: k.kind}})
				if err != nil {
					return err
				}
				printSecret(cmd.OutOrStdout(), a)
				return nil
			})
		},
	}
	var output string
	var watch bool
	list := &cobra.Command{
		Use:     "list",
		Short:   "List applications (without their secrets)",
		Example: "  runway " + k.use + " list",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return listLoop(cmd, output, watch, func(ctx context.Context, c *sdk.Client, w io.Writer) error {
				all, err := sdk.Collect(c.Applications(ctx))
				if err != nil {
					return err
				}
				var as []*identityv1.Application
				for _, a := range all {
					if a.GetKind() == k.kind || k.kind == identityv1.ApplicationKind_APPLICATION_KIND_USER &&
						a.GetKind() == identityv1.ApplicationKind_APPLICATION_KIND_UNSPECIFIED {
						as = append(as, a)
					}
				}
				if output != formatTable {
					return printMessages(w, output, true, as...)
				}
				t := newTable(w, "Application", "Client ID", "Creator", "Secret Created", "Last Sign-in")
				for _, a := range as {
					t.row(sdk.ID(a.GetName()), a.GetClientId(), a.GetCreator(), timeOrDash(a.GetSecretCreateTime()), timeOrDash(a.GetLastLoginTime()))
				}
				return t.flush()
			})
		},
	}
	outputFlag(list, &output)
	watchFlag(list, &watch)
	del := deleteCommand(k.use, "Delete an application; its tokens stop working",
		func(ctx context.Context, c *sdk.Client, id string) error {
			_, err := c.IdentityService.DeleteApplication(ctx, &identityv1.DeleteApplicationRequest{Name: sdk.ApplicationName(id)})
			return err
		})
	regen := &cobra.Command{
		Use:     "regenerate-secret NAME",
		Short:   "Replace an application's secret; prints the new one once",
		Example: "  runway " + k.use + " regenerate-secret ci",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withClient(cmd, func(ctx context.Context, c *sdk.Client) error {
				a, err := c.IdentityService.RegenerateApplicationSecret(ctx,
					&identityv1.RegenerateApplicationSecretRequest{Name: sdk.ApplicationName(args[0])})
				if err != nil {
					return err
				}
				printSecret(cmd.OutOrStdout(), a)
				return nil
			})
		},
	}
	cmd.AddCommand(create, list, del, regen)
	return cmd
}
