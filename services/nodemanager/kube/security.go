package kube

import (
	corev1 "k8s.io/api/core/v1"

	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/runner"
)

// podSecurity is the security context of a pod of project's workload: the
// container runtime's defaults (pkg/runner/container), said to the
// kubelet. It runs as the project's uid and gid (runner.ProjectUID, the
// same as on the container runtime) with runAsNonRoot, so that the kubelet
// refuses uid 0 whatever the image says; every capability dropped; no
// privilege escalation (no_new_privs: setuid binaries gain nothing); the
// runtime's default seccomp profile; never privileged. podSpec adds no
// host namespace (hostNetwork, hostPID, hostIPC) and no service account
// token. Root and named capabilities only as sec asks, which the workload
// service accepted only where a policy allowed them
// (pkg/policy.Relaxations).
func podSecurity(project string, sec *workloadv1.ContainerSecurity) (*corev1.PodSecurityContext, *corev1.SecurityContext) {
	uid := int64(runner.ProjectUID(project))
	if sec.GetRunAsRoot() {
		uid = 0
	}
	pod := &corev1.PodSecurityContext{
		RunAsUser: new(uid), RunAsGroup: new(uid), RunAsNonRoot: new(uid != 0),
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
	caps := &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}
	for _, c := range sec.GetAddCapabilities() {
		caps.Add = append(caps.Add, corev1.Capability(c))
	}
	ctr := &corev1.SecurityContext{
		Capabilities: caps, Privileged: new(false), AllowPrivilegeEscalation: new(false),
		RunAsUser: new(uid), RunAsGroup: new(uid), RunAsNonRoot: new(uid != 0),
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
	return pod, ctr
}
