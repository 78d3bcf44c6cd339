package main

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/runwayhq/runway/cmd/runway/server"
	"github.com/runwayhq/runway/pkg/runner/container/podmantest"
)

// credSeen collects everything the test got back from the platform, to be
// searched for the secrets at the end.
type credSeen struct{ got []string }

func (s *credSeen) add(what string, out ...string) {
	s.got = append(s.got, what+":\n"+strings.Join(out, "\n"))
}

// credHash is what the pods print instead of a value: its SHA-256.
func credHash(v string) string {
	h := sha256.Sum256([]byte(v))
	return hex.EncodeToString(h[:])
}

// credFreeAddr is a free 127.0.0.1 port.
func credFreeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// credRun runs the CLI with stdin as the administrator; every output is
// kept in seen.
func (d *devServer) credRun(t *testing.T, seen *credSeen, stdin string, args ...string) result {
	t.Helper()
	r := d.session(t, d.token).run(t, stdin, args...)
	seen.add("runway "+strings.Join(args, " "), r.stdout, r.stderr)
	return r
}

func (d *devServer) credOK(t *testing.T, seen *credSeen, stdin string, args ...string) string {
	t.Helper()
	r := d.credRun(t, seen, stdin, args...)
	if r.code != 0 {
		t.Fatalf("runway %s: exit %d\n%s%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

// credLogs waits for a workload to complete and returns its output.
func (d *devServer) credLogs(t *testing.T, seen *credSeen, project, id string) string {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		out := d.credOK(t, seen, "", "workload", "describe", id, "-p", project)
		status := statusLine.FindStringSubmatch(out)
		if status != nil && status[1] == "Completed" {
			return d.credOK(t, seen, "", "workload", "logs", id, "-p", project)
		}
		if status != nil && status[1] == "Failed" || time.Now().After(deadline) {
			t.Fatalf("workload %s did not complete:\n%s\nlog:\n%s", id, out, d.run(t, "workload", "logs", id, "-p", project).stdout)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// scrapeMetrics is runway dev's /metrics, read with its metrics token.
func (d *devServer) scrapeMetrics(t *testing.T, addr string) string {
	t.Helper()
	token, err := os.ReadFile(filepath.Join(d.dataDir, server.DevMetricsTokenFile))
	if err != nil {
		t.Fatal(err)
	}
	mreq, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	mreq.Header.Set("Authorization", "Bearer "+strings.TrimSpace(strings.SplitN(string(token), "\n", 2)[0]))
	mresp, err := http.DefaultClient.Do(mreq)
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(mresp.Body)
	mresp.Body.Close()
	if mresp.StatusCode != http.StatusOK || !strings.Contains(string(metrics), "grpc_server_handled_total") {
		t.Errorf("/metrics: %d %.200s", mresp.StatusCode, metrics)
	}
	return string(metrics)
}

// TestCLI_Credentials: a generic credential created from standard input
// reaches a pod (process runtime, runway dev) as environment variables, as
// files (0400, the pod's uid) and through an environment's
// TOKEN=credential:NAME/KEY; values written before and after a key
// rotation reach pods, and after reencrypt the old key is removed and they
// still do. No response, server log line, audit event, metric or etcd
// value holds a value in plain text.
func TestCLI_Credentials(t *testing.T) {
	metricsAddr := credFreeAddr(t)
	d := startDev(t, "--metrics-listen", metricsAddr)
	var seen credSeen
	first, second, third := "first-secret-4f1c9a0e7d", "second-secret-b83e21c5aa", "third-secret-0d6f7e9b12"
	d.credOK(t, &seen, "", "department", "create", "research", "--gpu", "4")
	d.credOK(t, &seen, "", "project", "create", "team-a", "--gpu", "2", "--department", "research")

	out := d.credOK(t, &seen, "# tracking\nWANDB_API_KEY="+first+"\nOTHER="+second+"\n",
		"credential", "create", "generic", "wandb", "-p", "team-a", "--from-env-file", "-")
	wantAll(t, "create", out, `credential "projects/team-a/credentials/wandb" created with keys OTHER, WANDB_API_KEY`)
	out = d.credOK(t, &seen, "", "credential", "describe", "wandb", "-p", "team-a")
	wantAll(t, "describe", out, "generic", "OTHER, WANDB_API_KEY", "users/admin")
	out = d.credOK(t, &seen, "", "credential", "list", "-p", "team-a", "-o", "json")
	wantAll(t, "list", out, `"keys"`, "WANDB_API_KEY")

	// REST shows keys, never values.
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+d.addr+"/v1/projects/team-a/credentials/wandb", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+d.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	seen.add("GET credential", string(body))
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "WANDB_API_KEY") {
		t.Errorf("GET credential: %d %s", resp.StatusCode, body)
	}

	d.credOK(t, &seen, "", "environment", "create", "tracked", "-p", "team-a", "-i", "img", "-e", "TOKEN=credential:wandb/OTHER")
	out = d.credOK(t, &seen, "", "environment", "list", "-p", "team-a", "-o", "json")
	wantAll(t, "environment list", out, `"credential": "wandb"`, `"key": "OTHER"`)

	script := `printf 'env %s\n' "$(printf %s "$WANDB_API_KEY" | sha256sum | cut -c1-64)"
printf 'token %s\n' "$(printf %s "$TOKEN" | sha256sum | cut -c1-64)"
printf 'file %s\n' "$(sha256sum < /mnt/WANDB_API_KEY | cut -c1-64)"
printf 'mode %s uid %s\n' "$(stat -c '%a %u' /mnt/OTHER)" "$(id -u)"
echo written > /mnt/new 2>/dev/null && echo writable || echo read-only`
	d.credOK(t, &seen, "", "training", "submit", "uses", "-p", "team-a", "-e", "tracked",
		"--credential", "wandb", "--credential", "wandb:/mnt", "--", "sh", "-c", script)
	logs := d.credLogs(t, &seen, "team-a", "uses")
	uid := ""
	for _, l := range strings.Split(logs, "\n") {
		if f := strings.Fields(l); len(f) == 5 && f[0] == "mode" {
			uid = f[4]
		}
	}
	wantAll(t, "pod output", logs, "env "+credHash(first), "token "+credHash(second), "file "+credHash(first),
		"mode 400 "+uid+" uid "+uid, "read-only")
	if uid == "" || uid == "0" {
		t.Errorf("pod uid %q; want the pod's own non-root uid\n%s", uid, logs)
	}
	// The process runtime mounts files on a directory the node has.
	d.credOK(t, &seen, "", "training", "submit", "nodir", "-p", "team-a", "-i", "img", "--credential", "wandb:/no/such/dir", "--", "true")
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(300 * time.Millisecond) {
		out := d.credOK(t, &seen, "", "workload", "describe", "nodir", "-p", "team-a")
		if strings.Contains(out, "Status:       Failed") {
			wantAll(t, "files on a missing directory", out, "it has no /no/such/dir")
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("nodir did not fail:\n%s", out)
		}
	}
	out = d.credOK(t, &seen, "", "workload", "describe", "uses", "-p", "team-a", "-o", "json")
	wantAll(t, "workload spec", out, `"credential": "projects/team-a/credentials/wandb"`, `"path": "/mnt"`)
	out = d.credOK(t, &seen, "", "workload", "describe", "uses", "-p", "team-a")
	wantAll(t, "workload describe", out, "TOKEN=credential:projects/team-a/credentials/wandb/OTHER",
		"Credentials:  projects/team-a/credentials/wandb projects/team-a/credentials/wandb:/mnt")

	// Rotation: a new key; a credential written after it; both reach a pod.
	keyFile := filepath.Join(d.dataDir, server.CredentialsKeyName)
	d.credOK(t, &seen, "", "admin", "credentials", "add-key", "--key-file", keyFile)
	r := d.credRun(t, &seen, third+"\n", "credential", "create", "generic", "late", "-p", "team-a", "--from-env-file", "-")
	wantAll(t, "a line that is not KEY=VALUE", r.stderr, "line 1 is not KEY=VALUE")
	d.credOK(t, &seen, "LATE_KEY="+third+"\n", "credential", "create", "generic", "later", "-p", "team-a", "--from-env-file", "-")
	both := `printf 'a %s\n' "$(printf %s "$WANDB_API_KEY" | sha256sum | cut -c1-64)"; printf 'b %s\n' "$(printf %s "$LATE_KEY" | sha256sum | cut -c1-64)"`
	d.credOK(t, &seen, "", "training", "submit", "rotated", "-p", "team-a", "-i", "img",
		"--credential", "wandb", "--credential", "later", "--", "sh", "-c", both)
	wantAll(t, "after rotation", d.credLogs(t, &seen, "team-a", "rotated"), "a "+credHash(first), "b "+credHash(third))

	out = d.credOK(t, &seen, "", "admin", "credentials", "reencrypt")
	wantAll(t, "reencrypt", out, "credentials sealed again under key")
	out = d.credOK(t, &seen, "", "admin", "credentials", "prune-keys", "--key-file", keyFile)
	wantAll(t, "prune", out, "removed 1 keys")
	d.credOK(t, &seen, "", "training", "submit", "pruned", "-p", "team-a", "-i", "img",
		"--credential", "wandb", "--credential", "later", "--", "sh", "-c", both)
	wantAll(t, "after prune", d.credLogs(t, &seen, "team-a", "pruned"), "a "+credHash(first), "b "+credHash(third))

	// Bad input names the field.
	r = d.credRun(t, &seen, "bad-key=x\n", "credential", "create", "generic", "bad", "-p", "team-a", "--from-env-file", "-")
	wantAll(t, "bad key", r.stderr, "credential.values[bad-key]", "[INVALID_FIELD]")
	r = d.credRun(t, &seen, "pw\n", "credential", "create", "registry", "reg", "-p", "team-a", "--username", "u")
	wantAll(t, "registry without server", r.stderr, "credential.server", "[INVALID_FIELD]")
	d.credOK(t, &seen, "pw\n", "credential", "create", "registry", "reg", "-p", "team-a", "--username", "u", "--registry-server", "registry.example.com:5000")
	r = d.credRun(t, &seen, "", "training", "submit", "x", "-p", "team-a", "-i", "img", "--credential", "reg", "--", "true")
	wantAll(t, "registry credential as env", r.stderr, "workload.spec.credentials[0].credential", "must be a generic credential")
	r = d.credRun(t, &seen, "", "training", "submit", "x", "-p", "team-a", "-i", "img", "--credential", "missing", "--", "true")
	wantAll(t, "missing credential", r.stderr, "[CREDENTIAL_NOT_FOUND]")
	r = d.credRun(t, &seen, "", "training", "submit", "x", "-p", "team-a", "-i", "img", "-e", "T=credential:wandb/NOPE", "--", "true")
	wantAll(t, "missing key", r.stderr, "workload.spec.env[0].credential.key", "OTHER, WANDB_API_KEY")
	r = d.credRun(t, &seen, "", "training", "submit", "x", "-p", "team-a", "-i", "img", "--credential", "wandb:relative", "--", "true")
	wantAll(t, "relative path", r.stderr, "workload.spec.credentials[0].path")

	// Everything else the platform says: the audit log, /metrics, the
	// server's log, and every value in etcd.
	out = d.credOK(t, &seen, "", "audit", "list", "-o", "json")
	wantAll(t, "audit", out, "CreateCredential", "projects/team-a/credentials/wandb", "ReencryptCredentials")
	seen.add("/metrics", d.scrapeMetrics(t, metricsAddr))
	seen.add("server log", d.logs.String())

	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"unix://" + filepath.Join(d.dataDir, "etcd", "client.sock")}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	all, err := cli.Get(t.Context(), "", clientv3.WithFromKey())
	if err != nil {
		t.Fatal(err)
	}
	sealed := 0
	for _, kv := range all.Kvs {
		seen.add("etcd "+string(kv.Key), string(kv.Value))
		if strings.HasPrefix(string(kv.Key), "/runway/v1/credentials/") {
			sealed++
		}
	}
	if sealed != 3 { // wandb, later, reg
		t.Errorf("%d credentials in etcd, want 3", sealed)
	}
	for _, secret := range []string{first, second, third} {
		for _, g := range seen.got {
			if i := strings.Index(g, secret); i >= 0 {
				what, _, _ := strings.Cut(g, "\n")
				t.Errorf("%s holds a credential's value: %.120q", what, g[max(0, i-60):])
			}
		}
	}
}

// TestCLI_CredentialsContainer: on the container runtime (podman) a
// generic credential reaches the container as environment variables and as
// read-only files, 0400 and the container user's, at a path the image does
// not have.
func TestCLI_CredentialsContainer(t *testing.T) {
	e := podmantest.Start(t)
	d := startDevAt(t, t.TempDir(), []string{"DOCKER_HOST=" + e.Host}, "--runtime", "container")
	var seen credSeen
	secret := "container-secret-61b0f2d4e8"
	d.credOK(t, &seen, "", "project", "create", "team-a", "--gpu", "2")
	d.credOK(t, &seen, "API_KEY="+secret+"\n", "credential", "create", "generic", "api", "-p", "team-a", "--from-env-file", "-")
	script := `bb=/bin/busybox
printf 'env %s\n' "$(printf %s "$API_KEY" | $bb sha256sum | $bb cut -c1-64)"
printf 'file %s\n' "$($bb sha256sum < /run/secrets/api/API_KEY | $bb cut -c1-64)"
printf 'mode %s uid %s\n' "$($bb stat -c '%a %u' /run/secrets/api/API_KEY)" "$(id -u)"
echo x > /run/secrets/api/new 2>/dev/null && echo writable || echo read-only`
	d.credOK(t, &seen, "", "training", "submit", "uses", "-p", "team-a", "-i", podmantest.Image,
		"--credential", "api", "--credential", "api:/run/secrets/api", "--", "sh", "-c", script)
	logs := d.credLogs(t, &seen, "team-a", "uses")
	uid := ""
	for _, l := range strings.Split(logs, "\n") {
		if f := strings.Fields(l); len(f) == 5 && f[0] == "mode" {
			uid = f[4]
		}
	}
	wantAll(t, "container output", logs, "env "+credHash(secret), "file "+credHash(secret), "mode 400 "+uid+" uid "+uid, "read-only")
	if uid == "" || uid == "0" {
		t.Errorf("container uid %q; want the project's non-root uid\n%s", uid, logs)
	}
	seen.add("server log", d.logs.String())
	for _, g := range seen.got {
		if strings.Contains(g, secret) {
			what, _, _ := strings.Cut(g, "\n")
			t.Errorf("%s holds the value", what)
		}
	}
}
