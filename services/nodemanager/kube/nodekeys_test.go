package kube

import (
	"crypto/rand"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestNodeKeys: root on node n1 holds n1's key (the agent's Marks) and
// nothing more. A pod on n2 it marks with that key is not Runway's, to the
// runtime or to n2's agent; findings it signs for a pod on n2 do not count;
// moving a pod it marked to n2 breaks the mark; a pod on n1 it marks for
// a binding of n2 is not Runway's. n1's own marks and findings
// on n1's pods count. The keys come from the one mark key, each node's its
// own (NodeKeys hands them out: services/e2e/hostile).
func TestNodeKeys(t *testing.T) {
	runtime := testMarker(t)
	n1, err := NewMarks("n1", runtime.forNode("n1").key)
	if err != nil {
		t.Fatal(err)
	}
	n2, err := NewMarks("n2", runtime.forNode("n2").key)
	if err != nil {
		t.Fatal(err)
	}
	if string(n1.n.key) == string(n2.n.key) || string(n1.n.key) == string(runtime.key) {
		t.Fatal("two nodes, or a node and the runtime, share a key")
	}
	const ns = "runway-team-a"
	pod := func(node string, by Marks) *corev1.Pod {
		gpu := corev1.ResourceList{ResourceGPU: resource.MustParse("1")}
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "train-0-1a2b3c4d", Namespace: ns, UID: "u1",
				Annotations: map[string]string{AnnotationBinding: node + "/team-a.train.0", AnnotationBindingRev: "42", AnnotationDevices: "0",
					AnnotationGPUIdleSeconds: "3600"}},
			Spec: corev1.PodSpec{NodeName: node, SchedulerName: SchedulerName,
				Containers: []corev1.Container{{Name: "main", Resources: corev1.ResourceRequirements{Requests: gpu, Limits: gpu}}}},
		}
		a := p.Annotations
		// What root on by's node can compute: a mark and findings under
		// its own key, for any pod it names.
		by.n.node = node
		a[AnnotationMark] = by.n.mark(p.Namespace, p.Name, a[AnnotationBinding], a[AnnotationBindingRev], a[AnnotationDevices], "")
		a[AnnotationAgentReportMAC] = by.SignAgentReport(p.Namespace, p.Name, string(p.UID), "", "3600", time.Now())
		return p
	}
	own := pod("n1", n1)
	if !runtime.marked(own) || !n1.Ours(own, "runway") {
		t.Fatal("n1's pod marked with n1's key is not Runway's")
	}
	if _, _, _, ok := runtime.agentReport(own); !ok {
		t.Fatal("n1's findings on its own pod do not count")
	}
	forged := pod("n2", n1)
	if runtime.marked(forged) || n2.Ours(forged, "runway") || n1.Ours(forged, "runway") {
		t.Error("a pod on n2 marked with n1's key is taken for Runway's")
	}
	if _, _, _, ok := runtime.agentReport(forged); ok {
		t.Error("findings signed with n1's key count for a pod on n2")
	}
	// n1's pod, marked with n1's key, claiming a binding of n2.
	claims := pod("n1", n1)
	a := claims.Annotations
	a[AnnotationBinding] = "n2/team-a.train.0"
	a[AnnotationMark] = n1.n.mark(claims.Namespace, claims.Name, a[AnnotationBinding], a[AnnotationBindingRev], a[AnnotationDevices], "")
	if runtime.marked(claims) || n1.Ours(claims, "runway") {
		t.Error("n1's pod marked with n1's key for a binding of n2 is taken for Runway's")
	}
	moved := pod("n1", n1)
	moved.Spec.NodeName = "n2"
	if runtime.marked(moved) {
		t.Error("n1's mark still holds on a pod moved to n2")
	}
	// The runtime's own marks are each node's, so n2's agent takes them.
	placed := pod("n2", n2)
	placed.Annotations[AnnotationMark] = runtime.mark(ns, placed.Name, "n2", placed.Annotations[AnnotationBinding], "42", "0", "")
	if !n2.Ours(placed, "runway") || n1.Ours(placed, "runway") {
		t.Error("the runtime's mark of a pod on n2: not n2's agent's alone")
	}
}

// testMarker is a marker of a new random key.
func testMarker(t *testing.T) marker {
	t.Helper()
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		t.Fatal(err)
	}
	return marker{key: key}
}
