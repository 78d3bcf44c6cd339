package kube_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	nodemanagerv1 "github.com/runwayhq/runway/gen/go/runway/nodemanager/v1"
	schedulerv1 "github.com/runwayhq/runway/gen/go/runway/scheduler/v1"
	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/services/nodemanager/kube"
	"github.com/runwayhq/runway/services/nodemanager/kube/kwoktest"
)

const (
	pending = workloadv1.WorkloadPhase_WORKLOAD_PHASE_PENDING
	running = workloadv1.WorkloadPhase_WORKLOAD_PHASE_RUNNING
)

func envVar(p corev1.Pod, name string) string {
	for _, e := range p.Spec.Containers[0].Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

// TestQuickStart is the product's quick start on Kubernetes: two Node
// objects with 2 GPUs each; team-a and team-b deserve 2 each. a1 (1 GPU),
// a2 (2) and b1 (1) become pods bound to the nodes; b2 (1) reclaims
// team-b's quota: a1's pod is deleted with a grace period, a1 is Pending
// again, and b2's pod is bound. A pod's phase folds into its workload's
// status through the run reports.
func TestQuickStart(t *testing.T) {
	e := newEnv(t, "qs")
	e.node(t, "qs-node-1", 2)
	e.node(t, "qs-node-2", 2)
	e.start(t)
	e.project(t, "team-a", 2)
	e.project(t, "team-b", 2)

	e.training(t, "team-a", "a1", 1, 1)
	a1 := e.bound(t, "a1", 1)[0]
	e.training(t, "team-a", "a2", 1, 2)
	a2 := e.bound(t, "a2", 1)[0]
	e.training(t, "team-b", "b1", 1, 1)
	b1 := e.bound(t, "b1", 1)[0]

	// What the pods say: scheduler, labels, requests, environment; and the
	// nodes hold at most their 2 GPUs.
	perNode := map[string]int64{}
	for _, p := range []corev1.Pod{a1, a2, b1} {
		if p.Spec.SchedulerName != kube.SchedulerName {
			t.Errorf("pod %s schedulerName = %q", p.Name, p.Spec.SchedulerName)
		}
		if !slices.Contains([]string{"qs-node-1", "qs-node-2"}, p.Spec.NodeName) {
			t.Errorf("pod %s bound to %q", p.Name, p.Spec.NodeName)
		}
		perNode[p.Spec.NodeName] += p.Spec.Containers[0].Resources.Limits.Name(kube.ResourceGPU, resource.DecimalSI).Value()
	}
	if perNode["qs-node-1"] != 2 || perNode["qs-node-2"] != 2 {
		t.Errorf("GPUs requested per node = %v, want 2 on each", perNode)
	}
	// Each workload's pods run in its project's namespace, marked as
	// Runway's; none in Runway's own.
	for _, p := range []corev1.Pod{a1, a2, b1} {
		if want := kube.ProjectNamespace(p.Labels[kube.LabelProject]); p.Namespace != want || p.Annotations[kube.AnnotationMark] == "" {
			t.Errorf("pod %s in namespace %q with mark %q, want it marked in %s", p.Name, p.Namespace, p.Annotations[kube.AnnotationMark], want)
		}
	}
	if l, err := e.kube.CoreV1().Pods(e.ns).List(t.Context(), metav1.ListOptions{}); err != nil || len(l.Items) != 0 {
		t.Errorf("pods in Runway's namespace: %v, %v", l, err)
	}
	if a2.Labels[kube.LabelProject] != "team-a" || envVar(a2, "RUNWAY_WORKLOAD") != "projects/team-a/workloads/a2" ||
		a2.Spec.Containers[0].Image != "busybox" {
		t.Errorf("a2's pod: labels %v, RUNWAY_WORKLOAD %q, image %q", a2.Labels, envVar(a2, "RUNWAY_WORKLOAD"), a2.Spec.Containers[0].Image)
	}

	// KWOK's kubelets run the pods; what they report reaches each
	// workload's pod states.
	for _, w := range [][2]string{{"team-a", "a1"}, {"team-a", "a2"}, {"team-b", "b1"}} {
		e.podRunning(t, w[0], w[1])
	}

	// a1's process takes its time to exit: a finalizer of the test's
	// holds its pod in its grace period until the test lets it go.
	e.holdPod(t, a1)

	// b2 reclaims team-b's quota from a1. a1's pod is deleted with a
	// grace period and a1 is Pending again; b2 is bound to a1's GPU, but
	// its pod waits while a1's pod still holds that GPU on the node.
	e.training(t, "team-b", "b2", 1, 1)
	eventually(t, "a1's pod deleted and a1 Pending", func() string {
		live, deleting := e.pods(t, "a1")
		if len(live) != 0 {
			return fmt.Sprintf("%d live a1 pods", len(live))
		}
		if len(deleting) != 1 || deleting[0].UID != a1.UID || deleting[0].DeletionGracePeriodSeconds == nil ||
			*deleting[0].DeletionGracePeriodSeconds != 30 {
			return fmt.Sprintf("a1's pod %s not deleted with a 30 s grace period: %v", a1.Name, deleting)
		}
		w := e.get(t, "team-a", "a1")
		if w.GetStatus().GetPhase() != pending || w.GetStatus().GetPreemptionCount() != 1 {
			return fmt.Sprintf("a1 %v, preemptions %d", w.GetStatus().GetPhase(), w.GetStatus().GetPreemptionCount())
		}
		if ps := e.get(t, "team-b", "b2").GetStatus().GetPods(); len(ps) != 1 || ps[0].GetState() != workloadv1.PodState_POD_STATE_BOUND {
			return fmt.Sprintf("b2's pods %v, want one BOUND", ps)
		}
		return ""
	})
	for range 20 { // 2 s: b2's pod is not created while a1's holds the GPU
		if live, _ := e.pods(t, "b2"); len(live) != 0 {
			t.Fatalf("b2's pod %s created while a1's pod is still in its grace period on %s", live[0].Name, a1.Spec.NodeName)
		}
		time.Sleep(100 * time.Millisecond)
	}
	e.releasePod(t, a1)
	b2 := e.bound(t, "b2", 1)[0]
	e.podRunning(t, "team-b", "b2")
	if b2.Spec.NodeName != a1.Spec.NodeName {
		t.Errorf("b2 bound to %s, want a1's node %s", b2.Spec.NodeName, a1.Spec.NodeName)
	}
	for _, id := range []string{"a2", "b1", "b2"} {
		project := "team-a"
		if id[0] == 'b' {
			project = "team-b"
		}
		if ph := e.get(t, project, id).GetStatus().GetPhase(); ph != running {
			t.Errorf("%s is %v, want RUNNING", id, ph)
		}
	}
	if live, _ := e.pods(t, "a2"); len(live) != 1 || live[0].UID != a2.UID {
		t.Errorf("a2's pod was replaced: %v", live)
	}
}

// holdPod puts a finalizer of the test's on the pod, so that once deleted
// it stays in its grace period until releasePod (KWOK deletes a pod only
// when it has no finalizers).
func (e *env) holdPod(t *testing.T, p corev1.Pod) {
	t.Helper()
	patch := `{"metadata":{"finalizers":["runway.test/hold"]}}`
	if _, err := e.kube.CoreV1().Pods(p.Namespace).Patch(t.Context(), p.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.releasePod(t, p) })
}

