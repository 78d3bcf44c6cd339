package nodemanager

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	commonv1 "github.com/runwayhq/runway/gen/go/runway/common/v1"
	nodemanagerv1 "github.com/runwayhq/runway/gen/go/runway/nodemanager/v1"
	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/clusterproto"
	"github.com/runwayhq/runway/pkg/etcdstore"
)

// fillAllocations sets what the nodes' bound pods hold — each device's
// allocations and the node's allocated total — from the scheduler's
// bindings and the workloads' per-pod requests, read at one revision. The
// agent registers only what the machine has; what is placed on it changes
// every cycle and is the scheduler's, so it is joined here at read time
// rather than rewritten into the leased node key.
func (s *store) fillAllocations(ctx context.Context, nodes []*nodemanagerv1.Node) error {
	if len(nodes) == 0 {
		return nil
	}
	var rev int64
	specs := map[string]*workloadv1.WorkloadSpec{} // by "project/workload"
	for _, n := range nodes {
		id := strings.TrimPrefix(n.GetName(), nodesPrefix)
		opts := []clientv3.OpOption{clientv3.WithPrefix()}
		if rev > 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		resp, err := s.client.Get(ctx, BindingsPrefix(id), opts...)
		if err != nil {
			return fmt.Errorf("read the bindings of %s: %w", n.GetName(), err)
		}
		rev = resp.Header.Revision
		devices := map[int32]*nodemanagerv1.GpuDevice{}
		for _, d := range n.GetDevices() {
			d.Allocations = nil
			devices[d.GetIndex()] = d
		}
		allocated := &commonv1.ResourceQuantity{}
		for _, kv := range resp.Kvs {
			b, err := DecodeBinding(string(kv.Key), kv.Value)
			if err != nil {
				continue // the scheduler's key, not ours to judge; the agent logs it
			}
			spec, err := s.workloadSpec(ctx, specs, b.Project, b.Workload, rev)
			if err != nil {
				return err
			}
			spec = clusterproto.PodSpec(spec, b.Pod) // a distributed training's master has its own
			allocated.MilliGpus += b.FractionMilli * int64(len(b.Devices))
			allocated.MilliCpu += spec.GetMilliCpu()
			allocated.MemoryBytes += spec.GetMemoryBytes()
			for _, idx := range b.Devices {
				d := devices[int32(idx)]
				if d == nil {
					continue
				}
				mem := d.GetMemoryBytes() * b.FractionMilli / 1000
				if m := spec.GetGpu().GetGpuMemoryBytes(); m > 0 {
					mem = m
				}
				d.Allocations = append(d.Allocations, &nodemanagerv1.DeviceAllocation{Workload: b.WorkloadName(),
					PodIndex: int32(b.Pod), FractionMilli: int32(b.FractionMilli), GpuMemoryBytes: mem})
			}
		}
		for _, d := range n.GetDevices() {
			slices.SortFunc(d.Allocations, func(a, b *nodemanagerv1.DeviceAllocation) int {
				return cmp.Or(cmp.Compare(a.GetWorkload(), b.GetWorkload()), cmp.Compare(a.GetPodIndex(), b.GetPodIndex()))
			})
		}
		n.Allocated = allocated
	}
	return nil
}

// workloadSpec reads a bound workload's spec once per request. A workload
// deleted since its binding was read counts as holding GPUs only.
func (s *store) workloadSpec(ctx context.Context, cache map[string]*workloadv1.WorkloadSpec, project, workload string, rev int64) (*workloadv1.WorkloadSpec, error) {
	key := project + "/" + workload
	if spec, ok := cache[key]; ok {
		return spec, nil
	}
	resp, err := s.client.Get(ctx, etcdstore.PrefixWorkloads+key, clientv3.WithRev(rev))
	if err != nil {
		return nil, fmt.Errorf("read workload %s: %w", key, err)
	}
	w := new(workloadv1.Workload)
	if len(resp.Kvs) == 1 {
		if err := proto.Unmarshal(resp.Kvs[0].Value, w); err != nil {
			return nil, fmt.Errorf("read workload %s: %w", key, err)
		}
	}
	cache[key] = w.GetSpec()
	return w.GetSpec(), nil
}
