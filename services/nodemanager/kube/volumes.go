package kube

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
)

// DefaultGitImage is the image of the init container that clones a git
// data source (Config.GitImage when set): any image with git and sh on its
// PATH. The clone runs as the pod's user, into an emptyDir the main
// container mounts.
const DefaultGitImage = "docker.io/alpine/git:latest"

// gitScript clones $REPO into $DIR and checks out $REV (a branch of the
// remote, a tag or a commit; the default branch when empty) detached. The
// values come in the environment, never in the script: a tenant's URL or
// revision is no shell.
const gitScript = `set -e
export GIT_ALLOW_PROTOCOL=http:https GIT_TERMINAL_PROMPT=0 HOME=/tmp
git clone --quiet --no-checkout --no-recurse-submodules -- "$REPO" "$DIR"
cd "$DIR"
if [ -z "$REV" ]; then sha=$(git rev-parse --verify HEAD); else
  sha=$(git rev-parse --verify --quiet --end-of-options "refs/remotes/origin/$REV^{commit}" ||
        git rev-parse --verify --quiet --end-of-options "refs/tags/$REV^{commit}" ||
        git rev-parse --verify --end-of-options "$REV^{commit}"); fi
git -c advice.detachedHead=false checkout --quiet --detach "$sha"
echo "cloned $REPO at $sha into $MOUNT" | tee /dev/termination-log`

// unmountable says why the Kubernetes runtime cannot give a workload its
// data sources ("" when it can).
func unmountable(ws *workloadv1.WorkloadSpec) string {
	for _, m := range ws.GetDataSources() {
		if m.GetSource().GetS3() != nil {
			return fmt.Sprintf("The s3 data source at %s is not mounted in Kubernetes mode yet.", m.GetSource().GetMountPath())
		}
	}
	return ""
}

// claimName is the claim made for data source i of a workload's pod
// (stable across the pod's placements: a kept claim is found again).
func claimName(b binding, i int) string {
	return "rw-" + b.Workload + "-" + strconv.Itoa(b.Pod) + "-data-" + strconv.Itoa(i)
}

// dataVolumes puts a workload's data sources on its pod: a hostPath
// (which must be a directory), NFS, claim, ConfigMap or Secret volume
// each, and for git an emptyDir that an init container clones into;
// every one mounted in the main container at its path.
func dataVolumes(pod *corev1.Pod, b binding, ws *workloadv1.WorkloadSpec, gitImage string) {
	main := &pod.Spec.Containers[0]
	for i, m := range ws.GetDataSources() {
		s := m.GetSource()
		name := "data-" + strconv.Itoa(i)
		v := corev1.Volume{Name: name}
		switch {
		case s.GetHostPath() != nil:
			v.HostPath = &corev1.HostPathVolumeSource{Path: s.GetHostPath().GetPath(), Type: new(corev1.HostPathDirectory)}
		case s.GetNfs() != nil:
			v.NFS = &corev1.NFSVolumeSource{Server: s.GetNfs().GetServer(), Path: s.GetNfs().GetPath(), ReadOnly: s.GetReadOnly()}
		case s.GetPvc() != nil:
			claim := s.GetPvc().GetClaimName()
			if claim == "" {
				claim = claimName(b, i)
			}
			v.PersistentVolumeClaim = &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim, ReadOnly: s.GetReadOnly()}
		case s.GetConfigMap() != nil:
			v.ConfigMap = &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: s.GetConfigMap().GetName()}}
		case s.GetSecret() != nil:
			v.Secret = &corev1.SecretVolumeSource{SecretName: s.GetSecret().GetName()}
		case s.GetGit() != nil:
			v.EmptyDir = &corev1.EmptyDirVolumeSource{}
			pod.Spec.InitContainers = append(pod.Spec.InitContainers, corev1.Container{
				Name: "clone-" + strconv.Itoa(i), Image: gitImage, Command: []string{"sh", "-c", gitScript},
				Env: []corev1.EnvVar{{Name: "REPO", Value: s.GetGit().GetRepository()}, {Name: "REV", Value: s.GetGit().GetRevision()},
					{Name: "DIR", Value: "/runway/clone"}, {Name: "MOUNT", Value: s.GetMountPath()}},
				// Its message is the commit cloned, or git's error.
				TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
				VolumeMounts:             []corev1.VolumeMount{{Name: name, MountPath: "/runway/clone"}},
				SecurityContext:          main.SecurityContext,
			})
		default:
			continue
		}
		pod.Spec.Volumes = append(pod.Spec.Volumes, v)
		main.VolumeMounts = append(main.VolumeMounts, corev1.VolumeMount{Name: name, MountPath: s.GetMountPath(), ReadOnly: s.GetReadOnly()})
	}
}

// createClaims makes the claims the pod's new-claim data sources name
// (from a storage class and a size), in its namespace: kept ones without
// an owner, found again by the workload's next pods; the others owned by
// the pod, so that Kubernetes deletes them with it.
func (r *runtime) createClaims(ctx context.Context, pod *corev1.Pod, b binding, ws *workloadv1.WorkloadSpec) error {
	for i, m := range ws.GetDataSources() {
		p := m.GetSource().GetPvc()
		if p == nil || p.GetClaimName() != "" {
			continue
		}
		c := &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: claimName(b, i), Namespace: pod.Namespace,
				Labels: map[string]string{LabelProject: b.Project, LabelWorkload: b.Workload, LabelPodIndex: strconv.Itoa(b.Pod)}},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				StorageClassName: new(p.GetStorageClass()),
				Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceStorage: *resource.NewQuantity(p.GetSizeBytes(), resource.BinarySI)}},
			},
		}
		if p.GetLifetime() == workloadv1.PvcLifetime_PVC_LIFETIME_DELETED_WITH_WORKLOAD {
			c.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID}}
		}
		_, err := r.cfg.Kube.CoreV1().PersistentVolumeClaims(pod.Namespace).Create(ctx, c, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create claim %s/%s: %w", pod.Namespace, c.Name, err)
		}
	}
	return nil
}

// cloneNotes is what a pod's clone init containers said they cloned
// ("cloned URL at SHA into PATH", their termination messages), for its run
// report and so the workload's STARTED event.
func cloneNotes(p *corev1.Pod) string {
	var notes []string
	for _, cs := range p.Status.InitContainerStatuses {
		if t := cs.State.Terminated; t != nil && t.ExitCode == 0 && strings.HasPrefix(cs.Name, "clone-") && strings.HasPrefix(t.Message, "cloned ") {
			notes = append(notes, strings.TrimSpace(t.Message))
		}
	}
	if len(notes) == 0 {
		return ""
	}
	return "Data sources: " + strings.Join(notes, "; ") + "."
}
