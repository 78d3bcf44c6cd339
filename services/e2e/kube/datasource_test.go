package kube_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/sdk"
	"github.com/runwayhq/runway/services/nodemanager/kube"
)

// TestDataSourcesOnKubernetes: the Kubernetes runtime writes a workload's
// data sources into its pod, against the real kube-apiserver: a hostPath
// (a directory), NFS, an existing claim, a claim made from a storage class
// (owned by the pod when deleted with the workload, unowned when kept),
// ConfigMap and Secret volumes, and a git repository as an emptyDir an
// init container clones into (the URL and revision in its environment,
// not its script); each mounted at its path, read-only where asked. An s3
// data source fails the workload saying so, and no pod is made.
func TestDataSourcesOnKubernetes(t *testing.T) {
	e := newEnv(t, "data")
	e.node(t, "data-node-1", 2)
	e.start(t)
	e.project(t, "team-d", 2)
	mk := func(id string, d *workloadv1.DataSource) {
		t.Helper()
		if _, err := e.rw.CreateDataSource(t.Context(), sdk.Scope{Project: "team-d"}, id, d); err != nil {
			t.Fatalf("CreateDataSource(%s): %v", id, err)
		}
	}
	mk("host", &workloadv1.DataSource{MountPath: "/host", ReadOnly: true, Source: &workloadv1.DataSource_HostPath{HostPath: &workloadv1.HostPathSource{Path: "/srv/data"}}})
	mk("kept", &workloadv1.DataSource{MountPath: "/kept", Source: &workloadv1.DataSource_Pvc{Pvc: &workloadv1.PvcSource{
		StorageClass: "fast", SizeBytes: 1 << 30, Lifetime: workloadv1.PvcLifetime_PVC_LIFETIME_KEPT}}})
	mk("scratch", &workloadv1.DataSource{MountPath: "/scratch", Source: &workloadv1.DataSource_Pvc{Pvc: &workloadv1.PvcSource{
		StorageClass: "fast", SizeBytes: 2 << 30, Lifetime: workloadv1.PvcLifetime_PVC_LIFETIME_DELETED_WITH_WORKLOAD}}})
	spec := &workloadv1.WorkloadSpec{Image: "busybox", Command: []string{"sleep", "3600"}, MilliCpu: 100, MemoryBytes: 100 << 20,
		DataSources: []*workloadv1.DataSourceMount{
			{DataSource: "host"},
			{Source: &workloadv1.DataSource{MountPath: "/nfs", Source: &workloadv1.DataSource_Nfs{Nfs: &workloadv1.NfsSource{Server: "nfs.example.com", Path: "/exports/a"}}}},
			{Source: &workloadv1.DataSource{MountPath: "/claim", ReadOnly: true, Source: &workloadv1.DataSource_Pvc{Pvc: &workloadv1.PvcSource{ClaimName: "shared"}}}},
			{DataSource: "kept"},
			{DataSource: "scratch"},
			{Source: &workloadv1.DataSource{MountPath: "/cfg", Source: &workloadv1.DataSource_ConfigMap{ConfigMap: &workloadv1.ConfigMapSource{Name: "settings"}}}},
			{Source: &workloadv1.DataSource{MountPath: "/sec", Source: &workloadv1.DataSource_Secret{Secret: &workloadv1.SecretSource{Name: "tls"}}}},
			{Source: &workloadv1.DataSource{MountPath: "/src", ReadOnly: true, Source: &workloadv1.DataSource_Git{Git: &workloadv1.GitSource{
				Repository: "https://git.example.com/org/repo.git", Revision: "v1.2"}}}},
		}}
	if _, err := e.rw.SubmitWorkload(t.Context(), "team-d", "mounts", workloadv1.WorkloadType_WORKLOAD_TYPE_TRAINING, spec); err != nil {
		t.Fatal(err)
	}
	e.projectOf["mounts"] = "team-d"
	pod := e.bound(t, "mounts", 1)[0]

	vols := map[string]corev1.Volume{}
	for _, v := range pod.Spec.Volumes {
		vols[v.Name] = v
	}
	mounts := map[string]corev1.VolumeMount{}
	for _, m := range pod.Spec.Containers[0].VolumeMounts {
		mounts[m.MountPath] = m
	}
	want := []struct {
		path     string
		readOnly bool
		check    func(v corev1.Volume) bool
	}{
		{"/host", true, func(v corev1.Volume) bool {
			return v.HostPath != nil && v.HostPath.Path == "/srv/data" && v.HostPath.Type != nil && *v.HostPath.Type == corev1.HostPathDirectory
		}},
		{"/nfs", false, func(v corev1.Volume) bool {
			return v.NFS != nil && v.NFS.Server == "nfs.example.com" && v.NFS.Path == "/exports/a"
		}},
		{"/claim", true, func(v corev1.Volume) bool {
			return v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == "shared"
		}},
		{"/kept", false, func(v corev1.Volume) bool {
			return v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == "rw-mounts-0-data-3"
		}},
		{"/scratch", false, func(v corev1.Volume) bool {
			return v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == "rw-mounts-0-data-4"
		}},
		{"/cfg", false, func(v corev1.Volume) bool { return v.ConfigMap != nil && v.ConfigMap.Name == "settings" }},
		{"/sec", false, func(v corev1.Volume) bool { return v.Secret != nil && v.Secret.SecretName == "tls" }},
		{"/src", true, func(v corev1.Volume) bool { return v.EmptyDir != nil }},
	}
	for _, w := range want {
		m, ok := mounts[w.path]
		if !ok || m.ReadOnly != w.readOnly || !w.check(vols[m.Name]) {
			t.Errorf("mount %s: %+v, volume %+v", w.path, m, vols[m.Name])
		}
	}
	if len(pod.Spec.InitContainers) != 1 {
		t.Fatalf("init containers %+v, want the clone", pod.Spec.InitContainers)
	}
	ic := pod.Spec.InitContainers[0]
	env := map[string]string{}
	for _, v := range ic.Env {
		env[v.Name] = v.Value
	}
	if ic.Image != kube.DefaultGitImage || env["REPO"] != "https://git.example.com/org/repo.git" || env["REV"] != "v1.2" || env["MOUNT"] != "/src" ||
		ic.TerminationMessagePolicy != corev1.TerminationMessageFallbackToLogsOnError ||
		strings.Contains(strings.Join(ic.Command, " "), "git.example.com") || len(ic.VolumeMounts) != 1 || ic.VolumeMounts[0].Name != mounts["/src"].Name ||
		ic.SecurityContext == nil || ic.SecurityContext.RunAsNonRoot == nil || !*ic.SecurityContext.RunAsNonRoot {
		t.Errorf("clone init container %+v", ic)
	}

	ns := kube.ProjectNamespace("team-d")
	claims := map[string]corev1.PersistentVolumeClaim{}
	eventually(t, "the two claims made", func() string {
		l, err := e.kube.CoreV1().PersistentVolumeClaims(ns).List(t.Context(), metav1.ListOptions{})
		if err != nil {
			return err.Error()
		}
		for _, c := range l.Items {
			claims[c.Name] = c
		}
		if len(claims) != 2 {
			return "claims " + strings.Join(mapKeys(claims), ", ")
		}
		return ""
	})
	kept, scratch := claims["rw-mounts-0-data-3"], claims["rw-mounts-0-data-4"]
	if len(kept.OwnerReferences) != 0 || *kept.Spec.StorageClassName != "fast" || kept.Spec.Resources.Requests.Storage().Value() != 1<<30 {
		t.Errorf("kept claim %+v", kept)
	}
	if len(scratch.OwnerReferences) != 1 || scratch.OwnerReferences[0].UID != pod.UID || scratch.OwnerReferences[0].Kind != "Pod" ||
		scratch.Spec.Resources.Requests.Storage().Value() != 2<<30 {
		t.Errorf("scratch claim %+v, want it owned by pod %s", scratch, pod.UID)
	}
	t.Cleanup(func() {
		for name := range claims {
			_ = e.kube.CoreV1().PersistentVolumeClaims(ns).Delete(t.Context(), name, metav1.DeleteOptions{})
		}
	})

	_, err := e.rw.SubmitWorkload(t.Context(), "team-d", "bucket", workloadv1.WorkloadType_WORKLOAD_TYPE_TRAINING,
		&workloadv1.WorkloadSpec{Image: "busybox", Command: []string{"true"}, MilliCpu: 100, MemoryBytes: 100 << 20,
			DataSources: []*workloadv1.DataSourceMount{{Source: &workloadv1.DataSource{MountPath: "/s3",
				Source: &workloadv1.DataSource_S3{S3: &workloadv1.S3Source{Endpoint: "http://127.0.0.1:9000", Bucket: "data"}}}}}})
	if err != nil {
		t.Fatal(err)
	}
	e.projectOf["bucket"] = "team-d"
	eventually(t, "the s3 workload failed saying why", func() string {
		w := e.get(t, "team-d", "bucket")
		if w.GetStatus().GetPhase() != workloadv1.WorkloadPhase_WORKLOAD_PHASE_FAILED || !strings.Contains(w.String(), "not mounted in Kubernetes mode yet") {
			return w.GetStatus().String()
		}
		return ""
	})
	if live, deleting := e.pods(t, "bucket"); len(live)+len(deleting) != 0 {
		t.Errorf("%d pods made for the s3 workload", len(live)+len(deleting))
	}
}

func mapKeys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
