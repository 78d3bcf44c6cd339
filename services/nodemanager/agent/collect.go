package agent

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	nodemanagerv1 "github.com/runwayhq/runway/gen/go/runway/nodemanager/v1"
	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/etcdstore"
	"github.com/runwayhq/runway/pkg/runner"
	"github.com/runwayhq/runway/services/nodemanager"
)

// DefaultCollectInterval is Config.CollectInterval when 0.
const DefaultCollectInterval = 30 * time.Second

// collector removes what a finished pod leaves on the node (its record
// and log, its working directory, its run report) once nothing can need
// it: its binding is gone and its workload is deleted or re-created under
// a new uid. Until then `runway workload logs` can read a finished pod.
type collector struct {
	cfg    Config
	runner runner.Runner
	dir    string // the runner's record directories
}

func (c *collector) run(ctx context.Context) {
	t := time.NewTicker(c.cfg.CollectInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		c.collect(ctx)
	}
}

// collect looks at every finished pod once.
func (c *collector) collect(ctx context.Context) {
	finals, _ := filepath.Glob(filepath.Join(c.dir, "*", finalName))
	workloads := etcdstore.NewCollection(c.cfg.Client, etcdstore.PrefixWorkloads, func() *workloadv1.Workload { return new(workloadv1.Workload) })
	for _, f := range finals {
		id := filepath.Base(filepath.Dir(f))
		uid, _, _ := strings.Cut(id, ".")
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		_, body, _ := strings.Cut(string(b), "\n")
		r := new(nodemanagerv1.ReportWorkloadStateRequest)
		if proto.Unmarshal([]byte(body), r) != nil {
			continue
		}
		project, workload, ok := nodemanager.ParseWorkload(r.GetWorkload())
		if !ok {
			continue
		}
		w, err := workloads.Get(ctx, project+"/"+workload)
		switch {
		case err == nil && w.Msg.GetUid() == uid:
			continue // still the workload's: its logs stay readable
		case err != nil && !errors.Is(err, etcdstore.ErrNotFound):
			return // etcd unreachable: next time
		}
		bkey := nodemanager.BindingKey(c.cfg.Node, project, workload, int(r.GetPodIndex()))
		resp, err := c.cfg.Client.Get(ctx, bkey, clientv3.WithCountOnly())
		if err != nil {
			return
		}
		if resp.Count > 0 {
			continue // bound again (a re-created workload): its report is the new pod's
		}
		if err := c.deleteRun(ctx, nodemanager.RunKey(c.cfg.Node, project, workload, int(r.GetPodIndex())), r); err != nil {
			return
		}
		if err := c.runner.Remove(id); err != nil {
			c.cfg.Logger.Warn("finished pod not collected", "pod", id, "err", err)
		}
	}
}

// deleteRun deletes the pod's run report if it is still the stored one.
func (c *collector) deleteRun(ctx context.Context, key string, r *nodemanagerv1.ReportWorkloadStateRequest) error {
	resp, err := c.cfg.Client.Get(ctx, key)
	if err != nil || len(resp.Kvs) == 0 {
		return err
	}
	stored := new(nodemanagerv1.ReportWorkloadStateRequest)
	if proto.Unmarshal(resp.Kvs[0].Value, stored) != nil || !stored.GetObserveTime().AsTime().Equal(r.GetObserveTime().AsTime()) {
		return nil
	}
	_, err = c.cfg.Client.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", resp.Kvs[0].ModRevision)).
		Then(clientv3.OpDelete(key)).Commit()
	return err
}
