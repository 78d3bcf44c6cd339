package workload

import (
	"sync"

	"github.com/runwayhq/runway/pkg/apierr"
)

// Per-project caps on objects: a project's members cannot fill etcd or the
// server with workloads, nor hold watch streams without end. (A workload's
// own size is bounded by validation: MaxPods, MaxEnvBytes, pkg/bounds.)
const (
	DefaultMaxWorkloadsPerProject = 5000
	DefaultMaxWatchesPerProject   = 64
)

// openWatches counts the watch streams open per project in this process.
type openWatches struct {
	mu    sync.Mutex
	count map[string]int
}

// open admits one more stream on project, or refuses it at limit; release
// ends it.
func (o *openWatches) open(project string, limit int) (release func(), err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.count == nil {
		o.count = map[string]int{}
	}
	if o.count[project] >= limit {
		return nil, apierr.ObjectLimit(projectsPrefix+project, "open watch streams", limit)
	}
	o.count[project]++
	return func() {
		o.mu.Lock()
		defer o.mu.Unlock()
		if o.count[project]--; o.count[project] == 0 {
			delete(o.count, project)
		}
	}, nil
}
