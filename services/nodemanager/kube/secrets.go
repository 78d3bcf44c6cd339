package kube

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"path"
	"strconv"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/auth"
	"github.com/runwayhq/runway/pkg/clusterproto"
	"github.com/runwayhq/runway/services/nodemanager"
)

// A pod's credentials are two Secrets in its namespace, named after it:
// its generic values (Opaque; environment variables by secretKeyRef,
// files from a secret volume) and its registry credential
// (kubernetes.io/dockerconfigjson, in imagePullSecrets). The pod spec holds
// references only. They are created before the pod, so that the kubelet
// finds them when it starts it, then given the pod as their owner, so that
// Kubernetes' garbage collector deletes them with it; the runtime deletes
// them itself too when it deletes the pod.
const (
	secretValuesSuffix = "-credentials"
	secretPullSuffix   = "-pull"
	// LabelSecretOf names the pod a Secret is for.
	LabelSecretOf = "runway.io/credentials-of"
)

// podSecrets are a pod's Secrets and what its spec says of them.
type podSecrets struct {
	secrets []*corev1.Secret
	env     []corev1.EnvVar // after the workload's own variables
	volumes []corev1.Volume
	mounts  []corev1.VolumeMount
	pull    []corev1.LocalObjectReference
}

// credentialsOf opens a binding's credentials as its node's agent
// (CredentialService.ResolvePodCredentials; auth.ForNode). retry is false
// when the workload service refused, for a reason the pod's report gives.
func (r *runtime) credentialsOf(ctx context.Context, b binding) (resp *workloadv1.ResolvePodCredentialsResponse, retry bool, err error) {
	if r.cfg.Credentials == nil {
		return nil, false, fmt.Errorf("the workload names credentials, and the Kubernetes runtime reaches no workload service to open them")
	}
	node := nodemanager.NodeName(b.Node)
	ctx, cancel := context.WithTimeout(auth.ForNode(ctx, node), 30*time.Second)
	defer cancel()
	resp, err = r.cfg.Credentials.ResolvePodCredentials(ctx, &workloadv1.ResolvePodCredentialsRequest{
		Node: node, Workload: b.WorkloadName(), PodIndex: int32(b.Pod)})
	if err != nil {
		code := status.Code(err)
		retry := code == codes.Unavailable || code == codes.DeadlineExceeded || code == codes.Canceled || code == codes.Unknown
		return nil, retry, fmt.Errorf("open the workload's credentials: %s", status.Convert(err).Message())
	}
	return resp, false, nil
}

// secretsFor lays out a pod's opened credentials as its Secrets (nil
// when there are none) in namespace ns, for the pod named pod of image.
func secretsFor(ns, pod, project, image string, creds *workloadv1.ResolvePodCredentialsResponse) *podSecrets {
	if creds == nil {
		return nil
	}
	out := &podSecrets{}
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{LabelProject: project, LabelSecretOf: pod}}
	}
	if len(creds.GetEnv())+len(creds.GetFiles()) > 0 {
		name := pod + secretValuesSuffix
		s := &corev1.Secret{ObjectMeta: meta(name), Type: corev1.SecretTypeOpaque, Data: map[string][]byte{}}
		for i, e := range creds.GetEnv() {
			key := "env-" + strconv.Itoa(i)
			s.Data[key] = []byte(e.GetValue())
			out.env = append(out.env, corev1.EnvVar{Name: e.GetName(), ValueFrom: &corev1.EnvVarSource{
				SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: name}, Key: key}}})
		}
		// One volume per directory, each file an item of it: read-only,
		// 0440, group the pod's gid (the pod's fsGroup).
		dirs := map[string]int{}
		mode := int32(0o440)
		for i, f := range creds.GetFiles() {
			key := "file-" + strconv.Itoa(i)
			s.Data[key] = f.GetContent()
			dir := path.Dir(f.GetPath())
			v, ok := dirs[dir]
			if !ok {
				v = len(out.volumes)
				dirs[dir] = v
				vol := "runway-credentials-" + strconv.Itoa(v)
				out.volumes = append(out.volumes, corev1.Volume{Name: vol, VolumeSource: corev1.VolumeSource{
					Secret: &corev1.SecretVolumeSource{SecretName: name, DefaultMode: &mode}}})
				out.mounts = append(out.mounts, corev1.VolumeMount{Name: vol, MountPath: dir, ReadOnly: true})
			}
			src := out.volumes[v].Secret
			src.Items = append(src.Items, corev1.KeyToPath{Key: key, Path: path.Base(f.GetPath())})
		}
		out.secrets = append(out.secrets, s)
	}
	// As the container runtime: the password goes to its own registry only.
	if a := creds.GetRegistry(); a != nil && clusterproto.RegistryHost(a.GetServer()) == clusterproto.ImageRegistry(image) {
		name := pod + secretPullSuffix
		auth := base64.StdEncoding.EncodeToString([]byte(a.GetUsername() + ":" + a.GetPassword()))
		cfg, _ := json.Marshal(map[string]any{"auths": map[string]any{a.GetServer(): map[string]string{
			"username": a.GetUsername(), "password": a.GetPassword(), "auth": auth}}})
		out.secrets = append(out.secrets, &corev1.Secret{ObjectMeta: meta(name), Type: corev1.SecretTypeDockerConfigJson,
			Data: map[string][]byte{corev1.DockerConfigJsonKey: cfg}})
		out.pull = append(out.pull, corev1.LocalObjectReference{Name: name})
	}
	return out
}

