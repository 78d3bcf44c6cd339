package agent_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"google.golang.org/protobuf/types/known/durationpb"

	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/etcdstore"
	"github.com/runwayhq/runway/pkg/gpu"
	"github.com/runwayhq/runway/pkg/gpu/simulated"
	"github.com/runwayhq/runway/pkg/runner/container"
	"github.com/runwayhq/runway/pkg/runner/container/podmantest"
	"github.com/runwayhq/runway/services/nodemanager"
	"github.com/runwayhq/runway/services/nodemanager/agent"
)

// containerWorkload writes a workload of the busybox image with memory
// memory (0: no limit).
func (f *fixture) containerWorkload(t *testing.T, id string, memory int64, command ...string) {
	t.Helper()
	c := etcdstore.NewCollection(f.etcd.Client, etcdstore.PrefixWorkloads, func() *workloadv1.Workload { return new(workloadv1.Workload) })
	w := &workloadv1.Workload{Name: "projects/team-a/workloads/" + id, Uid: "uid-" + id,
		Spec: &workloadv1.WorkloadSpec{Image: podmantest.Image, Command: command, MemoryBytes: memory}}
	if _, err := c.Create(context.Background(), "team-a/"+id, w); err != nil {
		t.Fatal(err)
	}
}

func onEngine(host string) func(*agent.Config) {
	return func(c *agent.Config) { c.Engine = host }
}

// Containers' exit codes fold into the run reports, and one over its
// memory limit is FAILED saying so; a finished pod's container goes with
// its workload.
func TestRun_containerExitsAndMemoryLimit(t *testing.T) {
	e := podmantest.Start(t)
	f := newFixture(t)
	f.run(t, onEngine(e.Host), func(c *agent.Config) { c.CollectInterval = 100 * time.Millisecond })
	f.containerWorkload(t, "ok", 0, "sh", "-c", "test -x /bin/busybox && ! test -e /usr")
	f.containerWorkload(t, "bad", 0, "sh", "-c", "exit 3")
	f.containerWorkload(t, "hog", 32<<20, "sh", "-c", "x=$(head -c 200000000 /dev/zero | tr '\\0' a); echo survived")
	for _, id := range []string{"ok", "bad", "hog"} {
		f.bind(t, id)
	}
	f.waitRun(t, "ok", workloadv1.PodState_POD_STATE_SUCCEEDED)
	if r := f.waitRun(t, "bad", workloadv1.PodState_POD_STATE_FAILED); r.GetExitCode() != 3 {
		t.Errorf("bad: exit code %d, want 3", r.GetExitCode())
	}
	r := f.waitRun(t, "hog", workloadv1.PodState_POD_STATE_FAILED)
	if !strings.Contains(r.GetMessage(), "memory limit of 32.0 MiB") {
		t.Errorf("hog: %q, want it to name the memory limit", r.GetMessage())
	}

	cli, err := client.New(client.WithHost(e.Host))
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	count := func(workload string) int {
		list, err := cli.ContainerList(context.Background(), client.ContainerListOptions{All: true,
			Filters: client.Filters{}.Add("label", container.LabelWorkload+"="+workload)})
		if err != nil {
			t.Fatal(err)
		}
		return len(list.Items)
	}
	if n := count("ok"); n != 1 {
		t.Fatalf("ok has %d containers, want its one (kept while its workload is)", n)
	}
	ctx := context.Background()
	if _, err := f.etcd.Client.Delete(ctx, nodemanager.BindingKey("node-1", "team-a", "ok", 0)); err != nil {
		t.Fatal(err)
	}
	if _, err := f.etcd.Client.Delete(ctx, etcdstore.PrefixWorkloads+"team-a/ok"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "ok's container collected", func() bool { return count("ok") == 0 })
	if n := count("bad"); n != 1 {
		t.Errorf("bad has %d containers, want its one", n)
	}
}

// A strict time-slicing plan pauses the sharers' containers in turn (the
// engine's pause: the freezer cgroup of the whole container). Two minutes:
// one timed out on a loaded machine, likely on the first starts in the
// project's user namespace (which re-own the image on a fresh engine).
func TestRun_containerTimeSlicingPauses(t *testing.T) {
	e := podmantest.Start(t)
	f := newFixture(t)
	ctx := context.Background()
	pools := etcdstore.NewCollection(f.etcd.Client, etcdstore.PrefixNodePools, func() *quotav1.NodePool { return new(quotav1.NodePool) })
	if _, err := pools.Create(ctx, "default", &quotav1.NodePool{Name: "nodepools/default", TimeSlicing: &quotav1.TimeSlicing{
		Mode: quotav1.TimeSlicingMode_TIME_SLICING_MODE_STRICT, LeaseDuration: durationpb.New(500 * time.Millisecond), PrecisionPercent: 50}}); err != nil {
		t.Fatal(err)
	}
	f.run(t, onEngine(e.Host), func(c *agent.Config) { c.Pool = "default"; c.SampleInterval = 100 * time.Millisecond })
	for _, id := range []string{"a", "b"} {
		f.containerWorkload(t, id, 0, "sh", "-c", "while :; do :; done")
		f.bindShare(t, id, 1, 500)
	}
	cli, err := client.New(client.WithHost(e.Host))
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	paused := map[string]bool{}
	eventuallyWithin(t, 2*time.Minute, "each sharer's container paused in turn", func() bool {
		list, err := cli.ContainerList(ctx, client.ContainerListOptions{Filters: client.Filters{}.Add("label", container.LabelProject+"=team-a")})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range list.Items {
			if c.State == "paused" {
				paused[c.Labels[container.LabelWorkload]] = true
			}
		}
		return paused["a"] && paused["b"]
	})
}

// cdiSimulated is the simulated backend with NVIDIA's CDI names, as the
// NVML backend gives them.
type cdiSimulated struct{ *simulated.Backend }

func (cdiSimulated) CDIName(d gpu.DeviceInfo) string { return "nvidia.com/gpu=" + d.UUID }

// With a backend that has CDI names (NVML's), the pod's container asks the
// engine for its devices by those names: this engine has no NVIDIA CDI
// spec, so the start fails naming the device it was asked for.
func TestRun_containerGPUsByCDIName(t *testing.T) {
	e := podmantest.Start(t)
	f := newFixture(t)
	backend := cdiSimulated{simulated.New(simulated.Config{Count: 4, Node: "node-1"})}
	devs, err := backend.Devices()
	if err != nil {
		t.Fatal(err)
	}
	f.run(t, onEngine(e.Host), func(c *agent.Config) { c.Backend = backend })
	f.containerWorkload(t, "gpu", 0, "true")
	f.bind(t, "gpu")
	r := f.waitRun(t, "gpu", workloadv1.PodState_POD_STATE_FAILED)
	if want := "nvidia.com/gpu=" + devs[1].UUID; !strings.Contains(r.GetMessage(), want) {
		t.Errorf("the start failed with %q, want it to name %s", r.GetMessage(), want)
	}
}
