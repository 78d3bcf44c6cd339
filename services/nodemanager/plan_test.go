package nodemanager_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	nodemanagerv1 "github.com/runwayhq/runway/gen/go/runway/nodemanager/v1"
	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/etcdstore"
	"github.com/runwayhq/runway/pkg/runner/local"
	"github.com/runwayhq/runway/services/nodemanager"
	"github.com/runwayhq/runway/services/nodemanager/agent"
)

// Two fractional pods on one GPU of a STRICT pool: the agent computes and
// enforces the plan (a pod's processes are seen stopped), GetTimeSlicePlan
// and GetNode show it with the allocations, and turning time slicing off in
// the pool empties the plan.
func TestTimeSlicePlan_fromPoolSettings(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	pools := etcdstore.NewCollection(e.etcd.Client, etcdstore.PrefixNodePools, func() *quotav1.NodePool { return new(quotav1.NodePool) })
	pool := &quotav1.NodePool{Name: "nodepools/default", TimeSlicing: &quotav1.TimeSlicing{
		Mode: quotav1.TimeSlicingMode_TIME_SLICING_MODE_STRICT, LeaseDuration: durationpb.New(50 * time.Millisecond), PrecisionPercent: 5}}
	if _, err := pools.Create(ctx, "default", pool); err != nil {
		t.Fatal(err)
	}
	dataDir := t.TempDir()
	e.startAgent(t, "node-1", nil, func(c *agent.Config) { c.DataDir = dataDir; c.SampleInterval = 50 * time.Millisecond })
	e.registered(t, "node-1")
	workloads := etcdstore.NewCollection(e.etcd.Client, etcdstore.PrefixWorkloads, func() *workloadv1.Workload { return new(workloadv1.Workload) })
	for _, w := range []struct {
		id    string
		milli int32
	}{{"small", 250}, {"large", 750}} {
		if _, err := workloads.Create(ctx, "team-a/"+w.id, &workloadv1.Workload{Name: "projects/team-a/workloads/" + w.id, Uid: "uid-" + w.id,
			Spec: &workloadv1.WorkloadSpec{Command: []string{"sh", "-c", "while :; do :; done"}}}); err != nil {
			t.Fatal(err)
		}
		v, _ := proto.Marshal(&workloadv1.PodStatus{Node: "nodes/node-1", DeviceIndexes: []int32{1}, FractionMilli: w.milli,
			State: workloadv1.PodState_POD_STATE_BOUND})
		if _, err := e.etcd.Client.Put(ctx, nodemanager.BindingKey("node-1", "team-a", w.id, 0), string(v)); err != nil {
			t.Fatal(err)
		}
	}

	get := func() *nodemanagerv1.TimeSlicePlan {
		p, err := e.client.GetTimeSlicePlan(ctx, &nodemanagerv1.GetTimeSlicePlanRequest{Name: "nodes/node-1/timeSlicePlan"})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	var plan *nodemanagerv1.TimeSlicePlan
	eventually(t, "a plan with both pods", func() bool {
		plan = get()
		return len(plan.GetDevices()) == 1 && len(plan.GetDevices()[0].GetSlots()) == 2
	})
	d := plan.GetDevices()[0]
	if d.GetDeviceIndex() != 1 || d.GetMode() != quotav1.TimeSlicingMode_TIME_SLICING_MODE_STRICT ||
		d.GetLeaseDuration().AsDuration() != 50*time.Millisecond || d.GetPrecisionPercent() != 5 ||
		d.GetPlanDuration().AsDuration() != time.Second {
		t.Errorf("device plan = %v, want device 1, STRICT, 50ms leases at 5%%: a 1s plan", d)
	}
	want := []struct {
		workload         string
		share            int32
		offset, duration time.Duration
	}{ // ordered by pod id: uid-large.0 before uid-small.0
		{"projects/team-a/workloads/large", 75, 0, 750 * time.Millisecond},
		{"projects/team-a/workloads/small", 25, 750 * time.Millisecond, 250 * time.Millisecond},
	}
	for i, s := range d.GetSlots() {
		if s.GetWorkload() != want[i].workload || s.GetSharePercent() != want[i].share ||
			s.GetOffset().AsDuration() != want[i].offset || s.GetDuration().AsDuration() != want[i].duration {
			t.Errorf("slot %d = %v, want %+v", i, s, want[i])
		}
	}
	if plan.GetRevision() == 0 || plan.GetEtag() != strconv.FormatInt(plan.GetRevision(), 10) {
		t.Errorf("plan revision %d etag %q, want a stored revision", plan.GetRevision(), plan.GetEtag())
	}

	n, err := e.client.GetNode(ctx, &nodemanagerv1.GetNodeRequest{Name: "nodes/node-1"})
	if err != nil {
		t.Fatal(err)
	}
	gpu1 := n.GetDevices()[1]
	if !proto.Equal(gpu1.GetTimeSlicePlan(), d) || len(gpu1.GetAllocations()) != 2 ||
		gpu1.GetAllocations()[1].GetWorkload() != "projects/team-a/workloads/small" || gpu1.GetAllocations()[1].GetFractionMilli() != 250 ||
		gpu1.GetAllocations()[1].GetGpuMemoryBytes() != 20<<30 {
		t.Errorf("GetNode device 1 = %v, want the plan and both allocations", gpu1)
	}
	if n.GetDevices()[0].GetTimeSlicePlan() != nil || len(n.GetDevices()[0].GetAllocations()) != 0 {
		t.Errorf("GetNode device 0 = %v, want unused", n.GetDevices()[0])
	}

	// Enforced: the small pod is seen stopped (outside its leases): its
	// cgroup frozen, or its process stopped where it has no cgroup.
	pid := podPid(t, filepath.Join(local.DefaultWorkDir(dataDir), "uid-small.0"))
	stopped := func() bool {
		if cg, err := os.ReadFile("/proc/" + pid + "/cgroup"); err == nil {
			for line := range strings.Lines(string(cg)) {
				if rel, ok := strings.CutPrefix(strings.TrimSpace(line), "0::"); ok && rel != "/" {
					for _, mnt := range []string{"/sys/fs/cgroup", "/sys/fs/cgroup/unified"} {
						if ev, err := os.ReadFile(mnt + rel + "/cgroup.events"); err == nil {
							return strings.Contains(string(ev), "frozen 1")
						}
					}
				}
			}
		}
		b, err := os.ReadFile("/proc/" + pid + "/stat")
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		return err == nil && i > 0 && i+2 < len(s) && s[i+2] == 'T'
	}
	eventually(t, "the small pod stopped by the plan", stopped)

	pool.TimeSlicing.Mode = quotav1.TimeSlicingMode_TIME_SLICING_MODE_OFF
	if _, err := pools.Update(ctx, "default", pool, ""); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the plan to empty once time slicing is off", func() bool {
		p := get()
		return len(p.GetDevices()) == 0 && p.GetRevision() > plan.GetRevision()
	})
	eventually(t, "the small pod continued", func() bool { return !stopped() })
	time.Sleep(200 * time.Millisecond) // four lease boundaries of the old plan
	if stopped() {
		t.Error("the small pod is stopped with time slicing off")
	}
}

// podPid is the pid of a process working in the pod directory dir (the
// pod's leader, a shell looping).
func podPid(t *testing.T, dir string) string {
	t.Helper()
	var pid string
	eventually(t, "a process in "+dir, func() bool {
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			if cwd, err := os.Readlink(filepath.Join("/proc", e.Name(), "cwd")); err == nil && cwd == dir {
				pid = e.Name()
				return true
			}
		}
		return false
	})
	return pid
}