// envVars are the variables read from the Secrets (none for nil).
func (s *podSecrets) envVars() []corev1.EnvVar {
	if s == nil {
		return nil
	}
	return s.env
}

// apply puts the Secrets' volumes and pull Secret in pod's spec; the files
// are group the pod's gid (its fsGroup), which reads them.
func (s *podSecrets) apply(pod *corev1.Pod) {
	if s == nil {
		return
	}
	c := &pod.Spec.Containers[0]
	c.VolumeMounts = append(c.VolumeMounts, s.mounts...)
	pod.Spec.Volumes = append(pod.Spec.Volumes, s.volumes...)
	pod.Spec.ImagePullSecrets = append(pod.Spec.ImagePullSecrets, s.pull...)
	if sc := pod.Spec.SecurityContext; len(s.volumes) > 0 && sc != nil && sc.RunAsGroup != nil {
		gid := *sc.RunAsGroup
		sc.FSGroup = &gid
	}
}

// createSecrets writes the Secrets, replacing any of their names left by an
// earlier try (whose pod was never made).
func (r *runtime) createSecrets(ctx context.Context, s *podSecrets) error {
	if s == nil {
		return nil
	}
	for _, sec := range s.secrets {
		api := r.cfg.Kube.CoreV1().Secrets(sec.Namespace)
		_, err := api.Create(ctx, sec, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			_, err = api.Update(ctx, sec, metav1.UpdateOptions{})
		}
		if err != nil {
			return fmt.Errorf("create secret %s/%s: %w", sec.Namespace, sec.Name, err)
		}
	}
	return nil
}

// ownSecrets makes pod the owner of its Secrets, so that they go with it.
func (r *runtime) ownSecrets(ctx context.Context, s *podSecrets, pod *corev1.Pod) error {
	if s == nil {
		return nil
	}
	owner := []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID}}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"ownerReferences": owner}})
	if err != nil {
		return err
	}
	for _, sec := range s.secrets {
		if _, err := r.cfg.Kube.CoreV1().Secrets(sec.Namespace).Patch(ctx, sec.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			return fmt.Errorf("give secret %s/%s to its pod: %w", sec.Namespace, sec.Name, err)
		}
	}
	return nil
}

// deleteSecrets deletes the Secrets of pod p (the garbage collector would,
// after it; a cluster without one, or a pod gone while the runtime was
// down, still loses them).
func (r *runtime) deleteSecrets(ctx context.Context, p *corev1.Pod) error {
	for _, suffix := range []string{secretValuesSuffix, secretPullSuffix} {
		if !usesSecret(p, p.Name+suffix) {
			continue // most pods have none: no request for them
		}
		err := r.cfg.Kube.CoreV1().Secrets(p.Namespace).Delete(ctx, p.Name+suffix, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete secret %s/%s: %w", p.Namespace, p.Name+suffix, err)
		}
	}
	return nil
}

// usesSecret says whether pod p's spec names Secret name.
func usesSecret(p *corev1.Pod, name string) bool {
	for _, ref := range p.Spec.ImagePullSecrets {
		if ref.Name == name {
			return true
		}
	}
	for _, v := range p.Spec.Volumes {
		if v.Secret != nil && v.Secret.SecretName == name {
			return true
		}
	}
	for _, c := range p.Spec.Containers {
		for _, e := range c.Env {
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil && e.ValueFrom.SecretKeyRef.Name == name {
				return true
			}
		}
	}
	return false
}
