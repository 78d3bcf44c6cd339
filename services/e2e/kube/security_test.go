package kube_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/runner"
	"github.com/runwayhq/runway/pkg/sdk"
)

// A workload's pod, read back from the API server, runs as its project's
// uid and gid with runAsNonRoot, no privilege escalation, every
// capability dropped, the runtime's seccomp profile, no host namespace and
// no service account token: what the API server's own PodSecurity
// admission calls "restricted" accepts it. Root and a capability reach
// the pod only where a policy of the project allows them (a submission
// without one is refused), and then exactly those: that pod is no longer
// "restricted", and another project still may not.
func TestPodSecurityContext(t *testing.T) {
	e := newEnv(t, "sec")
	e.node(t, "sec-node-1", 4)
	e.start(t)
	e.project(t, "team-a", 2)
	e.project(t, "team-b", 2)
	// A namespace where the API server enforces the restricted profile:
	// a dry-run create there says whether a pod's spec meets it.
	restricted := "sec-restricted"
	if _, err := e.kube.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: restricted,
		Labels: map[string]string{"pod-security.kubernetes.io/enforce": "restricted"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.kube.CoreV1().Namespaces().Delete(t.Context(), restricted, metav1.DeleteOptions{}) })
	admitted := func(p corev1.Pod) error {
		c := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: restricted}, Spec: p.Spec}
		_, err := e.kube.CoreV1().Pods(restricted).Create(t.Context(), c, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err
	}

	e.secured(t, "team-a", "plain", nil)
	e.secured(t, "team-b", "plain-b", nil)
	for _, w := range []struct {
		id, project string
	}{{"plain", "team-a"}, {"plain-b", "team-b"}} {
		p := e.bound(t, w.id, 1)[0]
		uid := int64(runner.ProjectUID(w.project))
		if why := hardened(p, uid, nil); why != "" {
			t.Errorf("%s's pod: %s", w.id, why)
		}
		if err := admitted(p); err != nil {
			t.Errorf("%s's pod is not restricted: %v", w.id, err)
		}
	}

	root := &workloadv1.ContainerSecurity{RunAsRoot: true}
	raw := &workloadv1.ContainerSecurity{AddCapabilities: []string{"NET_RAW"}}
	for field, sec := range map[string]*workloadv1.ContainerSecurity{"security.run_as_root": root, "security.add_capabilities": raw} {
		_, err := e.rw.SubmitWorkload(t.Context(), "team-a", "asks", workloadv1.WorkloadType_WORKLOAD_TYPE_TRAINING, secSpec(sec))
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), field) {
			t.Errorf("%s without a policy: %v, want INVALID_ARGUMENT naming it", field, err)
		}
	}
	if _, err := e.rw.SetPolicy(t.Context(), sdk.Scope{Project: "team-a"}, "training", &workloadv1.Policy{Rules: map[string]*workloadv1.FieldRule{
		"security.runAsRoot":       {Options: []string{"true"}},
		"security.addCapabilities": {Options: []string{"NET_RAW", "CHOWN"}},
	}}); err != nil {
		t.Fatal(err)
	}
	e.secured(t, "team-a", "rooted", &workloadv1.ContainerSecurity{RunAsRoot: true, AddCapabilities: []string{"NET_RAW"}})
	p := e.bound(t, "rooted", 1)[0]
	if why := hardened(p, 0, []corev1.Capability{"NET_RAW"}); why != "" {
		t.Errorf("the policy-allowed pod: %s", why)
	}
	if err := admitted(p); err == nil || !strings.Contains(err.Error(), "restricted") {
		t.Errorf("the pod with root and NET_RAW passes the restricted profile (%v): it does not have them", err)
	}
	e.secured(t, "team-a", "capped", &workloadv1.ContainerSecurity{AddCapabilities: []string{"CHOWN"}})
	if why := hardened(e.bound(t, "capped", 1)[0], int64(runner.ProjectUID("team-a")), []corev1.Capability{"CHOWN"}); why != "" {
		t.Errorf("the pod with CHOWN alone: %s", why)
	}
	if _, err := e.rw.SubmitWorkload(t.Context(), "team-b", "rooted-b", workloadv1.WorkloadType_WORKLOAD_TYPE_TRAINING, secSpec(root)); status.Code(err) != codes.InvalidArgument {
		t.Errorf("root in team-b, under no policy: %v, want INVALID_ARGUMENT", err)
	}
}

