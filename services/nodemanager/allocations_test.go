package nodemanager_test

import (
	"testing"

	"google.golang.org/protobuf/proto"

	nodemanagerv1 "github.com/runwayhq/runway/gen/go/runway/nodemanager/v1"
	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/etcdstore"
	"github.com/runwayhq/runway/services/nodemanager"
)

// GetNode and ListNodes show what the bound pods hold: each device's
// allocations (a whole device, two halves sharing one) and the node's total.
func TestNode_allocationsFromBindings(t *testing.T) {
	e := start(t)
	e.startAgent(t, "node-1", nil)
	e.registered(t, "node-1")
	ctx := t.Context()
	workload := func(id string, spec *workloadv1.WorkloadSpec) {
		b, _ := proto.Marshal(&workloadv1.Workload{Name: "projects/team-a/workloads/" + id, Uid: "uid-" + id, Spec: spec})
		if _, err := e.etcd.Client.Put(ctx, etcdstore.PrefixWorkloads+"team-a/"+id, string(b)); err != nil {
			t.Fatal(err)
		}
	}
	bind := func(id string, pod int, fraction int32, devices ...int32) {
		b, _ := proto.Marshal(&workloadv1.PodStatus{Index: int32(pod), Node: "nodes/node-1", DeviceIndexes: devices, FractionMilli: fraction})
		if _, err := e.etcd.Client.Put(ctx, nodemanager.BindingKey("node-1", "team-a", id, pod), string(b)); err != nil {
			t.Fatal(err)
		}
	}
	workload("whole", &workloadv1.WorkloadSpec{MilliCpu: 500, MemoryBytes: 1 << 30,
		Gpu: &workloadv1.GpuRequest{Amount: &workloadv1.GpuRequest_Devices{Devices: 1}}})
	workload("half", &workloadv1.WorkloadSpec{MilliCpu: 250,
		Gpu: &workloadv1.GpuRequest{Amount: &workloadv1.GpuRequest_FractionMilli{FractionMilli: 500}}})
	bind("whole", 0, 1000, 0)
	bind("half", 0, 500, 1)
	bind("half", 1, 500, 1)

	n, err := e.client.GetNode(ctx, &nodemanagerv1.GetNodeRequest{Name: "nodes/node-1"})
	if err != nil {
		t.Fatal(err)
	}
	if a := n.GetAllocated(); a.GetMilliGpus() != 2000 || a.GetMilliCpu() != 1000 || a.GetMemoryBytes() != 1<<30 {
		t.Errorf("allocated %v, want 2 GPUs, 1 CPU, 1 GiB", a)
	}
	d0, d1 := n.GetDevices()[0], n.GetDevices()[1]
	if len(d0.GetAllocations()) != 1 || d0.GetAllocations()[0].GetWorkload() != "projects/team-a/workloads/whole" ||
		d0.GetAllocations()[0].GetGpuMemoryBytes() != d0.GetMemoryBytes() {
		t.Errorf("device 0 allocations %v", d0.GetAllocations())
	}
	if len(d1.GetAllocations()) != 2 || d1.GetAllocations()[1].GetPodIndex() != 1 ||
		d1.GetAllocations()[0].GetFractionMilli() != 500 || d1.GetAllocations()[0].GetGpuMemoryBytes() != d1.GetMemoryBytes()/2 {
		t.Errorf("device 1 allocations %v", d1.GetAllocations())
	}
	list, err := e.client.ListNodes(ctx, &nodemanagerv1.ListNodesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if got := list.GetNodes()[0]; !proto.Equal(got.GetAllocated(), n.GetAllocated()) || len(got.GetDevices()[1].GetAllocations()) != 2 {
		t.Errorf("ListNodes shows %v", got)
	}
}
