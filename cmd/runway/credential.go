package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/sdk"
)

// credentialTypes are the CLI's names of the credential types.
var credentialTypes = map[string]workloadv1.CredentialType{
	"generic":  workloadv1.CredentialType_CREDENTIAL_TYPE_GENERIC,
	"registry": workloadv1.CredentialType_CREDENTIAL_TYPE_REGISTRY,
	"s3-keys":  workloadv1.CredentialType_CREDENTIAL_TYPE_S3_KEYS,
	"git":      workloadv1.CredentialType_CREDENTIAL_TYPE_GIT,
}

func credentialTypeName(t workloadv1.CredentialType) string {
	for name, v := range credentialTypes {
		if v == t {
			return name
		}
	}
	return "-"
}

// credentialFlags are the sources of a credential's values: files,
// standard input ("-") or a prompt; never a flag's value, which a shell
// keeps in its history.
type credentialFlags struct {
	s                               scopeFlags
	desc, server, user, accessKey   string
	envFile, secretFile, sshKeyFile string
	files                           []string
}

// credentialCommand manages credentials: write-only secrets given to
// workloads as environment variables or files.
func credentialCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "credential", Aliases: []string{"credentials"},
		Short: "Credentials: secrets workloads use, written once and never shown again"}
	var f credentialFlags
	create := &cobra.Command{
		Use:   "create TYPE NAME [-p PROJECT | --department D] ...",
		Short: "Create a credential (generic, registry, s3-keys or git)",
		Long: `Create a credential. Its values are read from files, standard input (-) or a
prompt, never from a flag's value (shells keep their history), and no command
shows them again: list and describe show the keys only.

  generic   KEY=VALUE lines from --from-env-file FILE (- for standard input),
            and/or --from-file KEY=PATH (the file's content is the value)
  registry  --registry-server HOST[:PORT] --username USER; the password from
            --password-file FILE, standard input or a prompt
  s3-keys   --access-key-id ID; the secret access key from --secret-file FILE,
            standard input or a prompt
  git       a token from --token-file FILE, standard input or a prompt, or
            --ssh-key-file FILE; --username optional

Workloads use a generic credential with submit --credential NAME (each key an
environment variable) or --credential NAME:/path (each key a file under
/path), and any credential's key with -e VAR=credential:NAME/KEY.`,
		Example: `  runway credential create generic wandb -p team-a --from-env-file wandb.env
  printf 'WANDB_API_KEY=%s\n' "$KEY" | runway credential create generic wandb -p team-a --from-env-file -
  runway credential create registry ghcr --registry-server ghcr.io --username me --password-file token.txt
  runway credential create git deploy --department research --ssh-key-file id_ed25519`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			scope, err := f.s.scope()
			if err != nil {
				return err
			}
			cred, err := f.credential(cmd, args[0])
			if err != nil {
				return err
			}
			return withClient(cmd, func(ctx context.Context, c *sdk.Client) error {
				got, err := c.CreateCredential(ctx, scope, args[1], cred)
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "credential %q created with keys %s\n", got.GetName(), strings.Join(got.GetKeys(), ", "))
				return nil
			})
		},
	}
	f.s.add(create)
	fl := create.Flags()
	fl.StringVar(&f.desc, "description", "", "free text for people")
	fl.StringVar(&f.envFile, "from-env-file", "", "generic: KEY=VALUE lines from FILE (- for standard input); # comments and blank lines skipped")
	fl.StringArrayVar(&f.files, "from-file", nil, "generic: KEY=PATH, the value is PATH's content (repeat)")
	fl.StringVar(&f.server, "registry-server", "", "registry: the registry's HOST[:PORT]")
	fl.StringVar(&f.user, "username", "", "registry, git: the user name")
	fl.StringVar(&f.accessKey, "access-key-id", "", "s3-keys: the access key id")
	fl.StringVar(&f.secretFile, "password-file", "", "registry: the password from FILE (- for standard input; default: a prompt, or standard input when it is not a terminal)")
	fl.StringVar(&f.secretFile, "secret-file", "", "s3-keys: the secret access key from FILE (- for standard input; default: a prompt)")
	fl.StringVar(&f.secretFile, "token-file", "", "git: the token from FILE (- for standard input; default: a prompt)")
	fl.StringVar(&f.sshKeyFile, "ssh-key-file", "", "git: the SSH private key from FILE (instead of a token)")

	var ds scopeFlags
	var output string
	describe := &cobra.Command{
		Use:     "describe NAME [-p PROJECT | --department D]",
		Short:   "Show a credential: its type, server and keys (never its values)",
		Example: "  runway credential describe wandb -p team-a\n  runway credential describe ghcr -o yaml",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			scope, err := ds.scope()
			if err != nil {
				return err
			}
			return withClient(cmd, func(ctx context.Context, c *sdk.Client) error {
				cr, err := c.GetCredential(ctx, scope, args[0])
				if err != nil {
					return err
				}
				if output != formatTable {
					return printMessages(cmd.OutOrStdout(), output, false, cr)
				}
				w := cmd.OutOrStdout()
				fmt.Fprintf(w, "Name:        %s\nType:        %s\n", cr.GetName(), credentialTypeName(cr.GetType()))
				if cr.GetServer() != "" {
					fmt.Fprintf(w, "Server:      %s\n", cr.GetServer())
				}
				fmt.Fprintf(w, "Keys:        %s (values are write-only)\nDescription: %s\nCreator:     %s\nCreated:     %s\n",
					strings.Join(cr.GetKeys(), ", "), orDefault(cr.GetDescription(), "-"), orDefault(cr.GetCreator(), "-"),
					cr.GetCreateTime().AsTime().Format("2006-01-02 15:04:05 MST"))
				return nil
			})
		},
	}
	ds.add(describe)
	outputFlag(describe, &output)

	list := assetListCommand("credential", func(ctx context.Context, c *sdk.Client, scope sdk.Scope, w io.Writer, output string) error {
		cs, err := sdk.Collect(c.Credentials(ctx, scope))
		if err != nil || output != formatTable {
			return orPrint(err, w, output, cs)
		}
		t := newTable(w, "Credential", "Type", "Server", "Keys")
		for _, cr := range cs {
			t.row(cr.GetName(), credentialTypeName(cr.GetType()), orDefault(cr.GetServer(), "-"), strings.Join(cr.GetKeys(), ","))
		}
		return t.flush()
	})
	del := assetDeleteCommand("credential", func(ctx context.Context, c *sdk.Client, s sdk.Scope, id string) (string, error) {
		return s.CredentialName(id), c.DeleteCredential(ctx, s, id)
	})
	cmd.AddCommand(create, describe, list, del)
	return cmd
}

