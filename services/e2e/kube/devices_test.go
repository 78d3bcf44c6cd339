package kube_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/fieldmaskpb"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/services/nodemanager/kube"
	"github.com/runwayhq/runway/services/nodemanager/kube/kwoktest"
)

// fraction submits a one-pod training holding milli thousandths of a GPU.
func (e *env) fraction(t *testing.T, project, id string, milli int32) {
	t.Helper()
	_, err := e.rw.SubmitWorkload(t.Context(), project, id, workloadv1.WorkloadType_WORKLOAD_TYPE_TRAINING,
		&workloadv1.WorkloadSpec{Image: "busybox", Command: []string{"sleep", "3600"}, Pods: 1,
			MilliCpu: 100, MemoryBytes: 100 << 20,
			Gpu: &workloadv1.GpuRequest{Amount: &workloadv1.GpuRequest_FractionMilli{FractionMilli: milli}}})
	if err != nil {
		t.Fatalf("CreateWorkload(%s/%s): %v", project, id, err)
	}
	e.projectOf[id] = project
}

// reservations lists the live reservation pods in Runway's namespace.
func (e *env) reservations(t *testing.T) []corev1.Pod {
	t.Helper()
	l, err := e.kube.CoreV1().Pods(e.ns).List(t.Context(), metav1.ListOptions{LabelSelector: kube.LabelReservation})
	if err != nil {
		t.Fatal(err)
	}
	return l.Items
}

// waiting waits until the scheduler has considered the workload and left
// it waiting (pending reasons), and checks that it has no pod.
func (e *env) waiting(t *testing.T, project, id, why string) {
	t.Helper()
	eventually(t, id+" waiting: "+why, func() string {
		w := e.get(t, project, id)
		for _, r := range w.GetStatus().GetPendingReasons() {
			if r.GetCheck() != workloadv1.PendingCheck_PENDING_CHECK_NOT_YET_CONSIDERED {
				return ""
			}
		}
		return fmt.Sprintf("%s %v", id, w.GetStatus())
	})
	if live, _ := e.pods(t, id); len(live) != 0 {
		t.Fatalf("%s has pod %s on %s, but %s", id, live[0].Name, live[0].Spec.NodeName, why)
	}
}

// wholeGPUElsewhere submits a one-GPU training and checks that the device
// plugin gives its pod a GPU other than the fractions' (uuid).
func (e *env) wholeGPUElsewhere(t *testing.T, project, id, uuid string) {
	t.Helper()
	e.training(t, project, id, 1, 1)
	w := e.bound(t, id, 1)[0]
	eventually(t, id+"'s pod given a device", func() string {
		p, err := e.kube.CoreV1().Pods(w.Namespace).Get(t.Context(), w.Name, metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		got := p.Annotations[kube.AnnotationGPUUUID]
		if got == "" {
			return "no device yet"
		}
		if got == uuid {
			t.Fatalf("the whole-GPU pod %s got the fractions' GPU %s", p.Name, uuid)
		}
		return ""
	})
}

// TestFractionsShareAReservation: two 0.5 fractions on one GPU of a 2-GPU
// node share one reservation pod, which the device plugin (the test's
// stand-in) gave a physical GPU, and both get that GPU's UUID; a whole-GPU
// pod gets the other GPU, never that one, and a second whole-GPU pod does
// not fit. The reservation lives as long as a fraction uses its GPU.
func TestFractionsShareAReservation(t *testing.T) {
	e := newEnv(t, "frac")
	plugin, err := cluster.StartDevicePlugin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	e.node(t, "frac-node-1", 2)
	e.start(t)
	e.project(t, "team-f", 2)

	e.fraction(t, "team-f", "f1", 500)
	e.fraction(t, "team-f", "f2", 500)
	f1, f2 := e.bound(t, "f1", 1)[0], e.bound(t, "f2", 1)[0]
	res := e.reservations(t)
	if len(res) != 1 {
		t.Fatalf("%d reservation pods, want 1: %v", len(res), res)
	}
	r := res[0]
	uuid := r.Annotations[kube.AnnotationGPUUUID]
	if r.Spec.NodeName != "frac-node-1" || !strings.HasPrefix(uuid, "GPU-frac-node-1-") ||
		r.Spec.Containers[0].Resources.Limits.Name(kube.ResourceGPU, "").Value() != 1 {
		t.Fatalf("reservation pod %s on %q, uuid %q, limits %v", r.Name, r.Spec.NodeName, uuid, r.Spec.Containers[0].Resources.Limits)
	}
	// A reservation reports UUIDs only, never an index.
	for _, bad := range []string{"0", "all", "", "GPU-a,1"} {
		if err := kube.ReportGPU(t.Context(), e.kube, e.ns, r.Name, bad); err == nil {
			t.Errorf("ReportGPU(%q) accepted", bad)
		}
	}
	for _, p := range []corev1.Pod{f1, f2} {
		if got := envVar(p, "NVIDIA_VISIBLE_DEVICES"); got != uuid {
			t.Errorf("%s's NVIDIA_VISIBLE_DEVICES = %q, want the reservation's %q", p.Name, got, uuid)
		}
		if _, ok := p.Spec.Containers[0].Resources.Limits[kube.ResourceGPU]; ok {
			t.Errorf("fraction pod %s requests %s", p.Name, kube.ResourceGPU)
		}
	}
	e.podRunning(t, "team-f", "f1")

	e.wholeGPUElsewhere(t, "team-f", "w1", uuid)
	e.training(t, "team-f", "w2", 1, 1)
	e.waiting(t, "team-f", "w2", "both GPUs are taken")

	// The reservation stays while f2 uses the GPU, and goes with it.
	if err := e.rw.DeleteWorkload(t.Context(), "team-f", "f1"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "f1's pod gone", func() string {
		if live, deleting := e.pods(t, "f1"); len(live)+len(deleting) != 0 {
			return fmt.Sprintf("%d pods", len(live)+len(deleting))
		}
		return ""
	})
	time.Sleep(500 * time.Millisecond)
	if res := e.reservations(t); len(res) != 1 || res[0].UID != r.UID || res[0].DeletionTimestamp != nil {
		t.Fatalf("the reservation did not outlive f1 while f2 uses its GPU: %v", res)
	}
	if err := e.rw.DeleteWorkload(t.Context(), "team-f", "f2"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the reservation gone with the last fraction", func() string {
		if res := e.reservations(t); len(res) != 0 {
			return fmt.Sprintf("%d reservation pods", len(res))
		}
		return ""
	})
	// Its GPU is free again: w2 takes it.
	e.bound(t, "w2", 1)
	if r := plugin.Refused(); len(r) != 0 {
		t.Errorf("the kubelet would have refused %v", r)
	}
}