func (e *env) releasePod(t *testing.T, p corev1.Pod) {
	patch := `{"metadata":{"finalizers":null}}`
	_, err := e.kube.CoreV1().Pods(p.Namespace).Patch(context.Background(), p.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Error(err)
	}
}

// podRunning waits until the workload's pods run on their nodes (phase
// Running, as the kubelet reports it) and its status says so.
func (e *env) podRunning(t *testing.T, project, id string) {
	t.Helper()
	eventually(t, id+"'s pods Running", func() string {
		live, _ := e.pods(t, id)
		for _, p := range live {
			if p.Status.Phase != corev1.PodRunning {
				return fmt.Sprintf("pod %s %s", p.Name, p.Status.Phase)
			}
		}
		ps := e.get(t, project, id).GetStatus().GetPods()
		if len(ps) == 0 || len(ps) != len(live) {
			return fmt.Sprintf("%d pods in the status, %d live", len(ps), len(live))
		}
		for _, p := range ps {
			if p.GetState() != workloadv1.PodState_POD_STATE_RUNNING {
				return fmt.Sprintf("pod %d %v", p.GetIndex(), p.GetState())
			}
		}
		if ph := e.get(t, project, id).GetStatus().GetPhase(); ph != running {
			return "workload " + ph.String()
		}
		return ""
	})
}

