package nodemanager

import (
	"context"
	"fmt"
	"strconv"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/types/known/timestamppb"

	nodemanagerv1 "github.com/runwayhq/runway/gen/go/runway/nodemanager/v1"
)

// fillHeartbeats sets each node's heartbeat_time to its lease's last
// renewal, read from etcd (granted TTL − remaining TTL ago, to the second
// etcd counts in): the agent's keep-alive is its heartbeat, and no write
// follows it. A node without a readable lease keeps its stored time.
func fillHeartbeats(ctx context.Context, client *clientv3.Client, now time.Time, nodes []*nodemanagerv1.Node) error {
	for _, n := range nodes {
		id, ok := cutNodeName(n.GetName())
		if !ok {
			continue
		}
		resp, err := client.Get(ctx, leaseKey(id))
		if err != nil {
			return fmt.Errorf("read the lease of %s: %w", id, err)
		}
		if len(resp.Kvs) != 1 {
			continue
		}
		lease, err := strconv.ParseInt(string(resp.Kvs[0].Value), 16, 64)
		if err != nil {
			continue
		}
		ttl, err := client.TimeToLive(ctx, clientv3.LeaseID(lease))
		if err != nil {
			return fmt.Errorf("read the lease of %s: %w", id, err)
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
