package nodemanager

import (
	"fmt"
	"strconv"
	"strings"

	"google.golang.org/protobuf/proto"

	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/etcdstore"
)

// Binding is one pod the scheduler placed on a node, read from the
// scheduler's key etcdstore.PrefixBindings + "{node}/{project}.{workload}.{pod}",
// whose value is a workloadv1.PodStatus (state BOUND, device_indexes,
// fraction_milli), as services/scheduler/apply.go writes it. The node side
// only reads these keys.
type Binding struct {
	Node, Project, Workload string
	// Pod is the pod's index in its gang.
	Pod int
	// Devices are the GPU indexes on the node the pod holds.
	Devices []int
	// FractionMilli is the share of each device, 1000 for whole devices
	// (a stored 0 is read as 1000).
	FractionMilli int64
}

// WorkloadName is "projects/{project}/workloads/{workload}".
func (b Binding) WorkloadName() string {
	return "projects/" + b.Project + "/workloads/" + b.Workload
}

// BindingKey is the key of a pod's binding on a node.
func BindingKey(node, project, workload string, pod int) string {
	return etcdstore.PrefixBindings + node + "/" + project + "." + workload + "." + strconv.Itoa(pod)
}

// BindingsPrefix is the prefix of every binding on a node.
func BindingsPrefix(node string) string { return etcdstore.PrefixBindings + node + "/" }

// DecodeBinding reads a binding from its key and value.
func DecodeBinding(key string, value []byte) (Binding, error) {
	id, ok := strings.CutPrefix(key, etcdstore.PrefixBindings)
	node, rest, ok2 := strings.Cut(id, "/")
	parts := strings.Split(rest, ".")
	if !ok || !ok2 || len(parts) != 3 || parts[0] == "" || parts[1] == "" {
		return Binding{}, fmt.Errorf("binding %s: key is not {node}/{project}.{workload}.{pod}", key)
	}
	pod, err := strconv.Atoi(parts[2])
	if err != nil || pod < 0 {
		return Binding{}, fmt.Errorf("binding %s: bad pod index", key)
	}
	ps := new(workloadv1.PodStatus)
	if err := proto.Unmarshal(value, ps); err != nil {
		return Binding{}, fmt.Errorf("binding %s: %w", key, err)
	}
	b := Binding{Node: node, Project: parts[0], Workload: parts[1], Pod: pod, FractionMilli: int64(ps.GetFractionMilli())}
	if b.FractionMilli == 0 {
		b.FractionMilli = 1000
	}
	for _, d := range ps.GetDeviceIndexes() {
		b.Devices = append(b.Devices, int(d))
	}
	return b, nil
}
