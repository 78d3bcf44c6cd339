package main

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/moby/moby/client"

	"github.com/runwayhq/runway/pkg/runner/container"
	"github.com/runwayhq/runway/pkg/runner/container/podmantest"
)

// A 1 + 2 PyTorch-style training on the container runtime: each pod prints
// its RANK, WORLD_SIZE and MASTER_ADDR (read with `workload logs --pod K`),
// the master listens on MASTER_PORT and each worker connects to
// MASTER_ADDR:MASTER_PORT by name on the workload's own network. A pod of
// another workload of the same project reaches the master neither by name
// nor by address. An MPI-style training's launcher reads its hostfile
// and reaches both workers.
func TestCLI_DistributedOnContainers(t *testing.T) {
	e := podmantest.Start(t)
	cli, err := client.New(client.WithHost(e.Host))
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	// One node: a workload's network is its node's (bridges are per host),
	// so a gang the scheduler spreads over two nodes cannot find itself
	// (services/workload/README.md, "Distributed trainings").
	d := startDevAt(t, t.TempDir(), []string{"DOCKER_HOST=" + e.Host}, "--runtime", "container", "--nodes", "1", "--gpus-per-node", "4")
	admin := d.session(t, d.token)
	admin.ok(t, "", "project", "create", "team-a", "--gpu", "4")
	const show = `echo RANK=$RANK WORLD_SIZE=$WORLD_SIZE MASTER_ADDR=$MASTER_ADDR; `
	admin.ok(t, "", "training", "submit", "ddp", "-p", "team-a", "-i", podmantest.Image,
		"--framework", "pytorch", "--workers", "2", "-g", "1", "--master-gpu", "0",
		"--master-command", show+`while :; do nc -l -p $MASTER_PORT -e echo hello-from-master; done`,
		"--", "sh", "-c", show+`until out=$(nc -w 3 $MASTER_ADDR $MASTER_PORT </dev/null) && [ -n "$out" ]; do sleep 1; done; echo "connected: $out"; exec sleep 600`)
	for pod, want := range []string{
		"RANK=0 WORLD_SIZE=3 MASTER_ADDR=ddp-master-0",
		"RANK=1 WORLD_SIZE=3 MASTER_ADDR=ddp-master-0",
		"RANK=2 WORLD_SIZE=3 MASTER_ADDR=ddp-master-0",
	} {
		out := waitPodLogs(t, admin, "ddp", "team-a", pod, strings.Fields(want)[0])
		if !strings.Contains(out, want) {
			t.Errorf("pod %d printed %q, want %q", pod, out, want)
		}
	}
	for _, pod := range []int{1, 2} {
		waitPodLogs(t, admin, "ddp", "team-a", pod, "connected: hello-from-master")
	}

	// MPI: the launcher starts once both workers run, reads the hostfile
	// (a worker a line, slots = its GPUs) and reaches each worker by name
	// (retrying: podman's DNS may answer for a new member a moment after
	// the launcher starts, measured here as a first lookup failing).
	admin.ok(t, "", "training", "submit", "mpi", "-p", "team-a", "-i", podmantest.Image,
		"--framework", "mpi", "--workers", "2", "-g", "1", "--master-gpu", "0",
		"--master-command", `cat $RUNWAY_HOSTFILE; for h in $(cut -d' ' -f1 $RUNWAY_HOSTFILE); do until r=$(nc -w 3 $h 2222 </dev/null) && [ -n "$r" ]; do sleep 1; done; echo "$h says $r"; done; echo launched`,
		"--", "sh", "-c", `while :; do nc -l -p 2222 -e echo worker-$RUNWAY_POD_INDEX; done`)
	out := waitPodLogs(t, admin, "mpi", "team-a", 0, "launched")
	for _, want := range []string{"mpi-worker-1 slots=1\nmpi-worker-2 slots=1\n", "mpi-worker-1 says worker-1\n", "mpi-worker-2 says worker-2\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("the launcher printed %q, want %q in it", out, want)
		}
	}

	var mpi struct {
		Status struct {
			Events []struct{ Type, Message string }
		}
	}
	if err := json.Unmarshal([]byte(admin.ok(t, "", "workload", "describe", "mpi", "-p", "team-a", "-o", "json")), &mpi); err != nil {
		t.Fatal(err)
	}
	var started []string
	for _, e := range mpi.Status.Events {
		if e.Type == "WORKLOAD_EVENT_TYPE_STARTED" {
			started = append(started, e.Message)
		}
	}
	if len(started) < 2 || started[len(started)-1] != "Pods 0 running." {
		t.Errorf("STARTED events %q: want the launcher's (pod 0) alone and last, after its workers'", started)
	}

	ip := masterAddress(t, cli)
	admin.ok(t, "", "training", "submit", "other", "-p", "team-a", "-i", podmantest.Image, "--", "sh", "-c",
		`nc -w 3 ddp-master-0 29500 </dev/null; echo "by name rc=$?"; nc -w 3 `+ip+` 29500 </dev/null; echo "by address rc=$?"; echo done`)
	out = waitLogs(t, admin, "other", "team-a", "done")
	if strings.Contains(out, "hello-from-master") || !strings.Contains(out, "by name rc=1") || !strings.Contains(out, "by address rc=1") {
		t.Errorf("another workload's pod reached the master (%s):\n%s", ip, out)
	}
}

// waitPodLogs waits for marker in the log of one pod of a workload.
func waitPodLogs(t *testing.T, s *session, workload, project string, pod int, marker string) string {
	t.Helper()
	return waitLogsArgs(t, s, marker, "workload", "logs", workload, "-p", project, "--pod", strconv.Itoa(pod))
}

// masterAddress is the IP address of ddp's master on its network.
func masterAddress(t *testing.T, cli *client.Client) string {
	t.Helper()
	ctx := context.Background()
	list, err := cli.ContainerList(ctx, client.ContainerListOptions{Filters: client.Filters{}.
		Add("label", container.LabelWorkload+"=ddp").Add("label", container.LabelPod+"=0")})
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("ddp's master container: %v (%d found)", err, len(list.Items))
	}
	in, err := cli.ContainerInspect(ctx, list.Items[0].ID, client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for name, n := range in.Container.NetworkSettings.Networks {
		if n.IPAddress.IsValid() {
			if !strings.Contains(name, "team-a.") {
				t.Errorf("the master is on network %s, want its workload's own", name)
			}
			return n.IPAddress.String()
		}
	}
	t.Fatal("ddp's master has no address")
	return ""
}
