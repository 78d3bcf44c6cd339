package kube_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/fieldmaskpb"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/services/nodemanager/kube"
	"github.com/runwayhq/runway/services/nodemanager/kube/kwoktest"
)

// TestProjectNamespaces: Runway makes a labelled namespace per project,
// with a ResourceQuota that follows the project's GPU limit. A namespace of
// a project's name that Runway did not make (no label) is not adopted: a
// runway pod there never becomes a workload.
func TestProjectNamespaces(t *testing.T) {
	e := newEnv(t, "pns")
	e.node(t, "pns-node-1", 2)
	squat := kube.ProjectNamespace("team-x")
	if _, err := e.kube.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: squat}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		zero := int64(0)
		_ = e.kube.CoreV1().Pods(squat).DeleteCollection(context.Background(), metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{})
		_ = e.kube.CoreV1().Namespaces().Delete(context.Background(), squat, metav1.DeleteOptions{})
	})
	sq := userPod("squatter", "", "")
	sq.Spec.SchedulerName = kube.SchedulerName
	if _, err := e.kube.CoreV1().Pods(squat).Create(t.Context(), sq, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.start(t)
	e.project(t, "team-x", 2)
	limit, deserved := int64(3000), int64(1000)
	q := &quotav1.Project{NodePoolQuotas: []*quotav1.NodePoolQuota{{NodePool: "nodepools/default",
		Gpu: &quotav1.GpuQuota{DeservedMilliGpus: &deserved, LimitMilliGpus: &limit}}}}
	if _, err := e.rw.CreateProject(t.Context(), "team-q", q); err != nil {
		t.Fatal(err)
	}
	ns := e.projectNamespace(t, "team-q")
	quota := func(want int64) {
		t.Helper()
		eventually(t, fmt.Sprintf("%s's quota at %d GPUs", ns, want), func() string {
			rq, err := e.kube.CoreV1().ResourceQuotas(ns).Get(t.Context(), kube.QuotaName, metav1.GetOptions{})
			if err != nil {
				return err.Error()
			}
			got := rq.Spec.Hard[corev1.ResourceName("requests."+kube.ResourceGPU)]
			if got.Cmp(*resource.NewQuantity(want, resource.DecimalSI)) != 0 {
				return fmt.Sprintf("hard %v", rq.Spec.Hard)
			}
			return ""
		})
	}
	quota(3)
	limit = 1000
	q.Name = "projects/team-q"
	if _, err := e.rw.QuotaService.UpdateProject(t.Context(), &quotav1.UpdateProjectRequest{Project: q,
		UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"node_pool_quotas"}}}); err != nil {
		t.Fatal(err)
	}
	quota(1)

	// The squatted namespace stays unlabelled and its pod is left alone.
	time.Sleep(time.Second)
	if n, err := e.kube.CoreV1().Namespaces().Get(t.Context(), squat, metav1.GetOptions{}); err != nil || n.Labels[kube.LabelProject] != "" {
		t.Fatalf("namespace %s adopted: %v %v", squat, n.GetLabels(), err)
	}
	if ws := e.workloads(t, "team-x"); len(ws) != 0 {
		t.Fatalf("a pod in the unadopted namespace %s became workload %s", squat, ws[0].GetName())
	}
	if p, err := e.kube.CoreV1().Pods(squat).Get(t.Context(), "squatter", metav1.GetOptions{}); err != nil || p.Spec.NodeName != "" {
		t.Fatalf("the squatter's pod: %v, bound to %q", err, p.Spec.NodeName)
	}
}