// credential builds the credential of type typ from the flags.
func (f *credentialFlags) credential(cmd *cobra.Command, typ string) (*workloadv1.Credential, error) {
	t, ok := credentialTypes[typ]
	if !ok {
		return nil, usageError("credential type %q: want generic, registry, s3-keys or git", typ)
	}
	c := &workloadv1.Credential{Type: t, Description: f.desc, Server: f.server, Values: map[string]string{}}
	in := bufio.NewReader(cmd.InOrStdin())
	switch t {
	case workloadv1.CredentialType_CREDENTIAL_TYPE_GENERIC:
		if f.envFile == "" && len(f.files) == 0 {
			return nil, usageError("a generic credential's values come from --from-env-file FILE (- for standard input) or --from-file KEY=PATH")
		}
		if f.envFile != "" {
			if err := readEnvFile(in, f.envFile, c.Values); err != nil {
				return nil, err
			}
		}
		for _, kp := range f.files {
			k, p, ok := strings.Cut(kp, "=")
			if !ok || k == "" || p == "" {
				return nil, usageError("--from-file %q: want KEY=PATH", kp)
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return nil, usageError("--from-file %s: %v", k, err)
			}
			c.Values[k] = string(b)
		}
	case workloadv1.CredentialType_CREDENTIAL_TYPE_REGISTRY:
		c.Values["username"] = f.user
		pw, err := readSecret(cmd, in, f.secretFile, "Password")
		if err != nil {
			return nil, err
		}
		c.Values["password"] = pw
	case workloadv1.CredentialType_CREDENTIAL_TYPE_S3_KEYS:
		c.Values["access_key_id"] = f.accessKey
		secret, err := readSecret(cmd, in, f.secretFile, "Secret access key")
		if err != nil {
			return nil, err
		}
		c.Values["secret_access_key"] = secret
	case workloadv1.CredentialType_CREDENTIAL_TYPE_GIT:
		if f.user != "" {
			c.Values["username"] = f.user
		}
		if f.sshKeyFile != "" {
			b, err := os.ReadFile(f.sshKeyFile)
			if err != nil {
				return nil, usageError("--ssh-key-file: %v", err)
			}
			c.Values["ssh_private_key"] = string(b)
			break
		}
		tok, err := readSecret(cmd, in, f.secretFile, "Token")
		if err != nil {
			return nil, err
		}
		c.Values["token"] = tok
	}
	return c, nil
}

