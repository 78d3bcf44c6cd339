package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	commonv1 "github.com/runwayhq/runway/gen/go/runway/common/v1"
	identityv1 "github.com/runwayhq/runway/gen/go/runway/identity/v1"
	"github.com/runwayhq/runway/pkg/sdk"
)

// The sign-in commands keep the token in the config file (sdk.SaveConfig),
// where every other command finds it.

func loginCommand() *cobra.Command {
	var user, clientID, issuer, ssoClientID string
	var secretStdin, sso bool
	cmd := &cobra.Command{
		Use:   "login [--user EMAIL] [--client-id ID --client-secret-stdin] [--sso --issuer URL --sso-client-id ID]",
		Short: "Sign in and keep the token in the config file",
		Long: `Sign in as a user (the password is read from standard input; a temporary
password asks for a new one on the next line) or as an application (the
client secret is read from standard input), or through single sign-on with
--sso: the OAuth device flow of the OpenID Connect provider at --issuer (the
one the server trusts, with Runway's --sso-client-id there) prints a code to
enter at the provider's page, waits for it, and signs in with the ID token.
The token and the server are saved in the config file (` + "`runway logout`" + `
removes the token).`,
		Example: `  runway login --user alice@example.com
  printf '%s\n' "$SECRET" | runway login --client-id 5b0c... --client-secret-stdin
  runway login --sso --issuer https://login.example.com --sso-client-id runway`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if n := btoi(user != "") + btoi(clientID != "") + btoi(sso); n != 1 {
				return usageError("give one of --user, --client-id or --sso")
			}
			if sso && (issuer == "" || ssoClientID == "") {
				return usageError("--sso needs --issuer and --sso-client-id")
			}
			if clientID != "" && !secretStdin {
				return usageError("--client-id needs --client-secret-stdin")
			}
			in := bufio.NewReader(cmd.InOrStdin())
			cfg := sdk.FromEnvironment()
			if s, _ := cmd.Flags().GetString("server"); s != "" {
				cfg.Server = s
			}
			cfg.Token = "" // sign-in needs none
			c, err := sdk.Dial(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			defer c.Close()
			ctx, cancel := context.WithTimeout(cmd.Context(), callTimeout)
			defer cancel()
			var r *identityv1.LoginResponse
			if sso {
				// A person signs in at the provider: no call timeout.
				idToken, err := deviceSignIn(cmd.Context(), issuer, ssoClientID, cmd.ErrOrStderr())
				if err != nil {
					return err
				}
				if r, err = c.IdentityService.Login(ctx, &identityv1.LoginRequest{Credentials: &identityv1.LoginRequest_Oidc{
					Oidc: &identityv1.OidcCredentials{IdToken: idToken}}}); err != nil {
					return err
				}
			} else if clientID != "" {
				secret, err := readLine(in)
				if err != nil {
					return err
				}
				r, err = c.IdentityService.Login(ctx, &identityv1.LoginRequest{Credentials: &identityv1.LoginRequest_ClientCredentials{
					ClientCredentials: &identityv1.ClientCredentials{ClientId: clientID, ClientSecret: secret}}})
				if err != nil {
					return err
				}
			} else {
				fmt.Fprint(cmd.ErrOrStderr(), "Password: ")
				password, err := readLine(in)
				if err != nil {
					return err
				}
				creds := &identityv1.PasswordCredentials{User: user, Password: password}
				login := func() (*identityv1.LoginResponse, error) {
					return c.IdentityService.Login(ctx, &identityv1.LoginRequest{
						Credentials: &identityv1.LoginRequest_Password{Password: creds}})
				}
				r, err = login()
				if sdk.Reason(err) == commonv1.ErrorReason_PASSWORD_CHANGE_REQUIRED.String() {
					fmt.Fprint(cmd.ErrOrStderr(), "\nThe password is temporary. New password (at least 12 characters): ")
					if creds.NewPassword, err = readLine(in); err != nil {
						return err
					}
					r, err = login()
				}
				if err != nil {
					return err
				}
				fmt.Fprintln(cmd.ErrOrStderr())
			}
			saved := sdk.SignedIn(cfg.Server, r)
			saved.CAFile, saved.Insecure = cfg.CAFile, cfg.Insecure
			if err := sdk.SaveConfig(saved); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "signed in as %s until %s\n", r.GetPrincipal(),
				r.GetExpireTime().AsTime().Local().Format("2006-01-02 15:04"))
			return nil
		},
	}
	cmd.Flags().StringVar(&user, "user", "", "the user: id or email")
	cmd.Flags().StringVar(&clientID, "client-id", "", "an application's client id")
	cmd.Flags().BoolVar(&secretStdin, "client-secret-stdin", false, "read the application's client secret from standard input")
	cmd.Flags().BoolVar(&sso, "sso", false, "sign in through the OpenID Connect provider (device flow)")
	cmd.Flags().StringVar(&issuer, "issuer", "", "with --sso: the provider's issuer URL")
	cmd.Flags().StringVar(&ssoClientID, "sso-client-id", "", "with --sso: Runway's client id at the provider")
	return cmd
}

// readLine reads one line of standard input without its line ending.
func readLine(r *bufio.Reader) (string, error) {
	s, err := r.ReadString('\n')
	if err != nil && (err != io.EOF || s == "") {
		return "", usageError("expected a line on standard input")
	}
	return strings.TrimRight(s, "\r\n"), nil
}

func logoutCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "logout",
		Short: "End the sign-in and forget its token",
		Long: `End the sign-in on the server (its access and refresh tokens stop working
everywhere) and forget the token kept in the config file. When the server
cannot end it, the token is forgotten here all the same and a warning says
that it stays valid until it expires.`,
		Example: "  runway logout",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := sdk.LoadConfig()
			if err != nil {
				return err
			}
			if cfg.Token != "" {
				err := withClient(cmd, func(ctx context.Context, c *sdk.Client) error {
					_, err := c.IdentityService.Logout(ctx, &identityv1.LogoutRequest{})
					return err
				})
				// A token already refused has nothing left to end.
				if err != nil && status.Code(err) != codes.Unauthenticated {
					fmt.Fprintf(cmd.ErrOrStderr(), "warning: the sign-in was not ended on the server (%s); its token stays valid until it expires\n", errorLine(err))
				}
			}
			cfg.Token, cfg.RefreshToken, cfg.Expiry = "", "", time.Time{}
			if err := sdk.SaveConfig(cfg); err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), "signed out")
			return nil
		},
	}
}

func whoamiCommand() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:     "whoami",
		Short:   "Show who the token belongs to and the access rules that apply",
		Example: "  runway whoami",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFormat(output); err != nil {
				return err
			}
			return withClient(cmd, func(ctx context.Context, c *sdk.Client) error {
				who, err := c.IdentityService.GetCaller(ctx, &identityv1.GetCallerRequest{})
				if err != nil {
					return err
				}
				w := cmd.OutOrStdout()
				if output != formatTable {
					return printMessages(w, output, false, who)
				}
				fmt.Fprintln(w, who.GetPrincipal())
				if len(who.GetGroups()) > 0 {
					fmt.Fprintf(w, "Groups: %s\n", strings.Join(who.GetGroups(), ", "))
				}
				return ruleTable(w, who.GetAccessRules())
			})
		},
	}
	outputFlag(cmd, &output)
	return cmd
}