// TestTaintsAndCordon: a node tainted NoSchedule gets no pod of Runway's
// (which tolerate nothing here); a cordoned node keeps its running pods
// and takes no new one; a runai=drain:NoExecute taint evicts the node's
// pods, which go back to Pending.
func TestTaintsAndCordon(t *testing.T) {
	e := newEnv(t, "taint")
	e.nodes(t, kwoktest.Node{Name: "taint-node-0", GPUs: 2}, kwoktest.Node{Name: "taint-node-1", GPUs: 2},
		kwoktest.Node{Name: "taint-node-2", GPUs: 2, Taints: []corev1.Taint{{Key: "dedicated", Value: "other", Effect: corev1.TaintEffectNoSchedule}}})
	e.start(t)
	e.project(t, "team-t", 6)

	e.training(t, "team-t", "big1", 1, 2)
	e.training(t, "team-t", "big2", 1, 2)
	b1, b2 := e.bound(t, "big1", 1)[0], e.bound(t, "big2", 1)[0]
	if b1.Spec.NodeName == "taint-node-2" || b2.Spec.NodeName == "taint-node-2" {
		t.Fatalf("a pod on the tainted node: %s on %s, %s on %s", b1.Name, b1.Spec.NodeName, b2.Name, b2.Spec.NodeName)
	}
	e.training(t, "team-t", "big3", 1, 2)
	e.waiting(t, "team-t", "big3", "the only free node is tainted")
	e.podRunning(t, "team-t", "big1")

	// Cordon: a drain without eviction.
	if err := cluster.Cordon(t.Context(), b1.Spec.NodeName); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the cordoned node drained in Runway", func() string {
		n, err := e.rw.GetNode(t.Context(), b1.Spec.NodeName)
		if err != nil {
			return err.Error()
		}
		if !n.GetDrained() || n.GetDrainEvicts() {
			return fmt.Sprintf("drained %v evicts %v", n.GetDrained(), n.GetDrainEvicts())
		}
		return ""
	})
	time.Sleep(time.Second)
	if live, deleting := e.pods(t, "big1"); len(live) != 1 || live[0].UID != b1.UID || len(deleting) != 0 {
		t.Fatalf("big1's pod on the cordoned node: live %d, deleting %d; want it running on", len(live), len(deleting))
	}

	// runai=drain:NoExecute: a drain with eviction.
	if err := cluster.Taint(t.Context(), b2.Spec.NodeName, corev1.Taint{Key: "runai", Value: "drain", Effect: corev1.TaintEffectNoExecute}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "big2 evicted from the NoExecute node", func() string {
		if live, _ := e.pods(t, "big2"); len(live) != 0 {
			return fmt.Sprintf("%d live pods", len(live))
		}
		w := e.get(t, "team-t", "big2")
		if w.GetStatus().GetPhase() != pending {
			return fmt.Sprintf("big2 %v", w.GetStatus().GetPhase())
		}
		return ""
	})
	if live, _ := e.pods(t, "big1"); len(live) != 1 || live[0].UID != b1.UID {
		t.Errorf("big1's pod on the cordoned node was not kept: %v", live)
	}
}

