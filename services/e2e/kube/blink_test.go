package kube_test

import (
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	nodemanagerv1 "github.com/runwayhq/runway/gen/go/runway/nodemanager/v1"
	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/etcdstore"
	"github.com/runwayhq/runway/services/nodemanager/kube"
)

// TestNodeBlinks: a node NotReady for 30 s, tainted as the node lifecycle
// controller does, keeps its pod and its binding for the Kubernetes
// runtime's default grace (5 min, Kubernetes' not-ready toleration, which
// the pod carries) and takes nothing new; Ready again, the same pod runs
// on, with no NODE_LOST. A second spell outlasts the grace (the
// scheduler's clock is the test's, run past the 5 min): the pod goes, with a
// NODE_LOST event, and runs again on the other node.
func TestNodeBlinks(t *testing.T) {
	const spell = 30 * time.Second
	e := newEnv(t, "blink")
	var skew atomic.Int64
	e.clock = func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
	e.node(t, "blink-node-1", 2)
	e.node(t, "blink-node-2", 2)
	e.start(t)
	e.project(t, "team-b", 4)
	etcd := e.etcdClient(t)
	bindingsOn := func(node string) int {
		resp, err := etcd.Get(t.Context(), etcdstore.PrefixBindings+kube.NodeID(node)+"/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
		if err != nil {
			t.Fatal(err)
		}
		return len(resp.Kvs)
	}
	nodeLost := func(w string) int {
		n := 0
		for _, ev := range e.get(t, "team-b", w).GetStatus().GetEvents() {
			if ev.GetRule() == workloadv1.SchedulingRule_SCHEDULING_RULE_NODE_LOST {
				n++
			}
		}
		return n
	}

	e.training(t, "team-b", "train", 1, 2)
	pod := e.bound(t, "train", 1)[0]
	blinking, other := pod.Spec.NodeName, "blink-node-1"
	if blinking == other {
		other = "blink-node-2"
	}
	if !slices.ContainsFunc(pod.Spec.Tolerations, func(tol corev1.Toleration) bool {
		return tol.Key == corev1.TaintNodeNotReady && tol.Effect == corev1.TaintEffectNoExecute &&
			tol.TolerationSeconds != nil && *tol.TolerationSeconds == 300
	}) {
		t.Errorf("the pod's tolerations %v: want %s:NoExecute for 300 s", pod.Spec.Tolerations, corev1.TaintNodeNotReady)
	}
	notReadyTaint := corev1.Taint{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoExecute}
	goNotReady := func() {
		t.Helper()
		e.notReady(t, blinking)
		if err := cluster.Taint(t.Context(), blinking, notReadyTaint); err != nil {
			t.Fatal(err)
		}
		eventually(t, blinking+" NotReady in Runway, not drained", func() string {
			n, err := e.rw.GetNode(t.Context(), blinking)
			if err != nil {
				return err.Error()
			}
			if n.GetReadiness() != nodemanagerv1.Readiness_READINESS_NOT_READY || n.GetDrained() {
				return fmt.Sprintf("readiness %v, drained %v (%s)", n.GetReadiness(), n.GetDrained(), n.GetDrainReason())
			}
			return ""
		})
	}
	untouched := func(when string) {
		t.Helper()
		live, deleting := e.pods(t, "train")
		if len(live) != 1 || len(deleting) != 0 || live[0].UID != pod.UID || live[0].Spec.NodeName != blinking {
			t.Fatalf("%s: live pods %v, deleting %v; want %s (%s) alone on %s", when, names(live), names(deleting), pod.Name, pod.UID, blinking)
		}
		if n := bindingsOn(blinking); n != 1 {
			t.Fatalf("%s: %d bindings on %s, want its 1", when, n, blinking)
		}
		if n := nodeLost("train"); n != 0 {
			t.Fatalf("%s: %d NODE_LOST events", when, n)
		}
	}

	goNotReady()
	// Something new while it is NotReady goes to the other node only.
	e.training(t, "team-b", "late", 1, 2)
	if p := e.bound(t, "late", 1)[0]; p.Spec.NodeName != other {
		t.Errorf("a workload submitted while %s is NotReady went to %s, want %s", blinking, p.Spec.NodeName, other)
	}
	for end := time.Now().Add(spell); time.Now().Before(end); time.Sleep(time.Second) {
		untouched("NotReady within the grace")
	}
	if err := cluster.Untaint(t.Context(), blinking, corev1.TaintNodeNotReady); err != nil {
		t.Fatal(err)
	}
	if err := cluster.BackReady(t.Context(), blinking); err != nil {
		t.Fatal(err)
	}
	eventually(t, blinking+" Ready again in Runway", func() string {
		n, err := e.rw.GetNode(t.Context(), blinking)
		if err != nil {
			return err.Error()
		}
		if n.GetReadiness() != nodemanagerv1.Readiness_READINESS_READY {
			return n.GetReadiness().String()
		}
		return ""
	})
	time.Sleep(time.Second) // ten cycles
	untouched("Ready again")
	if got, err := e.kube.CoreV1().Pods(pod.Namespace).Get(t.Context(), pod.Name, metav1.GetOptions{}); err != nil || got.Status.Phase != corev1.PodRunning {
		t.Fatalf("the pod after the spell: %v, %v; want it Running", podPhase(got), err)
	}

	// Room on the other node for the pod once it is lost.
	if err := e.rw.DeleteWorkload(t.Context(), "team-b", "late"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "late's pod gone", func() string {
		if live, deleting := e.pods(t, "late"); len(live)+len(deleting) != 0 {
			return fmt.Sprintf("%d pods", len(live)+len(deleting))
		}
		return ""
	})
	goNotReady()
	// The scheduler's clock runs 10 s ahead at every poll (its model may
	// see the node turn NotReady a little after Runway's API does): the
	// grace is over after some 30 polls.
	eventually(t, "the pod on "+blinking+" replaced past the grace", func() string {
		skew.Add(int64(10 * time.Second))
		live, deleting := e.pods(t, "train")
		if !slices.ContainsFunc(deleting, func(p corev1.Pod) bool { return p.UID == pod.UID }) && slices.ContainsFunc(live, func(p corev1.Pod) bool { return p.UID == pod.UID }) {
			return "the first pod is not being deleted"
		}
		if bindingsOn(blinking) != 0 {
			return fmt.Sprintf("%d bindings left on %s", bindingsOn(blinking), blinking)
		}
		if n := nodeLost("train"); n != 1 {
			return fmt.Sprintf("%d NODE_LOST events", n)
		}
		return ""
	})
	if p := e.bound(t, "train", 1)[0]; p.Spec.NodeName != other {
		t.Errorf("train's pod after its node was lost is on %s, want %s", p.Spec.NodeName, other)
	}
}

func names(pods []corev1.Pod) []types.NamespacedName {
	var out []types.NamespacedName
	for _, p := range pods {
		out = append(out, types.NamespacedName{Namespace: p.Namespace, Name: p.Name})
	}
	return out
}

func podPhase(p *corev1.Pod) corev1.PodPhase {
	if p == nil {
		return ""
	}
	return p.Status.Phase
}
