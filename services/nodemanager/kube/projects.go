package kube

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
	"github.com/runwayhq/runway/pkg/etcdstore"
)

// A namespace per project. For each project the runtime makes the
// namespace runway-{project}, labelled LabelProject={project}, or adopts
// one that already carries that label; a namespace of that name without
// the label is not Runway's: its pods are never taken for the project's,
// and Runway puts none there. The pods of the project's workloads run
// there. A ResourceQuota (QuotaName) there caps what the namespace's pods,
// Runway's and its users', may request of nvidia.com/gpu at the project's
// GPU limit: what Runway places for the project (over quota included)
// never passes it, except for a moment while an evicted pod of the
// namespace still terminates, and Runway's next pod then waits
// (quotaRetry). A deleted project's namespace is left to the
// administrator (it may hold users' pods); its pods are refused (the
// project is gone).

// QuotaName is the ResourceQuota the runtime keeps in a project's
// namespace.
const QuotaName = "runway-project-quota"

// LabelManagedBy says who made a namespace.
const LabelManagedBy = "app.kubernetes.io/managed-by"

// quotaRetry is how soon a pod its namespace's quota refused is tried
// again.
const quotaRetry = 2 * time.Second

// isOverQuota says whether the apiserver refused a pod for a namespace
// ResourceQuota.
func isOverQuota(err error) bool {
	return apierrors.IsForbidden(err) && strings.Contains(err.Error(), "exceeded quota")
}

// projectNamespace makes sure the project's namespace is Runway's before
// a pod of its goes there: a binding may come before the project's sync.
func (r *runtime) projectNamespace(ctx context.Context, project string) error {
	r.mu.Lock()
	ok := r.namespaces[project]
	r.mu.Unlock()
	if ok {
		return nil
	}
	if err := r.syncProject(ctx, project); err != nil {
		return err
	}
	r.mu.Lock()
	ok = r.namespaces[project]
	r.mu.Unlock()
	if !ok {
		return fmt.Errorf("namespace %s is not project %s's (no label %s=%s): its pods wait", ProjectNamespace(project), project, LabelProject, project)
	}
	return nil
}

// watchProjects queues every project, then each one that changes; when the
// watch breaks it queues them all again.
func (r *runtime) watchProjects(ctx context.Context) {
	rev := int64(0)
	for ctx.Err() == nil {
		if rev == 0 {
			resp, err := r.cfg.Etcd.Get(ctx, etcdstore.PrefixProjects, clientv3.WithPrefix(), clientv3.WithKeysOnly())
			if err != nil {
				r.log.Warn("kubernetes runtime: list projects", "err", err)
				time.Sleep(500 * time.Millisecond)
				continue
			}
			for _, kv := range resp.Kvs {
				r.queue.Add(kindProject + ":" + strings.TrimPrefix(string(kv.Key), etcdstore.PrefixProjects))
			}
			rev = resp.Header.Revision + 1
		}
		wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		for resp := range r.cfg.Etcd.Watch(wctx, etcdstore.PrefixProjects, clientv3.WithPrefix(), clientv3.WithRev(rev), clientv3.WithKeysOnly()) {
			if resp.Err() != nil {
				break
			}
			for _, ev := range resp.Events {
				r.queue.Add(kindProject + ":" + strings.TrimPrefix(string(ev.Kv.Key), etcdstore.PrefixProjects))
			}
			rev = resp.Header.Revision + 1
		}
		cancel()
		rev = 0
	}
}

