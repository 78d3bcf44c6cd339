package kube

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nodemanagerv1 "github.com/runwayhq/runway/gen/go/runway/nodemanager/v1"
	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/services/nodemanager"
)

func TestNodeID(t *testing.T) {
	for name, want := range map[string]string{
		"gpu-node-1":                   "gpu-node-1",
		"ip-10-0-0-1.ec2.internal":     "ip-10-0-0-1-ec2-internal",
		"Worker_A":                     "worker-a",
		strings.Repeat("a", 70) + ".x": strings.Repeat("a", 63),
		"...":                          "",
	} {
		if got := nodeID(name); got != want {
			t.Errorf("nodeID(%q) = %q, want %q", name, got, want)
		}
	}
}

func TestPodNameUniquePerBinding(t *testing.T) {
	b := nodemanager.Binding{Node: "node-1", Project: "team-a", Workload: strings.Repeat("w", 70), Pod: 3}
	m := marker{key: []byte("k")}
	a, c := m.podName(b, 10), m.podName(b, 11)
	if a == c || a == (marker{key: []byte("other")}).podName(b, 10) {
		t.Errorf("the pods of two bindings of one pod, or under two keys, share the name %q", a)
	}
	if len(a) > 63 || strings.Contains(a, "--") {
		t.Errorf("podName = %q: want at most 63 characters, no empty segment", a)
	}
}

func TestForeignWorkloadID(t *testing.T) {
	id := foreignWorkloadID("My_Notebook.0", "uid-1")
	if !strings.HasPrefix(id, "my-notebook-0-") || id == foreignWorkloadID("My_Notebook.0", "uid-2") {
		t.Errorf("foreignWorkloadID = %q: want the name made an id plus a hash of the uid", id)
	}
	if id := foreignWorkloadID("___", "u"); !strings.HasPrefix(id, "pod-") {
		t.Errorf("foreignWorkloadID of a name with no usable character = %q, want pod-…", id)
	}
}

func TestReadiness(t *testing.T) {
	cond := func(s corev1.ConditionStatus) []corev1.NodeCondition {
		return []corev1.NodeCondition{{Type: corev1.NodeReady, Status: s, Reason: "R"}}
	}
	for _, tc := range []struct {
		name string
		node corev1.Node
		want nodemanagerv1.Readiness
	}{
		{"ready", corev1.Node{Status: corev1.NodeStatus{Conditions: cond(corev1.ConditionTrue)}}, nodemanagerv1.Readiness_READINESS_READY},
		{"unknown", corev1.Node{Status: corev1.NodeStatus{Conditions: cond(corev1.ConditionUnknown)}}, nodemanagerv1.Readiness_READINESS_NOT_READY},
		{"no condition", corev1.Node{}, nodemanagerv1.Readiness_READINESS_NOT_READY},
		// A cordon is a drain without eviction: Ready, drained.
		{"cordoned", corev1.Node{Spec: corev1.NodeSpec{Unschedulable: true}, Status: corev1.NodeStatus{Conditions: cond(corev1.ConditionTrue)}},
			nodemanagerv1.Readiness_READINESS_READY},
	} {
		if got, _ := readiness(&tc.node); got != tc.want {
			t.Errorf("%s: readiness = %v, want %v", tc.name, got, tc.want)
		}
		if drained, evicts, _ := cordon(&tc.node, nil); drained != tc.node.Spec.Unschedulable || evicts {
			t.Errorf("%s: drained = %v evicts %v, want %v, false", tc.name, drained, evicts, tc.node.Spec.Unschedulable)
		}
	}
}

// Taints Runway's pods do not tolerate drain the node: NoSchedule without
// eviction, NoExecute with it; a tolerated taint, or PreferNoSchedule, is
// no drain.
func TestCordonTaints(t *testing.T) {
	drain := corev1.Taint{Key: "runai", Value: "drain", Effect: corev1.TaintEffectNoExecute}
	gpuOnly := corev1.Taint{Key: "nvidia.com/gpu", Effect: corev1.TaintEffectNoSchedule}
	soft := corev1.Taint{Key: "soft", Effect: corev1.TaintEffectPreferNoSchedule}
	tolerateGPU := []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists}}
	for _, tc := range []struct {
		name          string
		taints        []corev1.Taint
		tolerations   []corev1.Toleration
		drained, evic bool
	}{
		{"untainted", nil, nil, false, false},
		{"NoSchedule", []corev1.Taint{gpuOnly}, nil, true, false},
		{"NoSchedule tolerated", []corev1.Taint{gpuOnly}, tolerateGPU, false, false},
		{"NoExecute", []corev1.Taint{drain}, tolerateGPU, true, true},
		{"NoExecute wins", []corev1.Taint{gpuOnly, drain}, nil, true, true},
		{"PreferNoSchedule", []corev1.Taint{soft}, nil, false, false},
		// The node lifecycle controller's taints of a NotReady node are its
		// readiness (the scheduler's grace), not a drain.
		{"not-ready", []corev1.Taint{{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoExecute},
			{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule}}, nil, false, false},
		{"unreachable", []corev1.Taint{{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute}}, nil, false, false},
		{"unreachable and a drain", []corev1.Taint{{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute}, drain}, nil, true, true},
	} {
		n := &corev1.Node{Spec: corev1.NodeSpec{Taints: tc.taints}}
		drained, evicts, why := cordon(n, tc.tolerations)
		if drained != tc.drained || evicts != tc.evic || drained != (why != "") {
			t.Errorf("%s: drained %v evicts %v (%q), want %v %v", tc.name, drained, evicts, why, tc.drained, tc.evic)
		}
	}
}

