package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/runwayhq/runway/pkg/runner/container"
	"github.com/runwayhq/runway/pkg/runner/container/podmantest"
)

// containersOf is the engine's containers of project, by workload: id
// and start time.
func containersOf(t *testing.T, cli *client.Client, project string) map[string]string {
	t.Helper()
	ctx := context.Background()
	list, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: client.Filters{}.Add("label", container.LabelProject+"="+project)})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, c := range list.Items {
		in, err := cli.ContainerInspect(ctx, c.ID, client.ContainerInspectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		w := c.Labels[container.LabelWorkload]
		if _, twice := out[w]; twice {
			t.Errorf("workload %s has two containers", w)
		}
		out[w] = c.ID + " started " + in.Container.State.StartedAt
	}
	return out
}

// phase is a workload's phase from `workload describe -o json`.
func phase(t *testing.T, s *session, workload, project string) string {
	t.Helper()
	var w struct{ Status struct{ Phase string } }
	if err := json.Unmarshal([]byte(s.ok(t, "", "workload", "describe", workload, "-p", project, "-o", "json")), &w); err != nil {
		t.Fatal(err)
	}
	return w.Status.Phase
}

func waitPhase(t *testing.T, s *session, workload, project, want string) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		got := phase(t, s, workload, project)
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s is %s, want %s", workload, got, want)
		}
	}
}

// runway dev with the container runtime is killed with kill -9 while its
// containers run, and started again on the same data directory: the
// running container is adopted (the same one, started once), the finished
// pod stays finished and is not run again, and the pod that ended while
// no agent ran folds its exit code.
func TestCLI_ContainersAdoptedAfterKill9(t *testing.T) {
	e := podmantest.Start(t)
	cli, err := client.New(client.WithHost(e.Host))
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	dir, env := t.TempDir(), []string{"DOCKER_HOST=" + e.Host}
	d := startDevAt(t, dir, env, "--runtime", "container")
	admin := d.session(t, d.token)
	admin.ok(t, "", "project", "create", "team-a", "--gpu", "2")
	img := podmantest.Image
	admin.ok(t, "", "training", "submit", "long", "-p", "team-a", "-i", img, "-g", "1", "--", "sh", "-c", "echo started; exec sleep 600")
	admin.ok(t, "", "training", "submit", "done", "-p", "team-a", "-i", img, "--", "sh", "-c", "echo finished")
	waitLogs(t, admin, "long", "team-a", "started")
	waitPhase(t, admin, "done", "team-a", "WORKLOAD_PHASE_COMPLETED")
	// Follow streams the engine's log as it comes, to the pod's end.
	admin.ok(t, "", "training", "submit", "ticks", "-p", "team-a", "-i", img, "--", "sh", "-c", "for i in 1 2 3; do echo tick $i; sleep 1; done")
	waitLogs(t, admin, "ticks", "team-a", "tick 1")
	if out := admin.ok(t, "", "workload", "logs", "ticks", "-p", "team-a", "--follow"); out != "tick 1\ntick 2\ntick 3\n" {
		t.Errorf("logs --follow printed %q, want the three ticks", out)
	}
	admin.ok(t, "", "training", "submit", "later", "-p", "team-a", "-i", img, "--", "sh", "-c", "echo waiting; sleep 3; exit 4")
	waitLogs(t, admin, "later", "team-a", "waiting")
	before := containersOf(t, cli, "team-a")

	if err := d.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = d.cmd.Wait()
	// later ends while nothing runs the node.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if c := containersOf(t, cli, "team-a")["later"]; c != "" {
			in, err := cli.ContainerInspect(context.Background(), strings.Fields(c)[0], client.ContainerInspectOptions{})
			if err == nil && !in.Container.State.Running {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("later's container did not end in 30 s")
		}
	}

	d2 := startDevAt(t, dir, env, "--runtime", "container")
	admin = d2.session(t, d2.token)
	waitPhase(t, admin, "later", "team-a", "WORKLOAD_PHASE_FAILED")
	if got := phase(t, admin, "done", "team-a"); got != "WORKLOAD_PHASE_COMPLETED" {
		t.Errorf("done is %s after the restart, want it still completed", got)
	}
	if got := phase(t, admin, "long", "team-a"); got != "WORKLOAD_PHASE_RUNNING" {
		t.Errorf("long is %s after the restart, want running", got)
	}
	if out := waitLogs(t, admin, "long", "team-a", "started"); out != "started\n" {
		t.Errorf("long's log after the restart is %q, want one start", out)
	}
	if out := admin.ok(t, "", "workload", "logs", "done", "-p", "team-a"); out != "finished\n" {
		t.Errorf("done's log after the restart is %q, want one run", out)
	}
	if desc := admin.ok(t, "", "workload", "describe", "later", "-p", "team-a"); !strings.Contains(desc, "exit code 4") {
		t.Errorf("later's description does not give its exit code 4:\n%s", desc)
	}
	// Give the new agents time to start anything twice, then compare.
	time.Sleep(2 * time.Second)
	after := containersOf(t, cli, "team-a")
	for w, c := range before {
		if after[w] != c {
			t.Errorf("%s: container %s before the kill, %s after: started again", w, c, after[w])
		}
	}
	if len(after) != len(before) {
		t.Errorf("containers before the kill %v, after %v", before, after)
	}
}

// --runtime container with no engine answering fails in one line; a
// runtime that does not exist is refused.
func TestCLI_RuntimeFlag(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"dev", "--runtime", "container"}, "error: --runtime container: no container engine answers: DOCKER_HOST=unix:///nonexistent/docker.sock"},
		{[]string{"dev", "--runtime", "vm"}, `error: --runtime "vm": want auto, container or process`},
		{[]string{"agent", "--node", "n", "--etcd-endpoints", "127.0.0.1:1", "--runtime", "vm"}, `error: --runtime "vm": want auto, container or process`},
	} {
		cmd := exec.Command(binary, append(c.args, "--data-dir", t.TempDir())...)
		cmd.Env = append(os.Environ(), "DOCKER_HOST=unix:///nonexistent/docker.sock")
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.HasPrefix(strings.TrimSpace(string(out)), c.want) || strings.Count(strings.TrimSpace(string(out)), "\n") != 0 {
			t.Errorf("runway %v: %v\n%s\nwant one line starting %q", c.args, err, out, c.want)
		}
	}
}
