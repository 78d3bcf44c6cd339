package kube_test

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/sdk"
	"github.com/runwayhq/runway/services/nodemanager/kube"
)

// TestCredentialsAsSecrets: in Kubernetes mode a workload's credentials
// become Secrets of its pod in its project's namespace: its generic values
// an Opaque Secret that the pod reads by secretKeyRef (variables) and as a
// secret volume (files), its registry credential a
// kubernetes.io/dockerconfigjson Secret in imagePullSecrets. The pod spec
// holds references only, never a value; the Secrets are owned by the pod
// (so Kubernetes' garbage collector deletes them with it) and the runtime
// deletes them itself when it deletes the pod. A workload whose credential
// is gone by the time its pod is made fails saying so, with no pod.
func TestCredentialsAsSecrets(t *testing.T) {
	e := newEnv(t, "cred")
	e.node(t, "cred-node-1", 2)
	e.start(t)
	e.project(t, "team-c", 2)
	scope := sdk.Scope{Project: "team-c"}
	apiKey, password, server := "api-value-5d1e0c9b77", "registry-pw-a3f08e21c4", "registry.example.com:5000"
	if _, err := e.rw.CreateCredential(t.Context(), scope, "api", &workloadv1.Credential{
		Type: workloadv1.CredentialType_CREDENTIAL_TYPE_GENERIC, Values: map[string]string{"API_KEY": apiKey}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.rw.CreateCredential(t.Context(), scope, "reg", &workloadv1.Credential{
		Type: workloadv1.CredentialType_CREDENTIAL_TYPE_REGISTRY, Server: server,
		Values: map[string]string{"username": "alice", "password": password}}); err != nil {
		t.Fatal(err)
	}
	image := server + "/team/train:1"
	if _, err := e.rw.SubmitWorkload(t.Context(), "team-c", "uses", workloadv1.WorkloadType_WORKLOAD_TYPE_TRAINING,
		&workloadv1.WorkloadSpec{Image: image, Command: []string{"sleep", "3600"}, MilliCpu: 100, MemoryBytes: 100 << 20,
			Env:                []*workloadv1.EnvVar{{Name: "PLAIN", Value: "x"}, {Name: "TOKEN", Credential: &workloadv1.CredentialKeyRef{Credential: "api", Key: "API_KEY"}}},
			Credentials:        []*workloadv1.CredentialMount{{Credential: "api"}, {Credential: "api", Path: "/run/secrets/api"}},
			RegistryCredential: "reg", ImagePullPolicy: workloadv1.ImagePullPolicy_IMAGE_PULL_POLICY_ALWAYS}); err != nil {
		t.Fatal(err)
	}
	e.projectOf["uses"] = "team-c"
	ns := e.projectNamespace(t, "team-c")
	pod := e.bound(t, "uses", 1)[0]

	// The pod: references, no value.
	spec, err := json.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{apiKey, password, base64.StdEncoding.EncodeToString([]byte(apiKey))} {
		if strings.Contains(string(spec), secret) {
			t.Errorf("the pod holds a credential's value:\n%s", spec)
		}
	}
	values, pull := pod.Name+"-credentials", pod.Name+"-pull"
	c := pod.Spec.Containers[0]
	if c.ImagePullPolicy != corev1.PullAlways {
		t.Errorf("imagePullPolicy %q, want Always", c.ImagePullPolicy)
	}
	if len(pod.Spec.ImagePullSecrets) != 1 || pod.Spec.ImagePullSecrets[0].Name != pull {
		t.Errorf("imagePullSecrets %v, want [%s]", pod.Spec.ImagePullSecrets, pull)
	}
	fromSecret := map[string]string{} // variable -> key of the values Secret
	at := map[string]int{}
	for i, v := range c.Env {
		at[v.Name] = i
		if v.ValueFrom != nil && v.ValueFrom.SecretKeyRef != nil {
			if v.ValueFrom.SecretKeyRef.Name != values {
				t.Errorf("variable %s from Secret %s, want %s", v.Name, v.ValueFrom.SecretKeyRef.Name, values)
			}
			fromSecret[v.Name] = v.ValueFrom.SecretKeyRef.Key
		} else if v.Name == "TOKEN" || v.Name == "API_KEY" {
			t.Errorf("variable %s is not from a Secret: %+v", v.Name, v)
		}
	}
	if len(fromSecret) != 2 || fromSecret["TOKEN"] == "" || fromSecret["API_KEY"] == "" {
		t.Errorf("variables from the Secret %v, want API_KEY and TOKEN", fromSecret)
	}
	if !(at["PLAIN"] < at["TOKEN"] && at["TOKEN"] < at["RUNWAY_WORKLOAD"] && at["API_KEY"] < at["RUNWAY_WORKLOAD"]) {
		t.Errorf("variables in the order %v; want the workload's, the credentials', then RUNWAY_* (which win)", at)
	}
	var fileKey string
	if len(pod.Spec.Volumes) != 1 || pod.Spec.Volumes[0].Secret == nil || pod.Spec.Volumes[0].Secret.SecretName != values ||
		len(c.VolumeMounts) != 1 || c.VolumeMounts[0].MountPath != "/run/secrets/api" || !c.VolumeMounts[0].ReadOnly {
		t.Errorf("volumes %+v mounts %+v, want the values Secret read-only at /run/secrets/api", pod.Spec.Volumes, c.VolumeMounts)
	} else {
		items := pod.Spec.Volumes[0].Secret.Items
		if len(items) != 1 || items[0].Path != "API_KEY" {
			t.Errorf("volume items %+v, want the file API_KEY", items)
		} else {
			fileKey = items[0].Key
		}
	}
	if sc := pod.Spec.SecurityContext; sc == nil || sc.FSGroup == nil || sc.RunAsGroup == nil || *sc.FSGroup != *sc.RunAsGroup {
		t.Errorf("pod security context %+v: want fsGroup the pod's gid, so that its files are the pod's to read", sc)
	}

	// The Secrets: their types, their values, owned by the pod.
	secrets := e.kube.CoreV1().Secrets(ns)
	vs, err := secrets.Get(t.Context(), values, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if vs.Type != corev1.SecretTypeOpaque {
		t.Errorf("values Secret type %q", vs.Type)
	}
	for what, key := range map[string]string{"TOKEN": fromSecret["TOKEN"], "API_KEY": fromSecret["API_KEY"], "file": fileKey} {
		if got := string(vs.Data[key]); got != apiKey {
			t.Errorf("%s: Secret key %q holds %q, want the credential's value", what, key, got)
		}
	}
	ps, err := secrets.Get(t.Context(), pull, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ps.Type != corev1.SecretTypeDockerConfigJson {
		t.Errorf("pull Secret type %q, want %q", ps.Type, corev1.SecretTypeDockerConfigJson)
	}
	var cfg struct {
		Auths map[string]struct{ Username, Password, Auth string }
	}
	if err := json.Unmarshal(ps.Data[corev1.DockerConfigJsonKey], &cfg); err != nil {
		t.Fatal(err)
	}
	if a := cfg.Auths[server]; len(cfg.Auths) != 1 || a.Username != "alice" || a.Password != password ||
		a.Auth != base64.StdEncoding.EncodeToString([]byte("alice:"+password)) {
		t.Errorf("pull Secret's config %+v, want alice's for %s only", cfg, server)
	}
	// Made before the pod, so that the kubelet finds them; given to it
	// once it exists.
	eventually(t, "the Secrets owned by the pod", func() string {
		for _, name := range []string{values, pull} {
			s, err := secrets.Get(t.Context(), name, metav1.GetOptions{})
			if err != nil {
				return err.Error()
			}
			own := s.OwnerReferences
			if len(own) != 1 || own[0].Kind != "Pod" || own[0].APIVersion != "v1" || own[0].Name != pod.Name || own[0].UID != pod.UID {
				return fmt.Sprintf("Secret %s owned by %+v, want the pod %s (uid %s)", s.Name, own, pod.Name, pod.UID)
			}
			if s.Labels[kube.LabelProject] != "team-c" || s.Labels[kube.LabelSecretOf] != pod.Name {
				return fmt.Sprintf("Secret %s labels %v", s.Name, s.Labels)
			}
		}
		return ""
	})

	// The pod goes with its workload, and its Secrets with it.
	if err := e.rw.DeleteWorkload(t.Context(), "team-c", "uses"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the pod's Secrets deleted with it", func() string {
		for _, name := range []string{values, pull} {
			if _, err := secrets.Get(t.Context(), name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return fmt.Sprintf("Secret %s: %v", name, err)
			}
		}
		return ""
	})

	// A credential deleted between submit and start: the workload fails
	// saying why, and no pod (nor Secret) is made.
	e.training(t, "team-c", "hog", 1, 2) // holds the node's GPUs: late waits
	if _, err := e.rw.SubmitWorkload(t.Context(), "team-c", "late", workloadv1.WorkloadType_WORKLOAD_TYPE_TRAINING,
		&workloadv1.WorkloadSpec{Image: "busybox", Command: []string{"sleep", "3600"}, MilliCpu: 100, MemoryBytes: 100 << 20,
			Gpu:         &workloadv1.GpuRequest{Amount: &workloadv1.GpuRequest_Devices{Devices: 1}},
			Credentials: []*workloadv1.CredentialMount{{Credential: "api"}}}); err != nil {
		t.Fatal(err)
	}
	e.projectOf["late"] = "team-c"
	e.bound(t, "hog", 1)
	if err := e.rw.DeleteCredential(t.Context(), sdk.Scope{Project: "team-c"}, "api"); err != nil {
		t.Fatal(err)
	}
	if err := e.rw.DeleteWorkload(t.Context(), "team-c", "hog"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "late failed for its deleted credential", func() string {
		w := e.get(t, "team-c", "late")
		if w.GetStatus().GetPhase() != workloadv1.WorkloadPhase_WORKLOAD_PHASE_FAILED {
			return w.GetStatus().GetPhase().String()
		}
		if !strings.Contains(w.GetStatus().String(), "open the workload's credentials") {
			return "status " + w.GetStatus().String()
		}
		return ""
	})
	if live, deleting := e.pods(t, "late"); len(live)+len(deleting) != 0 {
		t.Errorf("%d pods made for a workload whose credential is gone", len(live)+len(deleting))
	}
}
