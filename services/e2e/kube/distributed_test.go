package kube_test

import (
	"fmt"
	"slices"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/services/nodemanager/kube"
)

// TestDistributedTraining: a 1 + 2 PyTorch training on the Kubernetes
// runtime is one gang of three pods in its project's namespace: the
// master (no GPU, its own command) and two 1-GPU workers, each with its
// hostname under the subdomain of a headless Service of the workload's
// name that selects exactly the workload's pods (ready or not) and is
// owned by them, and each with its framework's variables.
func TestDistributedTraining(t *testing.T) {
	e := newEnv(t, "dist")
	e.node(t, "dist-node-1", 2)
	e.start(t)
	e.project(t, "team-d", 2)
	ns := e.projectNamespace(t, "team-d")
	if _, err := e.rw.SubmitWorkload(t.Context(), "team-d", "ddp", workloadv1.WorkloadType_WORKLOAD_TYPE_TRAINING,
		&workloadv1.WorkloadSpec{Image: "busybox", Command: []string{"sleep", "3600"}, Pods: 3, MilliCpu: 100, MemoryBytes: 100 << 20,
			Gpu: &workloadv1.GpuRequest{Amount: &workloadv1.GpuRequest_Devices{Devices: 1}},
			Distributed: &workloadv1.DistributedSpec{Framework: workloadv1.Framework_FRAMEWORK_PYTORCH,
				Master: &workloadv1.MasterSpec{Command: []string{"serve"}, MilliCpu: 200}}}); err != nil {
		t.Fatal(err)
	}
	e.projectOf["ddp"] = "team-d"
	pods := e.bound(t, "ddp", 3)
	slices.SortFunc(pods, func(a, b corev1.Pod) int { return podIndex(a) - podIndex(b) })

	for i, p := range pods {
		wantHost := "ddp-worker-" + strconv.Itoa(i)
		if i == 0 {
			wantHost = "ddp-master-0"
		}
		if p.Spec.Hostname != wantHost || p.Spec.Subdomain != "ddp" {
			t.Errorf("pod %d: hostname %q subdomain %q, want %s under ddp", i, p.Spec.Hostname, p.Spec.Subdomain, wantHost)
		}
		env := map[string]string{}
		for _, v := range p.Spec.Containers[0].Env {
			env[v.Name] = v.Value
		}
		want := map[string]string{"MASTER_ADDR": "ddp-master-0.ddp", "MASTER_PORT": "29500", "WORLD_SIZE": "3",
			"RANK": strconv.Itoa(i), "NODE_RANK": strconv.Itoa(i), "PET_NNODES": "3", "PET_RDZV_ENDPOINT": "ddp-master-0.ddp:29500"}
		for k, v := range want {
			if env[k] != v {
				t.Errorf("pod %d: %s=%q, want %q", i, k, env[k], v)
			}
		}
		gpus := p.Spec.Containers[0].Resources.Limits[kube.ResourceGPU]
		switch {
		case i == 0 && (!gpus.IsZero() || !slices.Equal(p.Spec.Containers[0].Command, []string{"serve"}) || env["PET_NPROC_PER_NODE"] != "1"):
			t.Errorf("master: GPUs %s, command %v, nproc %s; want none, its own command, 1", gpus.String(), p.Spec.Containers[0].Command, env["PET_NPROC_PER_NODE"])
		case i > 0 && (gpus.Value() != 1 || !slices.Equal(p.Spec.Containers[0].Command, []string{"sleep", "3600"})):
			t.Errorf("worker %d: GPUs %s, command %v; want 1 and the workers' command", i, gpus.String(), p.Spec.Containers[0].Command)
		}
	}

	eventually(t, "the headless service owned by the three pods", func() string {
		svc, err := e.kube.CoreV1().Services(ns).Get(t.Context(), "ddp", metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		if svc.Spec.ClusterIP != corev1.ClusterIPNone || !svc.Spec.PublishNotReadyAddresses ||
			svc.Spec.Selector[kube.LabelWorkload] != "ddp" || svc.Spec.Selector[kube.LabelProject] != "team-d" || len(svc.Spec.Selector) != 2 {
			return fmt.Sprintf("spec %+v", svc.Spec)
		}
		var owners []string
		for _, o := range svc.OwnerReferences {
			owners = append(owners, string(o.UID))
		}
		for _, p := range pods {
			if !slices.Contains(owners, string(p.UID)) {
				return fmt.Sprintf("owners %v lack pod %s", owners, p.Name)
			}
		}
		return ""
	})
}

// TestDistributedMPIHostfile: an MPI training's pods mount its hostfile
// (a worker a line, slots = its GPUs, at least 1) from a ConfigMap owned
// by them, at /etc/mpi/hostfile.
func TestDistributedMPIHostfile(t *testing.T) {
	e := newEnv(t, "mpi")
	e.node(t, "mpi-node-1", 1)
	e.start(t)
	e.project(t, "team-m", 1)
	ns := e.projectNamespace(t, "team-m")
	if _, err := e.rw.SubmitWorkload(t.Context(), "team-m", "hpc", workloadv1.WorkloadType_WORKLOAD_TYPE_TRAINING,
		&workloadv1.WorkloadSpec{Image: "busybox", Command: []string{"sleep", "3600"}, Pods: 3, MilliCpu: 100, MemoryBytes: 100 << 20,
			Distributed: &workloadv1.DistributedSpec{Framework: workloadv1.Framework_FRAMEWORK_MPI}}); err != nil {
		t.Fatal(err)
	}
	e.projectOf["hpc"] = "team-m"
	pods := e.bound(t, "hpc", 3)
	for _, p := range pods {
		c := p.Spec.Containers[0]
		if len(c.VolumeMounts) != 1 || c.VolumeMounts[0].MountPath != "/etc/mpi" || !c.VolumeMounts[0].ReadOnly ||
			len(p.Spec.Volumes) == 0 || p.Spec.Volumes[len(p.Spec.Volumes)-1].ConfigMap.Name != "hpc-mpi-hostfile" {
			t.Errorf("pod %s: mounts %+v volumes %+v, want the hostfile ConfigMap read-only at /etc/mpi", p.Name, c.VolumeMounts, p.Spec.Volumes)
		}
	}
	eventually(t, "the hostfile ConfigMap owned by the three pods", func() string {
		cm, err := e.kube.CoreV1().ConfigMaps(ns).Get(t.Context(), "hpc-mpi-hostfile", metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		if want := "hpc-worker-1.hpc slots=1\nhpc-worker-2.hpc slots=1\n"; cm.Data["hostfile"] != want {
			return fmt.Sprintf("hostfile %q, want %q", cm.Data["hostfile"], want)
		}
		if len(cm.OwnerReferences) != 3 {
			return fmt.Sprintf("owners %v", cm.OwnerReferences)
		}
		return ""
	})
}

func podIndex(p corev1.Pod) int {
	i, _ := strconv.Atoi(p.Labels[kube.LabelPodIndex])
	return i
}
