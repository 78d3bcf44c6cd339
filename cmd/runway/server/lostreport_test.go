package server_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	nodemanagerv1 "github.com/runwayhq/runway/gen/go/runway/nodemanager/v1"
	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/netcut"
	"github.com/runwayhq/runway/services/nodemanager/agent"
)

// etcd is out of the agent's reach while its pod ends: once it is back the
// final report is stored, the workload COMPLETES and its GPUs are free.
func TestLostReportCompletes(t *testing.T) {
	d, cli, dir, conn := startDevWithoutNodes(t)
	nodes := nodemanagerv1.NewNodeManagerServiceClient(conn)
	px, err := netcut.New(cli.Endpoints()[0])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(px.Close)
	acli, err := clientv3.New(clientv3.Config{Endpoints: []string{px.Addr}, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = acli.Close() })
	work, err := os.MkdirTemp("", "runway-lost-report-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(work) })
	if err := os.Chmod(work, 0o711); err != nil {
		t.Fatal(err)
	}
	runAgentWith(t, acli, dir, "node-1", func(c *agent.Config) { c.WorkDir = filepath.Join(work, "pods"); c.LeaseTTL = 10 * time.Second })

	d.project(t, "team-a", 2)
	const name = "projects/team-a/workloads/t1"
	w, err := d.workload.CreateWorkload(t.Context(), &workloadv1.CreateWorkloadRequest{
		Parent: "projects/team-a", WorkloadId: "t1", Workload: &workloadv1.Workload{
			Type: workloadv1.WorkloadType_WORKLOAD_TYPE_TRAINING,
			Spec: &workloadv1.WorkloadSpec{Image: "busybox", Command: []string{"sh", "-c", `while [ ! -e go ]; do sleep 0.05; done`},
				Gpu: &workloadv1.GpuRequest{Amount: &workloadv1.GpuRequest_Devices{Devices: 2}}}}})
	if err != nil {
		t.Fatal(err)
	}
	phase := func() workloadv1.WorkloadPhase {
		w, err := d.workload.GetWorkload(t.Context(), &workloadv1.GetWorkloadRequest{Name: name})
		if err != nil {
			t.Fatal(err)
		}
		return w.GetStatus().GetPhase()
	}
	pod := w.GetUid() + ".0"
	eventually(t, "t1 RUNNING", func() string {
		if p := phase(); p != running {
			return p.String()
		}
		if _, err := os.Stat(filepath.Join(work, "pods", pod)); err != nil {
			ents, _ := os.ReadDir(filepath.Join(work, "pods"))
			return fmt.Sprintf("%v (%v)", err, ents)
		}
		return ""
	})

	px.Cut()
	if err := os.WriteFile(filepath.Join(work, "pods", pod, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the pod's final state kept by the agent", func() string {
		if _, err := os.Stat(filepath.Join(dir, "nodes", "node-1", pod, "final")); err != nil {
			return err.Error()
		}
		return ""
	})
	time.Sleep(time.Second) // the report is retried, in vain
	if p := phase(); p != running {
		t.Fatalf("t1 is %v while its agent cannot report, want still RUNNING", p)
	}

	if err := px.Restore(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "t1 COMPLETED and its GPUs free", func() string {
		if p := phase(); p != workloadv1.WorkloadPhase_WORKLOAD_PHASE_COMPLETED {
			return p.String()
		}
		n, err := nodes.GetNode(t.Context(), &nodemanagerv1.GetNodeRequest{Name: "nodes/node-1"})
		if err != nil {
			return err.Error()
		}
		for _, dev := range n.GetDevices() {
			if len(dev.GetAllocations()) > 0 {
				return fmt.Sprintf("GPU %d still held: %v", dev.GetIndex(), dev.GetAllocations())
			}
		}
		return ""
	})
}