func TestStateOf(t *testing.T) {
	bound := func(ph corev1.PodPhase, cs ...corev1.ContainerStatus) *corev1.Pod {
		return &corev1.Pod{Spec: corev1.PodSpec{NodeName: "n"}, Status: corev1.PodStatus{Phase: ph, ContainerStatuses: cs}}
	}
	oom := corev1.ContainerStatus{State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled"}}}
	for _, tc := range []struct {
		pod  *corev1.Pod
		want workloadv1.PodState
		code int32
	}{
		{&corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodRunning}}, workloadv1.PodState_POD_STATE_UNSPECIFIED, 0},
		{bound(corev1.PodPending), workloadv1.PodState_POD_STATE_UNSPECIFIED, 0},
		{bound(corev1.PodRunning), workloadv1.PodState_POD_STATE_RUNNING, 0},
		{bound(corev1.PodSucceeded), workloadv1.PodState_POD_STATE_SUCCEEDED, 0},
		{bound(corev1.PodFailed, oom), workloadv1.PodState_POD_STATE_FAILED, 137},
	} {
		got, code, msg := stateOf(tc.pod)
		if got != tc.want || code != tc.code {
			t.Errorf("stateOf(phase %s, node %q) = %v %d %q, want %v %d", tc.pod.Status.Phase, tc.pod.Spec.NodeName, got, code, msg, tc.want, tc.code)
		}
	}
}

// A user's pod is a project's only from that project's namespace: labels
// cannot place it in another project, and a pod Runway made (its workload
// label) is never taken for a user's.
func TestForeignProjectIsTheNamespaces(t *testing.T) {
	pod := func(ns string, labels map[string]string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "nb", Namespace: ns, UID: "u", Labels: labels},
			Spec: corev1.PodSpec{SchedulerName: SchedulerName}}
	}
	for _, c := range []struct {
		p    *corev1.Pod
		want string
	}{
		{pod("runway-team-a", nil), "team-a"},
		{pod("runway-team-a", map[string]string{LabelProject: "team-a"}), "team-a"},
		{pod("runway-team-a", map[string]string{LabelProject: "team-b"}), ""},
		{pod("default", map[string]string{LabelProject: "team-a"}), ""},
		{pod("runway-", nil), ""},
		{pod("runway-team-a", map[string]string{LabelWorkload: "projects/team-b/workloads/x"}), ""},
	} {
		if got := foreignProject(c.p); got != c.want {
			t.Errorf("pod in %s with %v: project %q, want %q", c.p.Namespace, c.p.Labels, got, c.want)
		}
	}
}

func TestParseToleration(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want corev1.Toleration
		bad  bool
	}{
		{in: "runai=drain:NoExecute", want: corev1.Toleration{Key: "runai", Operator: corev1.TolerationOpEqual, Value: "drain", Effect: corev1.TaintEffectNoExecute}},
		{in: "nvidia.com/gpu:NoSchedule", want: corev1.Toleration{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
		{in: "dedicated", want: corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpExists}},
		{in: "x:Sometimes", bad: true},
		{in: "=v:NoSchedule", bad: true},
	} {
		got, err := ParseToleration(tc.in)
		if (err != nil) != tc.bad || !tc.bad && got != tc.want {
			t.Errorf("ParseToleration(%q) = %+v, %v; want %+v (error %v)", tc.in, got, err, tc.want, tc.bad)
		}
	}
}

// Runway's pods tolerate a NotReady or unreachable node for the grace,
// rounded up to a second, and do not when there is none.
func TestLapseTolerations(t *testing.T) {
	r := &runtime{cfg: Config{NodeLostGrace: 90*time.Second + time.Millisecond}}
	got := r.lapseTolerations()
	if len(got) != 2 {
		t.Fatalf("tolerations %v, want not-ready and unreachable", got)
	}
	for i, key := range []string{corev1.TaintNodeNotReady, corev1.TaintNodeUnreachable} {
		if got[i].Key != key || got[i].Effect != corev1.TaintEffectNoExecute || got[i].Operator != corev1.TolerationOpExists ||
			got[i].TolerationSeconds == nil || *got[i].TolerationSeconds != 91 {
			t.Errorf("toleration %d: %+v, want %s:NoExecute for 91 s", i, got[i], key)
		}
	}
	r.cfg.NodeLostGrace = -1
	if got := r.lapseTolerations(); got != nil {
		t.Errorf("no grace: tolerations %v, want none", got)
	}
}
