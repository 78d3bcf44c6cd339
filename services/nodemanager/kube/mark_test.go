package kube

import (
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	nodemanagerv1 "github.com/runwayhq/runway/gen/go/runway/nodemanager/v1"
	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/etcdstore/etcdtest"
	"github.com/runwayhq/runway/services/nodemanager"
)

// TestMarked: a mark verifies only on the pod it was made for; a copy of
// a marked pod under another name, namespace or node, with other devices,
// asking for more GPUs than its devices, or marked under another key, is
// not Runway's.
func TestMarked(t *testing.T) {
	m := marker{key: []byte("0123456789abcdef0123456789abcdef")}
	pod := func() *corev1.Pod {
		gpu := corev1.ResourceList{ResourceGPU: resource.MustParse("1")}
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "train-0-1a2b3c4d", Namespace: "runway-team-a",
				Annotations: map[string]string{AnnotationBinding: "n1/team-a.train.0", AnnotationBindingRev: "42", AnnotationDevices: "1"}},
			Spec: corev1.PodSpec{NodeName: "n1", SchedulerName: SchedulerName,
				Containers: []corev1.Container{{Name: "main", Resources: corev1.ResourceRequirements{Requests: gpu, Limits: gpu}}}},
		}
		a := p.Annotations
		a[AnnotationMark] = m.mark(p.Namespace, p.Name, p.Spec.NodeName, a[AnnotationBinding], a[AnnotationBindingRev], a[AnnotationDevices], "")
		return p
	}
	if !m.marked(pod()) {
		t.Fatal("the pod the mark was made for is not marked")
	}
	for name, forge := range map[string]func(p *corev1.Pod){
		"no mark":           func(p *corev1.Pod) { delete(p.Annotations, AnnotationMark) },
		"another name":      func(p *corev1.Pod) { p.Name = "copycat" },
		"another namespace": func(p *corev1.Pod) { p.Namespace = "runway-team-b" },
		"another node":      func(p *corev1.Pod) { p.Spec.NodeName = "n2" },
		"unbound":           func(p *corev1.Pod) { p.Spec.NodeName = "" },
		"another binding":   func(p *corev1.Pod) { p.Annotations[AnnotationBinding] = "n1/team-a.other.0" },
		"another revision":  func(p *corev1.Pod) { p.Annotations[AnnotationBindingRev] = "43" },
		"other devices":     func(p *corev1.Pod) { p.Annotations[AnnotationDevices] = "0,1" },
		"called a fraction": func(p *corev1.Pod) { p.Annotations[AnnotationFractionMilli] = "500" },
		"more GPUs": func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Limits[ResourceGPU] = resource.MustParse("2")
			p.Spec.Containers[0].Resources.Requests[ResourceGPU] = resource.MustParse("2")
		},
		"a second container with GPUs": func(p *corev1.Pod) {
			p.Spec.Containers = append(p.Spec.Containers, p.Spec.Containers[0])
		},
	} {
		p := pod()
		forge(p)
		if m.marked(p) {
			t.Errorf("%s: taken for Runway's pod", name)
		}
	}
	if (marker{key: []byte("another key, another runway.....")}).marked(pod()) {
		t.Error("a mark made under another key verifies")
	}
}