// TestGangAllOrNone: a 4-pod training binds all 4 pods or none. While 1 of
// the 4 GPUs is held it gets no pod at all; once it is freed all 4 are
// bound.
func TestGangAllOrNone(t *testing.T) {
	e := newEnv(t, "gang")
	e.node(t, "gang-node-1", 2)
	e.node(t, "gang-node-2", 2)
	e.start(t)
	e.project(t, "team-g", 4)

	e.training(t, "team-g", "hold", 1, 1)
	e.bound(t, "hold", 1)
	e.training(t, "team-g", "gang", 4, 1)
	eventually(t, "the gang considered and waiting", func() string {
		r, err := e.rw.SchedulerService.ExplainWorkload(t.Context(), &schedulerv1.ExplainWorkloadRequest{Name: "projects/team-g/workloads/gang"})
		if err != nil {
			return err.Error()
		}
		if r.GetPhase() != pending || len(r.GetPendingReasons()) == 0 {
			return fmt.Sprintf("phase %v, reasons %v", r.GetPhase(), r.GetPendingReasons())
		}
		return ""
	})
	if live, deleting := e.pods(t, "gang"); len(live)+len(deleting) != 0 {
		t.Fatalf("a gang that cannot fit has %d pods, want none", len(live)+len(deleting))
	}

	if err := e.rw.DeleteWorkload(t.Context(), "team-g", "hold"); err != nil {
		t.Fatal(err)
	}
	pods := e.bound(t, "gang", 4)
	perNode := map[string]int{}
	indexes := map[string]bool{}
	for _, p := range pods {
		perNode[p.Spec.NodeName]++
		indexes[p.Labels[kube.LabelPodIndex]] = true
	}
	if perNode["gang-node-1"] != 2 || perNode["gang-node-2"] != 2 || len(indexes) != 4 {
		t.Errorf("gang pods per node %v, indexes %v; want 2 per node, 4 distinct indexes", perNode, indexes)
	}
}

// TestNodeNotReady: when a node's Ready condition turns False for longer
// than the scheduler's grace (2 s here), the training's pods on it are
// deleted and created again on the other node.
func TestNodeNotReady(t *testing.T) {
	e := newEnv(t, "nr")
	e.lostGrace = 2 * time.Second
	e.node(t, "nr-node-1", 2)
	e.node(t, "nr-node-2", 2)
	e.start(t)
	e.project(t, "team-n", 4)

	e.training(t, "team-n", "train", 2, 1)
	before := e.bound(t, "train", 2)
	lost := before[0].Spec.NodeName
	other := "nr-node-1"
	if lost == other {
		other = "nr-node-2"
	}
	e.notReady(t, lost)
	eventually(t, "the pods on the lost node replaced on "+other, func() string {
		live, deleting := e.pods(t, "train")
		if len(live) != 2 {
			return fmt.Sprintf("%d live pods", len(live))
		}
		for _, p := range live {
			if p.Spec.NodeName != other || !scheduled(p) {
				return fmt.Sprintf("pod %s on %q", p.Name, p.Spec.NodeName)
			}
		}
		for _, p := range before {
			if p.Spec.NodeName == lost && !slices.ContainsFunc(deleting, func(d corev1.Pod) bool { return d.UID == p.UID }) {
				return fmt.Sprintf("pod %s on the lost node not deleted", p.Name)
			}
		}
		return ""
	})
	n, err := e.rw.GetNode(t.Context(), lost)
	if err != nil {
		t.Fatal(err)
	}
	if n.GetReadiness() != nodemanagerv1.Readiness_READINESS_NOT_READY {
		t.Errorf("node %s readiness %v, want NOT_READY", lost, n.GetReadiness())
	}
}

