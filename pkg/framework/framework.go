package framework

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
)

// Kind is a framework.
type Kind int

// The frameworks.
const (
	PyTorch Kind = iota + 1
	MPI
	TensorFlow
	JAX
	XGBoost
)

// DefaultPort is the port pod 0 (and, for TensorFlow, every pod) listens
// on where each pod has an address of its own.
func (k Kind) DefaultPort() int {
	switch k {
	case PyTorch:
		return 29500 // torchrun's
	case TensorFlow:
		return 2222 // the Kubeflow TFJob's
	case JAX:
		return 6666 // the Kubeflow JAXJob's
	case XGBoost:
		return 9999 // the Kubeflow XGBoostJob's tracker
	}
	return 0 // MPI: the launcher's transport is the workers' sshd or the hostfile's reach
}

// HostfilePath is where an MPI pod finds its hostfile (the Kubeflow
// MPIJob's path, which Open MPI is pointed at by OMPI_MCA_orte_default_hostfile).
const HostfilePath = "/etc/mpi/hostfile"

// Pod is one pod of the gang as the runtime names it.
type Pod struct {
	// Host is the address the others reach it at: a DNS name or 127.0.0.1.
	Host string
	// Port is the port it listens on for its framework (pod 0's for
	// PyTorch, JAX and XGBoost; every pod's for TensorFlow).
	Port int
	// GPUs is the number of GPUs it holds (a fraction counts as 1, none as 0).
	GPUs int
}

// Gang is a distributed training as its pods see it.
type Gang struct {
	Kind Kind
	// Pods are the pods by index: pod 0 the master or launcher.
	Pods []Pod
	// MinPods is the elastic minimum (PyTorch); 0 or len(Pods) when not
	// elastic.
	MinPods int
	// ID names the rendezvous (the workload's uid), so that two runs of
	// one name never join each other's.
	ID string
}

// Env is pod i's variables, KEY=VALUE, in a fixed order.
func (g Gang) Env(i int) ([]string, error) {
	if i < 0 || i >= len(g.Pods) {
		return nil, fmt.Errorf("framework: pod %d of a gang of %d", i, len(g.Pods))
	}
	// RUNWAY_POD_INDEX is every pod's already (pkg/runner.Environ).
	common := []string{"RUNWAY_POD_COUNT=" + strconv.Itoa(len(g.Pods))}
	switch g.Kind {
	case PyTorch:
		return append(common, g.pytorch(i)...), nil
	case MPI:
		return append(common, "OMPI_MCA_orte_default_hostfile="+HostfilePath, "OMPI_MCA_rmaps_base_mapping_policy=slot",
			"RUNWAY_HOSTFILE="+HostfilePath, "RUNWAY_MPI_WORKERS="+strings.Join(g.workerHosts(), ",")), nil
	case TensorFlow:
		cfg, err := g.tfConfig(i)
		return append(common, "TF_CONFIG="+cfg), err
	case JAX:
		c := g.Pods[0]
		return append(common, "JAX_COORDINATOR_ADDRESS="+addr(c), "JAX_COORDINATOR_PORT="+strconv.Itoa(c.Port),
			"JAX_NUM_PROCESSES="+strconv.Itoa(len(g.Pods)), "JAX_PROCESS_ID="+strconv.Itoa(i)), nil
	case XGBoost:
		t := g.Pods[0]
		return append(common, "MASTER_ADDR="+t.Host, "MASTER_PORT="+strconv.Itoa(t.Port),
			"WORLD_SIZE="+strconv.Itoa(len(g.Pods)), "RANK="+strconv.Itoa(i),
			"DMLC_TRACKER_URI="+t.Host, "DMLC_TRACKER_PORT="+strconv.Itoa(t.Port),
			"DMLC_NUM_WORKER="+strconv.Itoa(len(g.Pods)), "DMLC_TASK_ID="+strconv.Itoa(i)), nil
	}
	return nil, fmt.Errorf("framework: unknown kind %d", g.Kind)
}

// pytorch: one process per pod as seen without torchrun (WORLD_SIZE pods,
// RANK the pod's index, LOCAL_RANK 0 of 1), and torchrun's PET_* options
// for a multi-process pod: one node per pod with a process per GPU, the
// c10d rendezvous on the master (elastic: nnodes MIN:MAX).
func (g Gang) pytorch(i int) []string {
	m, n := g.Pods[0], len(g.Pods)
	nnodes := strconv.Itoa(n)
	if g.MinPods > 0 && g.MinPods < n {
		nnodes = strconv.Itoa(g.MinPods) + ":" + nnodes
	}
	return []string{
		"MASTER_ADDR=" + m.Host, "MASTER_PORT=" + strconv.Itoa(m.Port),
		"WORLD_SIZE=" + strconv.Itoa(n), "RANK=" + strconv.Itoa(i), "NODE_RANK=" + strconv.Itoa(i),
		"LOCAL_RANK=0", "LOCAL_WORLD_SIZE=1",
		"PET_NNODES=" + nnodes, "PET_NPROC_PER_NODE=" + strconv.Itoa(max(g.Pods[i].GPUs, 1)),
		"PET_NODE_RANK=" + strconv.Itoa(i), "PET_MASTER_ADDR=" + m.Host, "PET_MASTER_PORT=" + strconv.Itoa(m.Port),
		"PET_RDZV_BACKEND=c10d", "PET_RDZV_ENDPOINT=" + addr(m), "PET_RDZV_ID=" + g.ID,
	}
}

// tfConfig: pod 0 is the chief, the others workers, each its own task.
func (g Gang) tfConfig(i int) (string, error) {
	cluster := map[string][]string{"chief": {addr(g.Pods[0])}}
	for _, p := range g.Pods[1:] {
		cluster["worker"] = append(cluster["worker"], addr(p))
	}
	task := map[string]any{"type": "chief", "index": 0}
	if i > 0 {
		task = map[string]any{"type": "worker", "index": i - 1}
	}
	b, err := json.Marshal(map[string]any{"cluster": cluster, "task": task})
	return string(b), err
}

func addr(p Pod) string { return p.Host + ":" + strconv.Itoa(p.Port) }

func (g Gang) workerHosts() []string {
	out := make([]string, 0, len(g.Pods)-1)
	for _, p := range g.Pods[1:] {
		out = append(out, p.Host)
	}
	return out
}

// Hostfile is the MPI hostfile: one line per worker, `HOST slots=GPUS`
// (at least 1 slot); the launcher (pod 0) is not in it.
func (g Gang) Hostfile() []byte {
	var b strings.Builder
	for _, p := range g.Pods[1:] {
		fmt.Fprintf(&b, "%s slots=%d\n", p.Host, max(p.GPUs, 1))
	}
	return []byte(b.String())
}

// Host is pod i's name on its workload's network: {workload}-master-0 or
// {workload}-worker-{i}.
func Host(workload string, i int) string {
	if i == 0 {
		return workload + "-master-0"
	}
	return workload + "-worker-" + strconv.Itoa(i)
}

// Ports are the ports of pods that share one network (the process
// runtime): a block of n from a base drawn from the workload's uid in
// 20000-59999, so that two trainings on one machine seldom collide (they
// may; the framework then fails to bind and says so).
func Ports(uid string, n int) []int {
	h := fnv.New32a()
	h.Write([]byte(uid))
	base := 20000 + int(h.Sum32()%uint32(40000-n))
	out := make([]int, n)
	for i := range out {
		out[i] = base + i
	}
	return out
}