// readEnvFile reads KEY=VALUE lines from path ("-": in) into values.
func readEnvFile(in *bufio.Reader, path string, values map[string]string) error {
	var r io.Reader = in
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return usageError("--from-env-file: %v", err)
		}
		defer f.Close()
		r = f
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(strings.TrimPrefix(line, "export "), "=")
		if !ok || k == "" {
			// The line is not quoted: it may be a value.
			return usageError("--from-env-file %s: line %d is not KEY=VALUE", path, n)
		}
		values[strings.TrimSpace(k)] = v
	}
	if err := sc.Err(); err != nil {
		return usageError("--from-env-file %s: %v", path, err)
	}
	if len(values) == 0 {
		return usageError("--from-env-file %s holds no KEY=VALUE line", path)
	}
	return nil
}

// readSecret reads one secret: from path ("-": standard input), else from
// a prompt without echo on a terminal, else one line of standard input.
func readSecret(cmd *cobra.Command, in *bufio.Reader, path, what string) (string, error) {
	switch {
	case path != "" && path != "-":
		b, err := os.ReadFile(path)
		if err != nil {
			return "", usageError("%s file: %v", strings.ToLower(what), err)
		}
		return strings.TrimRight(string(b), "\r\n"), nil
	case path == "" && cmd.InOrStdin() == os.Stdin && term.IsTerminal(int(os.Stdin.Fd())):
		fmt.Fprintf(cmd.ErrOrStderr(), "%s: ", what)
		b, err := term.ReadPassword(int(os.Stdin.Fd()))
		fmt.Fprintln(cmd.ErrOrStderr())
		if err != nil {
			return "", err
		}
		return string(b), nil
	}
	b, err := io.ReadAll(in)
	if err != nil {
		return "", err
	}
	s := strings.TrimRight(string(b), "\r\n")
	if s == "" {
		return "", usageError("%s: nothing on standard input", strings.ToLower(what))
	}
	return s, nil
}

// envVar is one -e NAME=VALUE; a VALUE of credential:NAME/KEY is the key
// KEY of credential NAME (an id or a full name), read when the pod starts.
func envVar(kv string) (*workloadv1.EnvVar, bool) {
	k, v, ok := strings.Cut(kv, "=")
	if !ok || k == "" {
		return nil, false
	}
	if ref, isRef := strings.CutPrefix(v, credentialPrefix); isRef {
		i := strings.LastIndex(ref, "/")
		if i <= 0 || i == len(ref)-1 {
			return nil, false
		}
		return &workloadv1.EnvVar{Name: k, Credential: &workloadv1.CredentialKeyRef{Credential: ref[:i], Key: ref[i+1:]}}, true
	}
	return &workloadv1.EnvVar{Name: k, Value: v}, true
}

// credentialPrefix starts an -e value taken from a credential.
const credentialPrefix = "credential:"

// credentialMount is one submit --credential NAME[:/path].
func credentialMount(s string) (*workloadv1.CredentialMount, error) {
	name, p, _ := strings.Cut(s, ":")
	if name == "" {
		return nil, fmt.Errorf("--credential %q: want NAME (environment variables) or NAME:/path (files)", s)
	}
	return &workloadv1.CredentialMount{Credential: name, Path: p}, nil
}
