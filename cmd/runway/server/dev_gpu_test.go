package server_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/runwayhq/runway/cmd/runway/server"
	nodemanagerv1 "github.com/runwayhq/runway/gen/go/runway/nodemanager/v1"
	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
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