// TestForgedPods: a project's users may create pods in its namespace,
// where Runway's pods now run, and copy what they see of Runway's. A copy
// of Runway's pod under another name (labels, annotations and mark
// included), which its author put on the node itself, is not Runway's: its
// phase is not reported for the workload, its GPU is taken off what the
// node offers like any other scheduler's pod, and Runway leaves it alone.
// A pod with Runway's labels and a binding annotation but no mark is not
// taken for Runway's (Runway would delete one of its own with a stale
// revision) nor adopted as a user's workload.
func TestForgedPods(t *testing.T) {
	e := newEnv(t, "forge")
	e.nodes(t, kwoktest.Node{Name: "forge-node-1", GPUs: 2, Unmanaged: true})
	e.start(t)
	e.project(t, "team-v", 2)
	e.training(t, "team-v", "real", 1, 1)
	real := e.bound(t, "real", 1)[0]
	ns := kube.ProjectNamespace("team-v")
	if real.Namespace != ns || real.Annotations[kube.AnnotationMark] == "" || real.Annotations[kube.AnnotationDevices] != "0" {
		t.Fatalf("real's pod in %q, annotations %v; want it in %s, marked, on device 0", real.Namespace, real.Annotations, ns)
	}

	copycat := real.DeepCopy()
	copycat.ObjectMeta = metav1.ObjectMeta{Name: "copycat", Namespace: ns, Labels: real.Labels, Annotations: real.Annotations}
	copycat.Status = corev1.PodStatus{}
	copycat, err := e.kube.CoreV1().Pods(ns).Create(t.Context(), copycat, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	copycat.Status.Phase = corev1.PodRunning
	if _, err := e.kube.CoreV1().Pods(ns).UpdateStatus(t.Context(), copycat, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	stale := userPod("stale", "", "team-v")
	stale.Labels[kube.LabelWorkload], stale.Labels[kube.LabelPodIndex] = "real", "0"
	stale.Annotations = map[string]string{kube.AnnotationBinding: real.Annotations[kube.AnnotationBinding], kube.AnnotationBindingRev: "1"}
	if _, err := e.kube.CoreV1().Pods(ns).Create(t.Context(), stale, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	eventually(t, "the copycat's GPU taken off the node", func() string {
		n, err := e.rw.GetNode(t.Context(), "forge-node-1")
		if err != nil {
			return err.Error()
		}
		if n.GetAllocatable().GetMilliGpus() != 1000 {
			return fmt.Sprintf("allocatable %v", n.GetAllocatable())
		}
		return ""
	})
	time.Sleep(time.Second)
	if ps := e.get(t, "team-v", "real").GetStatus().GetPods(); len(ps) != 1 || ps[0].GetState() != workloadv1.PodState_POD_STATE_BOUND {
		t.Fatalf("real's pods %v while only the copycat runs; want BOUND", ps)
	}
	for _, name := range []string{"copycat", "stale"} {
		p, err := e.kube.CoreV1().Pods(ns).Get(t.Context(), name, metav1.GetOptions{})
		if err != nil || p.DeletionTimestamp != nil || name == "stale" && p.Spec.NodeName != "" {
			t.Fatalf("the forged pod %s: %v, deleting %v, node %q; want it left alone", name, err, p.GetDeletionTimestamp(), p.Spec.NodeName)
		}
	}
	if ws := e.workloads(t, "team-v"); len(ws) != 1 {
		t.Fatalf("team-v's workloads: %v, want real's alone", ws)
	}

	// The real pod's own phase still counts (the forged pods gone, so that
	// podRunning sees Runway's alone).
	zero := int64(0)
	for _, name := range []string{"copycat", "stale"} {
		if err := e.kube.CoreV1().Pods(ns).Delete(t.Context(), name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := e.kube.CoreV1().Pods(ns).Get(t.Context(), real.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got.Status.Phase = corev1.PodRunning
	if _, err := e.kube.CoreV1().Pods(ns).UpdateStatus(t.Context(), got, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.podRunning(t, "team-v", "real")
}

// TestQuotaFollowsTheLimit: the ResourceQuota Runway writes in a project's
// namespace caps nvidia.com/gpu at the project's limit, not its deserved
// quota, so the pods Runway places over quota (borrowed, within the limit)
// are admitted. A pod the namespace's quota refuses for now (the project's
// user runs a GPU pod of their own there) waits, and is created once there
// is room. No controller-manager runs here: quotaController plays the
// quota controller's part (status.hard and status.used); the apiserver's
// admission enforces the quota.
func TestQuotaFollowsTheLimit(t *testing.T) {
	e := newEnv(t, "quo")
	e.node(t, "quo-node-1", 4)
	e.start(t)
	limit, deserved := int64(2000), int64(1000)
	if _, err := e.rw.CreateProject(t.Context(), "team-o", &quotav1.Project{NodePoolQuotas: []*quotav1.NodePoolQuota{{
		NodePool: "nodepools/default", Gpu: &quotav1.GpuQuota{DeservedMilliGpus: &deserved, LimitMilliGpus: &limit}}}}); err != nil {
		t.Fatal(err)
	}
	e.projects = append(e.projects, "team-o")
	ns := e.projectNamespace(t, "team-o")
	eventually(t, "the quota at the limit, 2 GPUs", func() string { return e.quotaController(t, ns, 2, 0) })

	own := userPod("own", "quo-node-1", "")
	if _, err := e.kube.CoreV1().Pods(ns).Create(t.Context(), own, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.training(t, "team-o", "o1", 1, 1)
	e.bound(t, "o1", 1)
	e.training(t, "team-o", "o2", 1, 1) // over the deserved 1, within the limit
	eventually(t, "o2 bound in Runway", func() string {
		if ps := e.get(t, "team-o", "o2").GetStatus().GetPods(); len(ps) != 1 || ps[0].GetState() != workloadv1.PodState_POD_STATE_BOUND {
			return fmt.Sprintf("o2's pods %v", ps)
		}
		return ""
	})
	for range 20 { // 2 s: the user's pod holds the quota's last GPU
		if live, _ := e.pods(t, "o2"); len(live) != 0 {
			t.Fatalf("o2's pod %s admitted past the quota", live[0].Name)
		}
		time.Sleep(100 * time.Millisecond)
	}
	zero := int64(0)
	if err := e.kube.CoreV1().Pods(ns).Delete(t.Context(), "own", metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the quota's use recounted", func() string { return e.quotaController(t, ns, 2, 1) })
	e.bound(t, "o2", 1)
	e.podRunning(t, "team-o", "o2")
	if live, _ := e.pods(t, "o1"); len(live) != 1 {
		t.Errorf("o1's pods %v", live)
	}
}

// quotaController does what the quota controller would for Runway's quota
// in ns: status.hard from spec.hard, status.used from the namespace's live
// pods; "" once the quota caps at hard GPUs and used are used.
func (e *env) quotaController(t *testing.T, ns string, hard, used int64) string {
	t.Helper()
	rq, err := e.kube.CoreV1().ResourceQuotas(ns).Get(t.Context(), kube.QuotaName, metav1.GetOptions{})
	if err != nil {
		return err.Error()
	}
	pods, err := e.kube.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		return err.Error()
	}
	var n int64
	for _, p := range pods.Items {
		for _, c := range p.Spec.Containers {
			n += c.Resources.Requests.Name(kube.ResourceGPU, resource.DecimalSI).Value()
		}
	}
	name := corev1.ResourceName("requests." + kube.ResourceGPU)
	rq.Status.Hard = rq.Spec.Hard
	rq.Status.Used = corev1.ResourceList{name: *resource.NewQuantity(n, resource.DecimalSI)}
	if _, err := e.kube.CoreV1().ResourceQuotas(ns).UpdateStatus(t.Context(), rq, metav1.UpdateOptions{}); err != nil {
		return err.Error()
	}
	if h := rq.Spec.Hard[name]; h.Value() != hard || n != used {
		return fmt.Sprintf("hard %v, %d GPUs used; want %d of %d", rq.Spec.Hard, n, used, hard)
	}
	// The apiserver's admission reads the status from its own cache: a pod
	// asking for one GPU more than is left (not created: a dry run) must be
	// refused before the test goes on.
	probe := userPod("quota-probe", "", "")
	more := corev1.ResourceList{kube.ResourceGPU: *resource.NewQuantity(hard-used+1, resource.DecimalSI)}
	probe.Spec.Containers[0].Resources = corev1.ResourceRequirements{Requests: more, Limits: more}
	_, err = e.kube.CoreV1().Pods(ns).Create(t.Context(), probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "exceeded quota") {
		return fmt.Sprintf("the quota not enforced yet (a dry-run pod of %d GPUs: %v)", hard-used+1, err)
	}
	return ""
}
