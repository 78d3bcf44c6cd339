package kube

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
)

// The commit a clone init container says it cloned is in the pod's run
// report while it runs and once it succeeded; a failed clone is the
// failed pod's reason (its log, as FallbackToLogsOnError keeps it).
func TestCloneNotesInReports(t *testing.T) {
	pod := func(phase corev1.PodPhase, init corev1.ContainerStateTerminated) *corev1.Pod {
		return &corev1.Pod{Spec: corev1.PodSpec{NodeName: "n"}, Status: corev1.PodStatus{Phase: phase,
			InitContainerStatuses: []corev1.ContainerStatus{{Name: "clone-1", State: corev1.ContainerState{Terminated: &init}}}}}
	}
	ok := corev1.ContainerStateTerminated{Message: "cloned https://git.example.com/r.git at 0123abcd into /src\n"}
	for _, phase := range []corev1.PodPhase{corev1.PodRunning, corev1.PodSucceeded} {
		if _, _, msg := stateOf(pod(phase, ok)); msg != "Data sources: cloned https://git.example.com/r.git at 0123abcd into /src." {
			t.Errorf("%s: message %q", phase, msg)
		}
	}
	failed := corev1.ContainerStateTerminated{ExitCode: 128, Reason: "Error", Message: "fatal: repository 'https://git.example.com/r.git/' not found"}
	state, code, msg := stateOf(pod(corev1.PodFailed, failed))
	if state != workloadv1.PodState_POD_STATE_FAILED || code != 128 || !strings.Contains(msg, "not found") {
		t.Errorf("a failed clone: %s %d %q", state, code, msg)
	}
	if _, _, msg := stateOf(pod(corev1.PodRunning, corev1.ContainerStateTerminated{Message: "something else"})); msg != "" {
		t.Errorf("a message that is no clone's: %q", msg)
	}
}
