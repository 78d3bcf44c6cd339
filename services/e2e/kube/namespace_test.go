package kube_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/fieldmaskpb"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
	"github.com/runwayhq/runway/services/nodemanager/kube"
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
