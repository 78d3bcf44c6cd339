package etcdstore

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Compactor bounds etcd's history by revision: every Every it compacts
// away everything older than the last Keep revisions. A watch or page token
// that falls further behind than Keep writes gets ErrCompacted (a watch)
// or ErrPageTokenExpired (a listing), and every reader of this package
// relists then, so Keep is the lag a watcher may have without a relist.
// Several compactors on one cluster are harmless (a compaction to a
// revision already compacted is a no-op).
type Compactor struct {
	Client *clientv3.Client
	Every  time.Duration
	Keep   int64
	Logger *slog.Logger
}

// Run compacts until ctx ends.
func (c Compactor) Run(ctx context.Context) error {
	t := time.NewTicker(c.Every)
	defer t.Stop()
	var done int64
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		rev, err := c.Once(ctx, done)
		if err != nil && ctx.Err() == nil {
			c.Logger.Warn("etcd compaction", "err", err)
			continue
		}
		done = max(done, rev)
	}
}

// Once compacts to the current revision minus Keep if that is past after,
// and returns the revision compacted to (0 if none).
func (c Compactor) Once(ctx context.Context, after int64) (int64, error) {
	resp, err := c.Client.Get(ctx, KeySchemaVersion, clientv3.WithCountOnly())
	if err != nil {
		return 0, wrapErr(ctx, "compact: read the revision at", KeySchemaVersion, err)
	}
	target := resp.Header.Revision - c.Keep
	if target <= after || target <= 1 {
		return 0, nil
	}
	if _, err := c.Client.Compact(ctx, target); err != nil && !errors.Is(err, rpctypes.ErrCompacted) {
		return 0, wrapErr(ctx, "compact to", "revision "+FormatEtag(target), err)
	}
	return target, nil
}