// secured submits a one-pod CPU training of project with sec.
func (e *env) secured(t *testing.T, project, id string, sec *workloadv1.ContainerSecurity) {
	t.Helper()
	if _, err := e.rw.SubmitWorkload(t.Context(), project, id, workloadv1.WorkloadType_WORKLOAD_TYPE_TRAINING, secSpec(sec)); err != nil {
		t.Fatalf("CreateWorkload(%s/%s): %v", project, id, err)
	}
	e.projectOf[id] = project
}

func secSpec(sec *workloadv1.ContainerSecurity) *workloadv1.WorkloadSpec {
	return &workloadv1.WorkloadSpec{Image: "busybox", Command: []string{"sleep", "3600"}, MilliCpu: 100, MemoryBytes: 100 << 20,
		Gpu: &workloadv1.GpuRequest{Amount: &workloadv1.GpuRequest_Devices{Devices: 1}}, Security: sec}
}

// hardened says what of the pod's spec is not the runtime's default for
// uid with exactly the capabilities add ("" when all is).
func hardened(p corev1.Pod, uid int64, add []corev1.Capability) string {
	var why []string
	s := p.Spec
	if s.HostNetwork || s.HostPID || s.HostIPC || s.AutomountServiceAccountToken == nil || *s.AutomountServiceAccountToken {
		why = append(why, fmt.Sprintf("host network %v pid %v ipc %v, service account token %v", s.HostNetwork, s.HostPID, s.HostIPC, s.AutomountServiceAccountToken))
	}
	ps := s.SecurityContext
	if ps == nil || ps.RunAsUser == nil || *ps.RunAsUser != uid || ps.RunAsGroup == nil || *ps.RunAsGroup != uid ||
		ps.RunAsNonRoot == nil || *ps.RunAsNonRoot != (uid != 0) ||
		ps.SeccompProfile == nil || ps.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		why = append(why, fmt.Sprintf("pod security context %+v, want uid and gid %d, runAsNonRoot %v, seccomp RuntimeDefault", ps, uid, uid != 0))
	}
	if len(s.Containers) != 1 || len(s.InitContainers) != 0 || len(s.EphemeralContainers) != 0 {
		return strings.Join(append(why, fmt.Sprintf("%d containers, %d init", len(s.Containers), len(s.InitContainers))), "; ")
	}
	c := s.Containers[0].SecurityContext
	switch {
	case c == nil || c.Capabilities == nil:
		why = append(why, "no container security context")
	case c.Privileged == nil || *c.Privileged || c.AllowPrivilegeEscalation == nil || *c.AllowPrivilegeEscalation:
		why = append(why, fmt.Sprintf("privileged %v, allowPrivilegeEscalation %v", c.Privileged, c.AllowPrivilegeEscalation))
	case !slices.Equal(c.Capabilities.Drop, []corev1.Capability{"ALL"}) || !slices.Equal(c.Capabilities.Add, add):
		why = append(why, fmt.Sprintf("capabilities drop %v add %v, want ALL and %v", c.Capabilities.Drop, c.Capabilities.Add, add))
	case c.RunAsUser == nil || *c.RunAsUser != uid || c.RunAsNonRoot == nil || *c.RunAsNonRoot != (uid != 0) ||
		c.SeccompProfile == nil || c.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault:
		why = append(why, fmt.Sprintf("container runs as %v (non-root %v), seccomp %v", c.RunAsUser, c.RunAsNonRoot, c.SeccompProfile))
	}
	for _, v := range s.Volumes {
		if v.HostPath != nil {
			why = append(why, "host path "+v.HostPath.Path)
		}
	}
	return strings.Join(why, "; ")
}