// TestTolerationsPerPool: two node pools, each with a node tainted
// dedicated=gpu:NoSchedule; tol-a tolerates the taint, tol-b does not.
// Runway's pods in tol-a go to its tainted node and tolerate what the
// runtime tolerates everywhere plus tol-a's toleration, nothing more;
// tol-b's node is drained (without eviction) and a training for tol-b gets
// no pod.
func TestTolerationsPerPool(t *testing.T) {
	e := newEnv(t, "tol")
	e.tolerate = []string{"runway.test/global:NoExecute"}
	e.start(t)
	const label = "runway.test/pool"
	for pool, ts := range map[string][]*quotav1.Toleration{
		"tol-a": {{Key: "dedicated", Value: "gpu", Effect: quotav1.TaintEffect_TAINT_EFFECT_NO_SCHEDULE}},
		"tol-b": nil,
	} {
		if _, err := e.rw.QuotaService.CreateNodePool(t.Context(), &quotav1.CreateNodePoolRequest{NodePoolId: pool,
			NodePool: &quotav1.NodePool{NodeSelector: map[string]string{label: pool}, Tolerations: ts}}); err != nil {
			t.Fatal(err)
		}
	}
	taint := []corev1.Taint{{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}}
	e.nodes(t, kwoktest.Node{Name: "tol-node-a", GPUs: 2, Labels: map[string]string{label: "tol-a"}, Taints: taint},
		kwoktest.Node{Name: "tol-node-b", GPUs: 2, Labels: map[string]string{label: "tol-b"}, Taints: taint})
	two := int64(2000)
	if _, err := e.rw.CreateProject(t.Context(), "team-tol", &quotav1.Project{NodePoolQuotas: []*quotav1.NodePoolQuota{
		{NodePool: "nodepools/tol-a", Gpu: &quotav1.GpuQuota{DeservedMilliGpus: &two}},
		{NodePool: "nodepools/tol-b", Gpu: &quotav1.GpuQuota{DeservedMilliGpus: &two}}}}); err != nil {
		t.Fatal(err)
	}
	e.projects = append(e.projects, "team-tol")
	eventually(t, "tol-node-b drained for its taint, tol-node-a not", func() string {
		a, err := e.rw.GetNode(t.Context(), "tol-node-a")
		if err != nil {
			return err.Error()
		}
		b, err := e.rw.GetNode(t.Context(), "tol-node-b")
		if err != nil {
			return err.Error()
		}
		if a.GetNodePool() != "nodepools/tol-a" || a.GetDrained() || b.GetNodePool() != "nodepools/tol-b" || !b.GetDrained() ||
			b.GetDrainEvicts() || !strings.Contains(b.GetDrainReason(), "dedicated=gpu:NoSchedule") {
			return fmt.Sprintf("tol-node-a %s drained %v; tol-node-b %s drained %v evicts %v (%s)", a.GetNodePool(), a.GetDrained(),
				b.GetNodePool(), b.GetDrained(), b.GetDrainEvicts(), b.GetDrainReason())
		}
		return ""
	})
	submit := func(id, pool string) {
		t.Helper()
		_, err := e.rw.SubmitWorkload(t.Context(), "team-tol", id, workloadv1.WorkloadType_WORKLOAD_TYPE_TRAINING,
			&workloadv1.WorkloadSpec{Image: "busybox", Command: []string{"sleep", "3600"}, Pods: 1, NodePools: []string{pool},
				Gpu: &workloadv1.GpuRequest{Amount: &workloadv1.GpuRequest_Devices{Devices: 2}}})
		if err != nil {
			t.Fatalf("CreateWorkload(%s): %v", id, err)
		}
		e.projectOf[id] = "team-tol"
	}
	submit("ta", "nodepools/tol-a")
	pa := e.bound(t, "ta", 1)[0]
	want := []corev1.Toleration{{Key: "runway.test/global", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
		{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "gpu", Effect: corev1.TaintEffectNoSchedule}}
	// The apiserver's DefaultTolerationSeconds admission adds its own
	// node.kubernetes.io/not-ready and unreachable tolerations.
	got := slices.DeleteFunc(slices.Clone(pa.Spec.Tolerations), func(t corev1.Toleration) bool {
		return strings.HasPrefix(t.Key, "node.kubernetes.io/")
	})
	if pa.Spec.NodeName != "tol-node-a" || !slices.Equal(got, want) {
		t.Fatalf("ta's pod on %q tolerates %v; want it on tol-node-a tolerating %v", pa.Spec.NodeName, pa.Spec.Tolerations, want)
	}
	e.podRunning(t, "team-tol", "ta")
	submit("tb", "nodepools/tol-b")
	e.waiting(t, "team-tol", "tb", "tol-b's only node has a taint tol-b does not tolerate")

	// Once tol-b tolerates the taint too, its node is undrained and tb
	// placed there.
	if _, err := e.rw.QuotaService.UpdateNodePool(t.Context(), &quotav1.UpdateNodePoolRequest{NodePool: &quotav1.NodePool{
		Name: "nodepools/tol-b", Tolerations: []*quotav1.Toleration{{Key: "dedicated"}}},
		UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"tolerations"}}}); err != nil {
		t.Fatal(err)
	}
	if pb := e.bound(t, "tb", 1)[0]; pb.Spec.NodeName != "tol-node-b" {
		t.Fatalf("tb's pod on %q, want tol-node-b", pb.Spec.NodeName)
	}
}