// syncProject brings the project's namespace and its quota in step.
func (r *runtime) syncProject(ctx context.Context, id string) error {
	c := etcdstore.NewCollection(r.cfg.Etcd, etcdstore.PrefixProjects, func() *quotav1.Project { return new(quotav1.Project) })
	it, err := c.Get(ctx, id)
	if err != nil {
		if errors.Is(err, etcdstore.ErrNotFound) {
			return nil
		}
		return fmt.Errorf("read project %s: %w", id, err)
	}
	ns := ProjectNamespace(id)
	got, err := r.cfg.Kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		got, err = r.cfg.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns,
			Labels: map[string]string{LabelProject: id, LabelManagedBy: "runway"}}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create namespace %s: %w", ns, err)
		}
		if err != nil {
			return err // created meanwhile: retried
		}
		r.log.Info("kubernetes runtime: project namespace created", "namespace", ns)
	case err != nil:
		return fmt.Errorf("get namespace %s: %w", ns, err)
	case got.Labels[LabelProject] != id:
		r.log.Warn("kubernetes runtime: namespace exists but is not the project's (no label "+LabelProject+"="+id+"); its pods are not scheduled",
			"namespace", ns)
		return nil
	}
	r.mu.Lock()
	r.namespaces[id] = true
	r.mu.Unlock()
	// Its users' pods that waited for the namespace to be adopted.
	pods, err := r.pods.Pods(ns).List(everything)
	if err != nil {
		return err
	}
	for _, p := range pods {
		r.queue.Add(kindPod + ":" + p.Namespace + "/" + p.Name)
	}
	return r.syncQuota(ctx, ns, it.Msg)
}

// projectGPULimit is the most GPUs the project may hold, summed over its
// node pools; false when some pool sets no limit.
func projectGPULimit(p *quotav1.Project) (int64, bool) {
	var milli int64
	for _, q := range p.GetNodePoolQuotas() {
		g := q.GetGpu()
		limit := int64(-1)
		if g != nil && g.LimitMilliGpus != nil {
			limit = g.GetLimitMilliGpus()
		}
		if g != nil && g.OverQuotaEnabled != nil && !g.GetOverQuotaEnabled() {
			limit = max(g.GetDeservedMilliGpus(), 0)
		}
		if limit < 0 {
			return 0, false
		}
		milli += limit
	}
	return milli / 1000, len(p.GetNodePoolQuotas()) > 0
}

// syncQuota makes the namespace's ResourceQuota cap requests of
// nvidia.com/gpu at the project's limit, or removes it when the project
// has none.
func (r *runtime) syncQuota(ctx context.Context, ns string, p *quotav1.Project) error {
	quotas := r.cfg.Kube.CoreV1().ResourceQuotas(ns)
	limit, limited := projectGPULimit(p)
	cur, err := quotas.Get(ctx, QuotaName, metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("get quota %s/%s: %w", ns, QuotaName, err)
	}
	exists := err == nil
	if !limited {
		if exists {
			if err := quotas.Delete(ctx, QuotaName, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("delete quota %s/%s: %w", ns, QuotaName, err)
			}
		}
		return nil
	}
	hard := corev1.ResourceList{"requests." + ResourceGPU: *resource.NewQuantity(limit, resource.DecimalSI)}
	if !exists {
		_, err := quotas.Create(ctx, &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: QuotaName, Namespace: ns,
			Labels: map[string]string{LabelManagedBy: "runway"}}, Spec: corev1.ResourceQuotaSpec{Hard: hard}}, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("create quota %s/%s: %w", ns, QuotaName, err)
		}
		return nil
	}
	if q := cur.Spec.Hard[corev1.ResourceName("requests."+ResourceGPU)]; len(cur.Spec.Hard) == 1 && q.Cmp(hard["requests."+ResourceGPU]) == 0 {
		return nil
	}
	cur.Spec.Hard = hard
	if _, err := quotas.Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("update quota %s/%s: %w", ns, QuotaName, err)
	}
	return nil
}

// adopted says whether the project's namespace is Runway's: labelled
// with the project.
func (r *runtime) adopted(ctx context.Context, project string) (bool, error) {
	ns, err := r.cfg.Kube.CoreV1().Namespaces().Get(ctx, ProjectNamespace(project), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return ns.Labels[LabelProject] == project, nil
}
