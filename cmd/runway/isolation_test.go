package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/runwayhq/runway/pkg/runner/container/podmantest"
)

// researcher creates user NAME, L1 researcher in project, signs it in and
// returns its session.
func researcher(t *testing.T, d *devServer, name, project string) *session {
	t.Helper()
	admin := d.session(t, d.token)
	out := admin.ok(t, "", "user", "create", name, "--email", name+"@example.com")
	m := regexp.MustCompile(`temporary password \(shown once, to change at the first sign-in\): (\S+)\n$`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("user create printed %q", out)
	}
	admin.ok(t, "", "access-rule", "create", "--subject", "user:"+name+"@example.com", "--role", "l1-researcher", "--scope", "project:"+project)
	s := d.session(t, "")
	s.ok(t, m[1]+"\n"+name+"'s own password\n", "login", "--user", name+"@example.com")
	return s
}

// waitLogs reads a workload's logs until they hold marker (60 s at most).
func waitLogs(t *testing.T, s *session, workload, project, marker string) string {
	t.Helper()
	return waitLogsArgs(t, s, marker, "workload", "logs", workload, "-p", project)
}

// waitLogsArgs runs the logs command args until its output holds marker.
func waitLogsArgs(t *testing.T, s *session, marker string, args ...string) string {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		r := s.run(t, "", args...)
		if r.code == 0 && strings.Contains(r.stdout, marker) {
			return r.stdout
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never showed %q: exit %d\n%s%s", strings.Join(args, " "), marker, r.code, r.stdout, r.stderr)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// A researcher of team-a runs a workload that goes looking for secrets:
// the dev env file (the administrator's token), /proc/1/environ, every
// process's environment and working directory, the agents' data
// directories (logs of other pods), etcd's data, and the working directory
// of team-b's pod; and prints its own environment. It finds none of them:
// no token, no etcd or server address, no other tenant's file.
// It runs for both runtimes: host processes, and containers on a real
// podman (the probe then also finds none of the host's files).
func TestCLI_PodIsolation(t *testing.T) {
	t.Run("process", func(t *testing.T) { podIsolation(t, startDev(t), "img", false) })
	t.Run("container", func(t *testing.T) {
		e := podmantest.Start(t)
		podIsolation(t, startDevAt(t, t.TempDir(), []string{"DOCKER_HOST=" + e.Host}, "--runtime", "container"), podmantest.Image, true)
	})
}

func podIsolation(t *testing.T, d *devServer, image string, containers bool) {
	// The ready record (with etcd's address) is on stderr, copied apart
	// from the stdout lines startDev waited for.
	var etcd []string
	for deadline := time.Now().Add(10 * time.Second); etcd == nil; time.Sleep(20 * time.Millisecond) {
		if etcd = regexp.MustCompile(`etcd=(\S+)`).FindStringSubmatch(d.logs.String()); etcd == nil && time.Now().After(deadline) {
			t.Fatalf("runway dev logged no etcd address:\n%s", d.logs.String())
		}
	}
	admin := d.session(t, d.token)
	admin.ok(t, "", "project", "create", "team-a", "--gpu", "1")
	admin.ok(t, "", "project", "create", "team-b", "--gpu", "1")
	// team-b's pod keeps a secret in its working directory and its log.
	admin.ok(t, "", "training", "submit", "holder", "-p", "team-b", "-i", image, "-g", "1", "--",
		"sh", "-c", "echo tenant-b-secret > secret; echo tenant-b-log-secret; echo ready; exec sleep 600")
	waitLogs(t, admin, "holder", "team-b", "ready")
	uid := regexp.MustCompile(`"uid":\s*"([^"]+)"`).FindStringSubmatch(admin.ok(t, "", "workload", "describe", "holder", "-p", "team-b", "-o", "json"))
	if uid == nil {
		t.Fatal("workload describe -o json shows no uid")
	}
	// A data directory anyone may cross: the files' own modes must hold.
	for _, dir := range []string{filepath.Dir(d.dataDir), d.dataDir} {
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}

	alice := researcher(t, d, "alice", "team-a")
	probe := strings.Join([]string{
		`echo ENV-BEGIN; env; echo ENV-END`,
		`cat ` + d.dataDir + `/env`,
		`cat /proc/1/environ`,
		`for p in /proc/[0-9]*; do cat $p/environ; ls $p/cwd; cat $p/cwd/secret; done 2>/dev/null`,
		`ls -R ` + d.dataDir + `/nodes ` + d.dataDir + `/etcd`,
		`cat ` + d.dataDir + `/nodes/*/*/output.log`,
		`ls "$HOME/.."; cat "$HOME"/../*/secret; ls "$HOME/../` + uid[1] + `.0"; cat "$HOME/../` + uid[1] + `.0/secret"`,
		`echo PROBE-END`,
	}, "; ")
	alice.ok(t, "", "training", "submit", "probe", "-p", "team-a", "-i", image, "--", "sh", "-c", probe)
	out := waitLogs(t, alice, "probe", "team-a", "PROBE-END")

	for what, secret := range map[string]string{
		"the administrator's token": d.token, "RUNWAY_TOKEN": "RUNWAY_TOKEN", "the server's address": d.addr,
		"etcd's address": etcd[1], "team-b's file": "tenant-b-secret", "team-b's log": "tenant-b-log-secret",
	} {
		if strings.Contains(out, secret) {
			t.Errorf("the probe found %s:\n%s", what, out)
		}
	}
	// The probe did run its reads: they were refused, or (in a container)
	// found nothing of the host there.
	if n := strings.Count(out, "No such file or directory"); containers && n < 6 {
		t.Errorf("the probe found %d of the host's paths missing, want at least 6 (env file, data dirs, logs, the other pod's directory):\n%s", n, out)
	}
	if n := strings.Count(out, "Permission denied"); !containers && n < 7 {
		t.Errorf("the probe's reads were refused %d times, want at least 4 (env file, /proc/1/environ, data dirs, the pods' directory):\n%s", n, out)
	}
	env := out[strings.Index(out, "ENV-BEGIN\n")+len("ENV-BEGIN\n") : strings.Index(out, "ENV-END")]
	for line := range strings.Lines(env) {
		name, _, _ := strings.Cut(line, "=")
		switch {
		case strings.HasPrefix(name, "RUNWAY_"), name == "CUDA_VISIBLE_DEVICES", name == "PATH", name == "HOME",
			name == "TMPDIR", name == "PWD", name == "SHLVL", name == "_",
			containers && (name == "HOSTNAME" || name == "container" || name == "TERM"): // the engine's
		default:
			t.Errorf("the pod's environment has %s", strings.TrimSpace(line))
		}
	}
	// It said how its workloads run (printed after the lines startDev read).
	if line := "Workloads run as host processes"; containers {
		if !strings.Contains(d.logs.String(), "Workloads run as containers of their images") {
			t.Errorf("runway dev does not say its workloads run as containers:\n%s", d.logs.String())
		}
	} else if !strings.Contains(d.logs.String(), line) {
		t.Errorf("runway dev does not say %q:\n%s", line, d.logs.String())
	}
}
