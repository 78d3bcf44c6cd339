package clusterproto

import (
	"google.golang.org/protobuf/proto"

	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/framework"
)

// PodSpec is what pod i of spec runs: the spec itself, or, for pod 0 of a
// distributed training with a master of its own, a copy with the master's
// image, command, args, GPU, CPU and memory in place of the workers'.
func PodSpec(spec *workloadv1.WorkloadSpec, pod int) *workloadv1.WorkloadSpec {
	m := spec.GetDistributed().GetMaster()
	if pod != 0 || m == nil {
		return spec
	}
	out := proto.Clone(spec).(*workloadv1.WorkloadSpec)
	if m.GetImage() != "" {
		out.Image = m.GetImage()
	}
	if len(m.GetCommand()) > 0 || len(m.GetArgs()) > 0 {
		out.Command, out.Args = m.GetCommand(), m.GetArgs()
	}
	out.Gpu, out.MilliCpu, out.MemoryBytes = m.GetGpu(), m.GetMilliCpu(), m.GetMemoryBytes()
	return out
}

// Addressing is how a runtime names a gang's pods: Host and Port give pod
// i's address.
type Addressing struct {
	Host func(i int) string
	Port func(i int) int
}

// Gang is the framework gang of a distributed workload (false when it is
// not one), with its pods addressed as the runtime names them.
func Gang(w *workloadv1.Workload, a Addressing) (framework.Gang, bool) {
	spec := w.GetSpec()
	kind, ok := frameworks[spec.GetDistributed().GetFramework()]
	if !ok {
		return framework.Gang{}, false
	}
	n := int(EffectivePods(spec))
	g := framework.Gang{Kind: kind, ID: w.GetUid(), Pods: make([]framework.Pod, n)}
	if mp := int(EffectiveMinPods(spec)); mp < n {
		g.MinPods = mp
	}
	for i := range g.Pods {
		g.Pods[i] = framework.Pod{Host: a.Host(i), Port: a.Port(i), GPUs: gpus(PodSpec(spec, i))}
	}
	return g, true
}

// gpus is how many GPUs a pod holds for its framework: whole devices, or 1
// for a share of one.
func gpus(spec *workloadv1.WorkloadSpec) int {
	r := PodRequest(spec)
	if d := r.Devices(); d > 0 {
		return d
	}
	if r.GPU > 0 || r.GPUMemory > 0 {
		return 1
	}
	return 0
}

// Named is the addressing of runtimes that give each pod a name and a
// network namespace of its own (container: DNS aliases; Kubernetes:
// hostnames under a headless Service, with suffix ".{workload}"): every
// pod on its framework's usual port.
func Named(w *workloadv1.Workload, suffix string) Addressing {
	id := ID(w.GetName())
	kind := frameworks[w.GetSpec().GetDistributed().GetFramework()]
	return Addressing{
		Host: func(i int) string { return framework.Host(id, i) + suffix },
		Port: func(int) int { return kind.DefaultPort() },
	}
}

// Loopback is the process runtime's addressing (one machine, one network):
// 127.0.0.1, with a port of its own per pod (framework.Ports).
func Loopback(w *workloadv1.Workload) Addressing {
	ports := framework.Ports(w.GetUid(), int(EffectivePods(w.GetSpec())))
	return Addressing{Host: func(int) string { return "127.0.0.1" }, Port: func(i int) int { return ports[i] }}
}

var frameworks = map[workloadv1.Framework]framework.Kind{
	workloadv1.Framework_FRAMEWORK_PYTORCH:    framework.PyTorch,
	workloadv1.Framework_FRAMEWORK_MPI:        framework.MPI,
	workloadv1.Framework_FRAMEWORK_TENSORFLOW: framework.TensorFlow,
	workloadv1.Framework_FRAMEWORK_JAX:        framework.JAX,
	workloadv1.Framework_FRAMEWORK_XGBOOST:    framework.XGBoost,
}
