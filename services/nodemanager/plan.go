package nodemanager

import (
	"context"
	"fmt"
	"strconv"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	nodemanagerv1 "github.com/runwayhq/runway/gen/go/runway/nodemanager/v1"
	"github.com/runwayhq/runway/pkg/etcdstore"
)

// PlanKey is the key of a node's time-slicing plan.
func PlanKey(node string) string { return etcdstore.PrefixPlans + node }

// PlanName is the resource name of a node's plan.
func PlanName(node string) string { return NodeName(node) + planSuffix }

// PutPlan stores a node's plan as its agent computed it (name, devices,
// update_time); revision and etag are the key's ModRevision, set on read.
func PutPlan(ctx context.Context, client *clientv3.Client, node string, plan *nodemanagerv1.TimeSlicePlan) error {
	v, err := proto.Marshal(plan)
	if err != nil {
		return err
	}
	if _, err := client.Put(ctx, PlanKey(node), string(v)); err != nil {
		return fmt.Errorf("store the time-slicing plan of %s: %w", node, err)
	}
	return nil
}

// getPlan reads a node's plan; nil when the agent never stored one.
func getPlan(ctx context.Context, client *clientv3.Client, node string) (*nodemanagerv1.TimeSlicePlan, error) {
	resp, err := client.Get(ctx, PlanKey(node))
	if err != nil {
		return nil, fmt.Errorf("read the time-slicing plan of %s: %w", node, err)
	}
	if len(resp.Kvs) == 0 {
		return nil, nil
	}
	plan := new(nodemanagerv1.TimeSlicePlan)
	if err := proto.Unmarshal(resp.Kvs[0].Value, plan); err != nil {
		return nil, fmt.Errorf("decode the time-slicing plan of %s: %w", node, err)
	}
	plan.Revision = resp.Kvs[0].ModRevision
	plan.Etag = strconv.FormatInt(plan.Revision, 10)
	return plan, nil
}

// fillPlans sets each device's time_slicing_plan from its node's stored
// plan (the agent's).
func fillPlans(ctx context.Context, client *clientv3.Client, nodes []*nodemanagerv1.Node) error {
	for _, n := range nodes {
		id, _ := cutNodeName(n.GetName())
		plan, err := getPlan(ctx, client, id)
		if err != nil {
			return err
		}
		byIndex := map[int32]*nodemanagerv1.DeviceTimeSlicePlan{}
		for _, dp := range plan.GetDevices() {
			byIndex[dp.GetDeviceIndex()] = dp
		}
		for _, d := range n.GetDevices() {
			d.TimeSlicePlan = byIndex[d.GetIndex()]
		}
	}
	return nil
}
