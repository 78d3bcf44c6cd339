package nodemanager

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/types/known/timestamppb"

	nodemanagerv1 "github.com/runwayhq/runway/gen/go/runway/nodemanager/v1"
)

// fillHeartbeats sets each node's heartbeat_time to its lease's last
// renewal, read from etcd (granted TTL − remaining TTL ago, to the second
// etcd counts in): the agent's keep-alive is its heartbeat, and no write
// follows it. leases[i] is the lease of nodes[i]'s key as it was read (the
// registration puts the key under the agent's lease), so each node costs
// one round trip, its TimeToLive. A node without a live lease keeps its
// stored time.
func fillHeartbeats(ctx context.Context, client *clientv3.Client, now time.Time, nodes []*nodemanagerv1.Node, leases []int64) error {
	for i, n := range nodes {
		if leases[i] == 0 {
			continue
		}
		ttl, err := client.TimeToLive(ctx, clientv3.LeaseID(leases[i]))
		if err != nil {
			return fmt.Errorf("read the lease of %s: %w", n.GetName(), err)
		}
		if ttl.TTL < 0 || ttl.GrantedTTL <= 0 {
			continue // expired: the node key goes with it
		}
		beat := now.Add(-time.Duration(ttl.GrantedTTL-ttl.TTL) * time.Second)
		if beat.After(n.GetHeartbeatTime().AsTime()) {
			n.HeartbeatTime = timestamppb.New(beat)
		}
	}
	return nil
}
