package kube_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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

	e.training(t, "team-f", "w1", 1, 1)
	w1 := e.bound(t, "w1", 1)[0]
	eventually(t, "w1's pod given a device", func() string {
		p, err := e.kube.CoreV1().Pods(w1.Namespace).Get(t.Context(), w1.Name, metav1.GetOptions{})
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
