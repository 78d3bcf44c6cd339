package kube_test

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/etcdstore"
	"github.com/runwayhq/runway/pkg/sdk"
	"github.com/runwayhq/runway/services/nodemanager/kube"
)

// TestMovedOnItsNode: consolidation moves a pod to other devices of its
// node by rewriting its binding in place (same key, same creation
// revision). The pod on the old devices must go and be made again on the
// new ones; left running, it would hold devices the scheduler has given
// away.
func TestMovedOnItsNode(t *testing.T) {
	e := newEnv(t, "move")
	e.node(t, "move-node-1", 2)
	e.start(t)
	e.project(t, "team-b", 2)
	etcd, err := clientv3.New(clientv3.Config{Endpoints: []string{"unix://" + filepath.Join(e.dir, "etcd", "client.sock")},
		DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = etcd.Close() })

	e.training(t, "team-b", "m", 1, 1)
	old := e.bound(t, "m", 1)[0]
	from := old.Annotations[kube.AnnotationDevices]
	to := map[string]int32{"0": 1, "1": 0}[from]
	key := etcdstore.PrefixBindings + kube.NodeID("move-node-1") + "/team-b.m.0"
	resp, err := etcd.Get(t.Context(), key)
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("binding %s: %v, %v", key, resp, err)
	}
	ps := new(workloadv1.PodStatus)
	if err := proto.Unmarshal(resp.Kvs[0].Value, ps); err != nil {
		t.Fatal(err)
	}
	ps.DeviceIndexes = []int32{to}
	if _, err := etcdstore.NewBatch(etcd).PutIf(key, ps, resp.Kvs[0].ModRevision).Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	eventually(t, fmt.Sprintf("m's pod made again on device %d", to), func() string {
		live, deleting := e.pods(t, "m")
		for _, p := range append(live, deleting...) {
			if p.UID == old.UID {
				return "the pod on device " + from + " is still there"
			}
		}
		if len(live) != 1 || live[0].Annotations[kube.AnnotationDevices] != fmt.Sprint(to) {
			return "no pod on the new device yet"
		}
		return ""
	})
}

// TestPodLabels: a workload's labels are on its pods, beside Runway's own,
// which they cannot shadow.
func TestPodLabels(t *testing.T) {
	e := newEnv(t, "labels")
	e.node(t, "labels-node-1", 1)
	e.start(t)
	e.project(t, "team-b", 1)
	if _, err := e.rw.SubmitWorkloadFrom(t.Context(), "team-b", "l", &workloadv1.Workload{Type: workloadv1.WorkloadType_WORKLOAD_TYPE_TRAINING,
		Spec: &workloadv1.WorkloadSpec{Image: "busybox", Command: []string{"sleep", "3600"}, MilliCpu: 100, MemoryBytes: 100 << 20,
			Gpu: &workloadv1.GpuRequest{Amount: &workloadv1.GpuRequest_Devices{Devices: 1}}},
		Labels: map[string]string{"team": "vision", "example.com/stage": "test"}}, sdk.Assets{}); err != nil {
		t.Fatal(err)
	}
	e.projectOf["l"] = "team-b"
	p := e.bound(t, "l", 1)[0]
	if p.Labels["team"] != "vision" || p.Labels["example.com/stage"] != "test" || p.Labels[kube.LabelWorkload] != "l" {
		t.Errorf("pod labels %v, want the workload's and Runway's", p.Labels)
	}
}