// TestUserPod: a pod a user creates with schedulerName runway and a project
// label becomes a workload of that project, is bound, and counts in the
// project's queue; deleting it deletes the workload. A pod another
// scheduler placed holds its GPU: the node offers only the rest.
func TestUserPod(t *testing.T) {
	e := newEnv(t, "user")
	users := "user-users"
	e.node(t, "user-node-1", 2)
	other := userPod("other", "user-node-1", "")
	if _, err := e.kube.CoreV1().Pods(users).Create(t.Context(), other, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.start(t)
	e.project(t, "team-u", 2)

	eventually(t, "the node registered with 1 free GPU", func() string {
		n, err := e.rw.GetNode(t.Context(), "user-node-1")
		if err != nil {
			return err.Error()
		}
		if n.GetAllocatable().GetMilliGpus() != 1000 || len(n.GetDevices()) != 1 || n.GetCapacity().GetMilliGpus() != 2000 ||
			n.GetDevices()[0].GetModel() != "NVIDIA-H100-80GB-HBM3" || n.GetDevices()[0].GetMemoryBytes() != 81559<<20 {
			return fmt.Sprintf("allocatable %v, capacity %v, devices %v", n.GetAllocatable(), n.GetCapacity(), n.GetDevices())
		}
		return ""
	})

	// A pod asks for a project by living in its namespace: one labelled
	// team-u in another namespace is not Runway's to schedule.
	stray := userPod("stray", "", "team-u")
	if _, err := e.kube.CoreV1().Pods(users).Create(t.Context(), stray, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	teamNS := e.projectNamespace(t, "team-u")
	nb := userPod("notebook", "", "team-u")
	nb, err := e.kube.CoreV1().Pods(teamNS).Create(t.Context(), nb, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the user's pod bound and counted in team-u", func() string {
		p, err := e.kube.CoreV1().Pods(teamNS).Get(t.Context(), "notebook", metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		if p.Spec.NodeName != "user-node-1" || !scheduled(*p) {
			return fmt.Sprintf("nodeName %q", p.Spec.NodeName)
		}
		q, err := e.rw.SchedulerService.GetQueue(t.Context(), &schedulerv1.GetQueueRequest{Name: "projects/team-u/queue"})
		if err != nil {
			return err.Error()
		}
		for _, np := range q.GetNodePools() {
			if np.GetNodePool() == "nodepools/default" && np.GetAllocated().GetMilliGpus() == 1000 {
				return ""
			}
		}
		return fmt.Sprintf("team-u's queue %v", q.GetNodePools())
	})
	// The Binding subresource marked the user's pod as Runway's: its GPU
	// is the binding's, not also another scheduler's taken off the node.
	if p, err := e.kube.CoreV1().Pods(teamNS).Get(t.Context(), "notebook", metav1.GetOptions{}); err != nil || p.Annotations[kube.AnnotationMark] == "" {
		t.Fatalf("the bound user's pod has no mark: %v, %v", p.GetAnnotations(), err)
	}
	time.Sleep(500 * time.Millisecond)
	if n, err := e.rw.GetNode(t.Context(), "user-node-1"); err != nil || n.GetAllocatable().GetMilliGpus() != 1000 {
		t.Fatalf("user-node-1 once Runway bound the user's pod: allocatable %v, %v; want the other scheduler's GPU alone taken off", n.GetAllocatable(), err)
	}
	// RUNNING once the kubelet (KWOK) runs the pod, not when it is bound.
	var ws []*workloadv1.Workload
	eventually(t, "the user's pod's workload RUNNING", func() string {
		ws = e.workloads(t, "team-u")
		if len(ws) != 1 || ws[0].GetStatus().GetPhase() != running {
			return fmt.Sprintf("team-u's workloads: %v", ws)
		}
		return ""
	})
	if ws[0].GetSpec().GetGpu().GetDevices() != 1 {
		t.Fatalf("team-u's workload: %v", ws[0])
	}
	// The runtime acted for team-u alone, not as the service role.
	if c := ws[0].GetCreator(); c != "services/kubernetes/projects/team-u" {
		t.Errorf("the user's pod's workload was created by %q, want services/kubernetes/projects/team-u", c)
	}
	if p, err := e.kube.CoreV1().Pods(users).Get(t.Context(), "stray", metav1.GetOptions{}); err != nil || p.Spec.NodeName != "" {
		t.Errorf("the pod labelled team-u outside team-u's namespace: %v, %v; want it left alone", p, err)
	}

	zero := int64(0)
	if err := e.kube.CoreV1().Pods(teamNS).Delete(t.Context(), "notebook", metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	// Deleted stays deleted: no pod replaces it, in its namespace or
	// Runway's, while its workload goes.
	replaced := func() {
		for _, ns := range []string{e.ns, teamNS} {
			if l, err := e.kube.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{}); err != nil || len(l.Items) != 0 {
				t.Fatalf("the user's deleted pod replaced in %s: %v %v", ns, l, err)
			}
		}
	}
	eventually(t, "the deleted pod's workload deleted", func() string {
		replaced()
		if n := len(e.workloads(t, "team-u")); n != 0 {
			return fmt.Sprintf("%d workloads", n)
		}
		return ""
	})
	replaced()
}

// userPod is a 1-GPU pod: placed on node by another scheduler when node is
// set, else asking Runway to schedule it in project.
func userPod(name, node, project string) *corev1.Pod {
	gpu := corev1.ResourceList{kube.ResourceGPU: resource.MustParse("1")}
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "main", Image: "jupyter",
			Resources: corev1.ResourceRequirements{Requests: gpu, Limits: gpu}}}},
	}
	if project != "" {
		p.Spec.SchedulerName = kube.SchedulerName
		p.Labels[kube.LabelProject] = project
	}
	return p
}

