package main

import (
	"encoding/base64"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/runwayhq/runway/pkg/runner/container/podmantest"
	"github.com/runwayhq/runway/pkg/runner/container/registrytest"
)

// statusLine is a workload description's status (its labels' width
// depends on which are shown).
var statusLine = regexp.MustCompile(`(?m)^Status:\s+(\S+)`)

// credWaitFailed waits for a workload to fail and returns its description.
func (d *devServer) credWaitFailed(t *testing.T, seen *credSeen, project, id string) string {
	t.Helper()
	for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(300 * time.Millisecond) {
		out := d.credOK(t, seen, "", "workload", "describe", id, "-p", project)
		status := statusLine.FindStringSubmatch(out)
		if status != nil && status[1] == "Failed" {
			return out
		}
		if status != nil && status[1] == "Completed" || time.Now().After(deadline) {
			t.Fatalf("workload %s did not fail:\n%s", id, out)
		}
	}
}

// TestCLI_RegistryCredential: on the container runtime (podman), an image
// on a registry that wants a password (the CNCF Distribution registry with
// htpasswd auth, on 127.0.0.1) fails to pull without a credential, with
// the registry's reason in the workload's status and events; with a
// registry credential on its environment the workload runs, and another
// project naming no credential does not run the image now on the node
// (the registry is asked again). The pull
// policies: never fails on an image the node lacks, always pulls an image
// the node has (so a wrong password fails it). A registry credential is
// refused for an image of another registry (its password would go
// there) and where it is not of type registry. No response, server log,
// audit record, metric or registry log holds the password.
func TestCLI_RegistryCredential(t *testing.T) {
	e := podmantest.Start(t)
	password := "registry-pw-9c2e71d04b"
	reg := registrytest.Start(t, "alice", password)
	image := reg.Addr + "/team/bb:1"
	e.Push(t, podmantest.Image, image, reg.Username, reg.Password)
	metricsAddr := credFreeAddr(t)
	// One node: a node's runner keeps which credential pulled each image,
	// and runway dev's nodes share one engine's images.
	d := startDevAt(t, t.TempDir(), []string{"DOCKER_HOST=" + e.Host}, "--runtime", "container", "--metrics-listen", metricsAddr, "--nodes", "1")
	var seen credSeen
	d.credOK(t, &seen, "", "project", "create", "team-a", "--gpu", "2")

	// Without a credential the registry refuses the pull.
	d.credOK(t, &seen, "", "environment", "create", "public", "-p", "team-a", "-i", image)
	d.credOK(t, &seen, "", "training", "submit", "nocred", "-p", "team-a", "-e", "public", "--", "sh", "-c", "echo ran")
	out := d.credWaitFailed(t, &seen, "team-a", "nocred")
	wantAll(t, "pull without a credential", out, "pulling "+image+": ", "unauthorized")
	if _, events, _ := strings.Cut(out, "\nEvents:"); !strings.Contains(events, "pulling "+image) {
		t.Errorf("the events do not say why the pod failed:\n%s", out)
	}

	// With the registry credential on the environment it runs.
	d.credOK(t, &seen, password+"\n", "credential", "create", "registry", "reg", "-p", "team-a",
		"--registry-server", reg.Addr, "--username", reg.Username)
	d.credOK(t, &seen, "", "environment", "create", "private", "-p", "team-a", "-i", image,
		"--registry-credential", "reg", "--pull-policy", "if-not-present")
	out = d.credOK(t, &seen, "", "environment", "list", "-p", "team-a")
	wantAll(t, "environment list", out, "if-not-present", "reg")
	d.credOK(t, &seen, "", "training", "submit", "withcred", "-p", "team-a", "-e", "private", "--", "sh", "-c", "echo pulled and ran")
	wantAll(t, "pulled with the credential", d.credLogs(t, &seen, "team-a", "withcred"), "pulled and ran")
	out = d.credOK(t, &seen, "", "workload", "describe", "withcred", "-p", "team-a")
	wantAll(t, "describe", out, "Pull policy:", "if-not-present", "Pulled with:", "projects/team-a/credentials/reg")

	// Another project that names no credential does not run the image the
	// node pulled for team-a: the registry is asked again, and refuses.
	d.credOK(t, &seen, "", "project", "create", "team-b", "--gpu", "2")
	d.credOK(t, &seen, "", "training", "submit", "cached", "-p", "team-b", "-i", image, "--", "sh", "-c", "echo ran")
	wantAll(t, "another project, the cached image", d.credWaitFailed(t, &seen, "team-b", "cached"), "pulling "+image+": ", "unauthorized")
	d.credOK(t, &seen, "", "training", "submit", "cached-never", "-p", "team-b", "-i", image, "--pull-policy", "never", "--", "sh", "-c", "echo ran")
	wantAll(t, "another project, never", d.credWaitFailed(t, &seen, "team-b", "cached-never"), "was pulled with a credential this workload does not name")

	// Never: an image the node lacks is not pulled, whatever the credential.
	other := reg.Addr + "/team/bb:2"
	e.Push(t, podmantest.Image, other, reg.Username, reg.Password)
	d.credOK(t, &seen, "", "training", "submit", "never", "-p", "team-a", "-i", other, "--registry-credential", "reg",
		"--pull-policy", "never", "--", "sh", "-c", "echo ran")
	wantAll(t, "pull policy never", d.credWaitFailed(t, &seen, "team-a", "never"), "image "+other+" is not on the node, and its pull policy is never")

	// Always: the node has the image now, and it is pulled again; a
	// credential with a wrong password fails it, the right one runs.
	d.credOK(t, &seen, "wrong-password\n", "credential", "create", "registry", "badpw", "-p", "team-a",
		"--registry-server", reg.Addr, "--username", reg.Username)
	d.credOK(t, &seen, "", "training", "submit", "always-bad", "-p", "team-a", "-i", image, "--registry-credential", "badpw",
		"--pull-policy", "always", "--", "sh", "-c", "echo ran")
	wantAll(t, "pull policy always", d.credWaitFailed(t, &seen, "team-a", "always-bad"), "pulling "+image+": ", "unauthorized")
	d.credOK(t, &seen, "", "training", "submit", "always-ok", "-p", "team-a", "-i", image, "--registry-credential", "reg",
		"--pull-policy", "always", "--", "sh", "-c", "echo pulled again")
	wantAll(t, "pull policy always, the right password", d.credLogs(t, &seen, "team-a", "always-ok"), "pulled again")

	// A hostile submit: the credential sent to a registry it is not for.
	r := d.credRun(t, &seen, "", "training", "submit", "elsewhere", "-p", "team-a", "-i", "127.0.0.1:1/steal/x:1",
		"--registry-credential", "reg", "--", "true")
	wantAll(t, "another registry", r.stderr, "workload.spec.registry_credential", "must be a credential of the image's registry 127.0.0.1:1", "[INVALID_FIELD]")
	r = d.credRun(t, &seen, "", "training", "submit", "elsewhere", "-p", "team-a", "-i", "busybox",
		"--registry-credential", "reg", "--", "true")
	wantAll(t, "docker hub", r.stderr, "image's registry docker.io")
	d.credOK(t, &seen, "K=v\n", "credential", "create", "generic", "gen", "-p", "team-a", "--from-env-file", "-")
	r = d.credRun(t, &seen, "", "training", "submit", "generic", "-p", "team-a", "-i", image, "--registry-credential", "gen", "--", "true")
	wantAll(t, "generic as registry", r.stderr, "workload.spec.registry_credential", "must be a registry credential")
	r = d.credRun(t, &seen, "", "training", "submit", "policy", "-p", "team-a", "-i", image, "--pull-policy", "sometimes", "--", "true")
	wantAll(t, "bad pull policy", r.stderr, "--pull-policy \"sometimes\"")
	r = d.credRun(t, &seen, "", "environment", "create", "missing", "-p", "team-a", "-i", image, "--registry-credential", "nope")
	if r.code != 0 {
		t.Errorf("an environment naming a credential that does not exist yet: exit %d %s (resolved at submit)", r.code, r.stderr)
	}
	r = d.credRun(t, &seen, "", "training", "submit", "missing", "-p", "team-a", "-e", "missing", "--", "true")
	wantAll(t, "missing credential", r.stderr, "[CREDENTIAL_NOT_FOUND]")

	d.credOK(t, &seen, "", "audit", "list", "-o", "json")
	d.credOK(t, &seen, "", "workload", "list", "-p", "team-a", "-o", "json")
	d.credOK(t, &seen, "", "credential", "describe", "reg", "-p", "team-a", "-o", "json")
	seen.add("/metrics", d.scrapeMetrics(t, metricsAddr))
	seen.add("server log", d.logs.String())
	seen.add("registry log", reg.Log())
	basic := base64.StdEncoding.EncodeToString([]byte(reg.Username + ":" + password))
	for _, secret := range []string{password, basic, base64.URLEncoding.EncodeToString([]byte(password))} {
		for _, g := range seen.got {
			if i := strings.Index(g, secret); i >= 0 {
				what, _, _ := strings.Cut(g, "\n")
				t.Errorf("%s holds the registry password: %.120q", what, g[max(0, i-60):])
			}
		}
	}
}