// TestImpostorTakesThePodName: a pod Runway did not make (no mark) that
// has the name of a binding's pod, Runway's labels and the binding's
// annotations is not the binding's pod: podOf finds none, taken says so,
// and the binding's pod is reported FAILED, naming the impostor.
func TestImpostorTakesThePodName(t *testing.T) {
	etcd := etcdtest.New(t).Client
	m := testMarker(t)
	b := binding{Binding: nodemanager.Binding{Node: "n1", Project: "team-a", Workload: "train", Pod: 0, Devices: []int{0}},
		key: "n1/team-a.train.0", rev: 42}
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{indexForeign: func(any) ([]string, error) { return nil, nil }})
	r := &runtime{cfg: Config{Namespace: "runway", Etcd: etcd}, log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		marker: m, pods: corelisters.NewPodLister(idx), podIdx: idx, reported: map[string]runReport{}}
	impostor := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: m.podName(b.Binding, b.rev), Namespace: ProjectNamespace("team-a"),
			Labels:      map[string]string{LabelProject: "team-a", LabelWorkload: "train", LabelPodIndex: "0"},
			Annotations: map[string]string{AnnotationBinding: b.key, AnnotationBindingRev: "42", AnnotationDevices: "0"}},
		Spec: corev1.PodSpec{NodeName: "n1", SchedulerName: SchedulerName},
	}
	if err := idx.Add(impostor); err != nil {
		t.Fatal(err)
	}
	if p, err := r.podOf(b); p != nil || err != nil {
		t.Fatalf("podOf = %v, %v; want no pod for the binding", p, err)
	}
	if !r.taken(t.Context(), b) {
		t.Fatal("taken = false with an impostor on the pod's name")
	}
	resp, err := etcd.Get(t.Context(), nodemanager.RunKey("n1", "team-a", "train", 0))
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("run report: %v, %v", resp, err)
	}
	var run nodemanagerv1.ReportWorkloadStateRequest
	if err := proto.Unmarshal(resp.Kvs[0].Value, &run); err != nil {
		t.Fatal(err)
	}
	if run.GetState() != workloadv1.PodState_POD_STATE_FAILED || !strings.Contains(run.GetMessage(), impostor.Name) {
		t.Fatalf("run report %v; want FAILED naming %s", &run, impostor.Name)
	}

	// Marked, it is Runway's.
	a := impostor.Annotations
	a[AnnotationMark] = m.mark(impostor.Namespace, impostor.Name, "n1", b.key, "42", "0", "")
	impostor.Spec.Containers = []corev1.Container{{Name: "main", Resources: corev1.ResourceRequirements{
		Limits: corev1.ResourceList{ResourceGPU: resource.MustParse("1")}}}}
	if err := idx.Update(impostor); err != nil {
		t.Fatal(err)
	}
	if p, err := r.podOf(b); p == nil || err != nil {
		t.Fatalf("podOf = %v, %v; want the marked pod", p, err)
	}
}

// TestAgentReportSigned: the node agent's findings count only as it signed
// them, on the pod it signed them for; a user who edits the idle time or
// why the pod ended, or copies the findings onto another pod, gets nothing
// counted.
func TestAgentReportSigned(t *testing.T) {
	m := marker{key: []byte("0123456789abcdef0123456789abcdef")}
	k := Marks{n: m.forNode("n1")}
	at := time.Unix(1700000000, 5)
	pod := func() *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "train-0-1a2b3c4d", Namespace: "runway-team-a", UID: "u1",
			Annotations: map[string]string{AnnotationGPUIdleSeconds: "600", AnnotationEndedByAgent: "Out of GPU memory"}},
			Spec: corev1.PodSpec{NodeName: "n1"}}
		p.Annotations[AnnotationAgentReportMAC] = k.SignAgentReport(p.Namespace, p.Name, string(p.UID), "Out of GPU memory", "600", at)
		return p
	}
	ended, idle, when, ok := m.agentReport(pod())
	if !ok || ended != "Out of GPU memory" || idle != 10*time.Minute || when != at.UnixNano() {
		t.Fatalf("agentReport of a signed pod = %q %v %d %v", ended, idle, when, ok)
	}
	for what, change := range map[string]func(*corev1.Pod){
		"idle time edited": func(p *corev1.Pod) { p.Annotations[AnnotationGPUIdleSeconds] = "0" },
		"why removed":      func(p *corev1.Pod) { delete(p.Annotations, AnnotationEndedByAgent) },
		"time moved": func(p *corev1.Pod) {
			p.Annotations[AnnotationAgentReportMAC] = "9" + p.Annotations[AnnotationAgentReportMAC]
		},
		"copied to another": func(p *corev1.Pod) { p.UID = "u2" },
		"no signature":      func(p *corev1.Pod) { delete(p.Annotations, AnnotationAgentReportMAC) },
		"another key signed": func(p *corev1.Pod) {
			p.Annotations[AnnotationAgentReportMAC] = Marks{n: marker{key: []byte("another key of thirty-two bytes!")}.forNode("n1")}.SignAgentReport(p.Namespace, p.Name, string(p.UID), "Out of GPU memory", "600", at)
		},
	} {
		p := pod()
		change(p)
		if _, _, _, ok := m.agentReport(p); ok {
			t.Errorf("%s: the findings still count", what)
		}
	}
}