// TestLateForeignPod: GPUs another scheduler's pod takes after Runway has
// seen the node are taken off what Runway places there, and given back when
// that pod goes.
func TestLateForeignPod(t *testing.T) {
	e := newEnv(t, "late")
	users := "late-users"
	e.node(t, "late-node-1", 2)
	e.start(t)
	e.project(t, "team-l", 2)
	eventually(t, "the node registered with 2 GPUs", func() string {
		n, err := e.rw.GetNode(t.Context(), "late-node-1")
		if err != nil {
			return err.Error()
		}
		if len(n.GetDevices()) != 2 {
			return fmt.Sprintf("devices %v", n.GetDevices())
		}
		return ""
	})
	if _, err := e.kube.CoreV1().Pods(users).Create(t.Context(), userPod("other", "late-node-1", ""), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the node offering 1 GPU", func() string {
		n, err := e.rw.GetNode(t.Context(), "late-node-1")
		if err != nil {
			return err.Error()
		}
		if len(n.GetDevices()) != 1 {
			return fmt.Sprintf("devices %v", n.GetDevices())
		}
		return ""
	})
	e.training(t, "team-l", "big", 1, 2)
	eventually(t, "big waiting for capacity", func() string {
		w, err := e.rw.GetWorkload(t.Context(), "team-l", "big")
		if err != nil {
			return err.Error()
		}
		for _, r := range w.GetStatus().GetPendingReasons() {
			if strings.Contains(r.GetMessage(), "the largest free block is 1 GPU") {
				return ""
			}
		}
		return fmt.Sprintf("status %v", w.GetStatus())
	})
	if live, _ := e.pods(t, "big"); len(live) != 0 {
		t.Fatalf("big has %d pods while the other scheduler holds a GPU", len(live))
	}
	zero := int64(0)
	if err := e.kube.CoreV1().Pods(users).Delete(t.Context(), "other", metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "big bound once the GPU is back", func() string {
		live, _ := e.pods(t, "big")
		if len(live) != 1 || live[0].Spec.NodeName != "late-node-1" {
			return fmt.Sprintf("%d pods", len(live))
		}
		return ""
	})
}

// TestPodStateFollowsTheKubelet: a pod bound to a node whose kubelet does
// not run it (an unmanaged node: KWOK leaves it alone) stays Pending, and
// its workload reports the pod BOUND and stays PENDING with the reason
// STARTING, not RUNNING; once the kubelet says Running, so do the pod
// state and the workload's phase.
func TestPodStateFollowsTheKubelet(t *testing.T) {
	e := newEnv(t, "pend")
	e.nodes(t, kwoktest.Node{Name: "pend-node-1", GPUs: 1, Unmanaged: true})
	e.start(t)
	e.project(t, "team-p", 1)
	e.training(t, "team-p", "p1", 1, 1)
	p := e.bound(t, "p1", 1)[0]
	state := func() workloadv1.PodState {
		ps := e.get(t, "team-p", "p1").GetStatus().GetPods()
		if len(ps) != 1 {
			return workloadv1.PodState_POD_STATE_UNSPECIFIED
		}
		return ps[0].GetState()
	}
	eventually(t, "p1's pod BOUND in its status", func() string {
		if s := state(); s != workloadv1.PodState_POD_STATE_BOUND {
			return s.String()
		}
		return ""
	})
	time.Sleep(time.Second)
	if s := state(); s != workloadv1.PodState_POD_STATE_BOUND {
		t.Fatalf("p1's pod is %v while its pod is not running", s)
	}
	st := e.get(t, "team-p", "p1").GetStatus()
	if rs := st.GetPendingReasons(); st.GetPhase() != workloadv1.WorkloadPhase_WORKLOAD_PHASE_PENDING || st.GetStartTime() != nil ||
		len(rs) != 1 || rs[0].GetCheck() != workloadv1.PendingCheck_PENDING_CHECK_STARTING || !strings.Contains(rs[0].GetMessage(), "pend-node-1") {
		t.Fatalf("p1 while its pod is not running: phase %v, start %v, reasons %v; want PENDING, STARTING on pend-node-1",
			st.GetPhase(), st.GetStartTime(), rs)
	}
	got, err := e.kube.CoreV1().Pods(p.Namespace).Get(t.Context(), p.Name, metav1.GetOptions{})
	if err != nil || got.Status.Phase != corev1.PodPending {
		t.Fatalf("pod on the unmanaged node: %v, %v", got.Status.Phase, err)
	}
	got.Status.Phase = corev1.PodRunning
	if _, err := e.kube.CoreV1().Pods(p.Namespace).UpdateStatus(t.Context(), got, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.podRunning(t, "team-p", "p1")
}
