package server_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/runwayhq/runway/cmd/runway/server"
	nodemanagerv1 "github.com/runwayhq/runway/gen/go/runway/nodemanager/v1"
	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/gpu"
	"github.com/runwayhq/runway/pkg/gpu/simulated"
)

// `runway dev --time-slicing fair`: the default pool is FAIR, two half-GPU
// workloads the scheduler packs on one simulated GPU get a FAIR plan of 50%
// each that GetTimeSlicePlan shows, and the agents' GPU series are on the
// server's operations listener (/metrics), not on the API's.
func TestDevTimeSlicingAndMetrics(t *testing.T) {
	addrs := make(chan string, 1)
	d := startDev(t, t.TempDir(), 1, 1, func(c *server.DevConfig) { c.TimeSlicing = "fair" }, withMetrics(addrs))
	maddr := <-addrs
	resp, err := plainHTTP.Get("http://" + d.addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /metrics on the API listener: %d, want 404", resp.StatusCode)
	}
	p, err := d.quota.GetNodePool(t.Context(), &quotav1.GetNodePoolRequest{Name: "nodepools/default"})
	if err != nil {
		t.Fatal(err)
	}
	if p.GetTimeSlicing().GetMode() != quotav1.TimeSlicingMode_TIME_SLICING_MODE_FAIR {
		t.Fatalf("default pool time slicing = %v, want FAIR", p.GetTimeSlicing())
	}
	d.project(t, "team-a", 1)
	for _, id := range []string{"half-1", "half-2"} {
		_, err := d.workload.CreateWorkload(t.Context(), &workloadv1.CreateWorkloadRequest{
			Parent: "projects/team-a", WorkloadId: id, Workload: &workloadv1.Workload{
				Type: workloadv1.WorkloadType_WORKLOAD_TYPE_TRAINING,
				Spec: &workloadv1.WorkloadSpec{Image: "busybox", Command: []string{"sleep", "30"},
					Gpu: &workloadv1.GpuRequest{Amount: &workloadv1.GpuRequest_FractionMilli{FractionMilli: 500}}}}})
		if err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "a fair plan of both workloads", func() string {
		plan, err := d.nodes.GetTimeSlicePlan(t.Context(), &nodemanagerv1.GetTimeSlicePlanRequest{Name: "nodes/node-1/timeSlicePlan"})
		if err != nil {
			return err.Error()
		}
		if len(plan.GetDevices()) != 1 || len(plan.GetDevices()[0].GetSlots()) != 2 {
			return plan.String()
		}
		dp := plan.GetDevices()[0]
		if dp.GetMode() != quotav1.TimeSlicingMode_TIME_SLICING_MODE_FAIR || dp.GetSlots()[0].GetSharePercent() != 50 ||
			dp.GetSlots()[1].GetSharePercent() != 50 || dp.GetPlanDuration().AsDuration().Seconds() != 5 {
			return "plan " + dp.String()
		}
		return ""
	})
	eventually(t, "the GPU series on /metrics", func() string {
		resp, err := plainHTTP.Get("http://" + maddr + "/metrics")
		if err != nil {
			return err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		for _, want := range []string{
			`runway_gpu_utilization{device="0",node="node-1",pod="0",project="team-a",workload="half-1"}`,
			`runway_gpu_memory_used_bytes{device="0",node="node-1",pod="0",project="team-a",workload="half-2"} 0`,
			`runway_gpu_idle_seconds_per_workload{device="0",node="node-1",pod="0",project="team-a",workload="half-1"} 0`,
		} {
			if !strings.Contains(string(b), want) {
				return "no " + want
			}
		}
		return ""
	})
}

// An XID injected into a simulated GPU makes the device unhealthy in its
// node (GetNode), the scheduler places nothing on it, and a workload that
// needs it waits with a reason that names it.
func TestDevUnhealthyDevice(t *testing.T) {
	var sim *simulated.Backend
	d := startDev(t, t.TempDir(), 1, 2, func(c *server.DevConfig) {
		c.Backend = func(node string) gpu.Backend {
			sim = simulated.New(simulated.Config{Count: 2, Node: node})
			return sim
		}
	})
	d.project(t, "team-a", 2)
	if !sim.InjectXID(1, 79) {
		t.Fatal("XID 79 not injected")
	}
	eventually(t, "GPU 1 of node-1 unhealthy", func() string {
		n, err := d.nodes.GetNode(t.Context(), &nodemanagerv1.GetNodeRequest{Name: "nodes/node-1"})
		if err != nil {
			return err.Error()
		}
		if dev := n.GetDevices()[1]; dev.GetHealthy() || dev.GetHealthMessage() != "XID 79: GPU has fallen off the bus" || !n.GetDevices()[0].GetHealthy() {
			return n.String()
		}
		return ""
	})
	_, err := d.workload.CreateWorkload(t.Context(), &workloadv1.CreateWorkloadRequest{
		Parent: "projects/team-a", WorkloadId: "two", Workload: &workloadv1.Workload{
			Type: workloadv1.WorkloadType_WORKLOAD_TYPE_TRAINING,
			Spec: &workloadv1.WorkloadSpec{Image: "busybox", Command: []string{"sleep", "30"},
				Gpu: &workloadv1.GpuRequest{Amount: &workloadv1.GpuRequest_Devices{Devices: 2}}}}})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the two-GPU workload's reason names the unhealthy device", func() string {
		w, err := d.workload.GetWorkload(t.Context(), &workloadv1.GetWorkloadRequest{Name: "projects/team-a/workloads/two"})
		if err != nil {
			return err.Error()
		}
		for _, r := range w.GetStatus().GetPendingReasons() {
			if strings.Contains(r.GetMessage(), "node-1 GPU 1 (XID 79: GPU has fallen off the bus)") {
				return ""
			}
		}
		return fmt.Sprintf("phase %v, pending reasons %v", w.GetStatus().GetPhase(), w.GetStatus().GetPendingReasons())
	})
	// One GPU still fits, on the healthy device.
	_, err = d.workload.CreateWorkload(t.Context(), &workloadv1.CreateWorkloadRequest{
		Parent: "projects/team-a", WorkloadId: "one", Workload: &workloadv1.Workload{
			Type: workloadv1.WorkloadType_WORKLOAD_TYPE_TRAINING,
			Spec: &workloadv1.WorkloadSpec{Image: "busybox", Command: []string{"sleep", "30"},
				Gpu: &workloadv1.GpuRequest{Amount: &workloadv1.GpuRequest_Devices{Devices: 1}}}}})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the one-GPU workload on GPU 0", func() string {
		w, err := d.workload.GetWorkload(t.Context(), &workloadv1.GetWorkloadRequest{Name: "projects/team-a/workloads/one"})
		if err != nil {
			return err.Error()
		}
		if p := w.GetStatus().GetPods(); len(p) != 1 || len(p[0].GetDeviceIndexes()) != 1 || p[0].GetDeviceIndexes()[0] != 0 {
			return fmt.Sprintf("pods %v", p)
		}
		return ""
	})
}
