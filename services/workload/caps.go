package workload

import (
	"sync"

	"github.com/runwayhq/runway/pkg/apierr"
)

// Caps on objects: a project's members cannot fill etcd or the server with
// workloads, and no caller can hold the watch streams every other caller
// needs. (A workload's own size is bounded by validation: MaxPods,
// MaxEnvBytes, pkg/bounds.)
const (
	DefaultMaxWorkloadsPerProject = 5000
	// A watch stream is held per caller, per project and per process: one
	// caller (a user and its applications count as that user) holds at most
	// DefaultMaxWatchesPerCaller, a project's at most
	// DefaultMaxWatchesPerProject (the all-projects watch, projects/-, is no
	// project's: each caller's counts only against its own cap), and the
	// process at most DefaultMaxWatches, far above any one caller's.
	DefaultMaxWatchesPerCaller  = 16
	DefaultMaxWatchesPerProject = 256
	DefaultMaxWatches           = 8192
)

// watchCaps are the watch stream limits of a process.
type watchCaps struct{ perCaller, perProject, total int }

// openWatches counts the watch streams open per caller, per project and in
// all in this process.
type openWatches struct {
	mu        sync.Mutex
	byCaller  map[string]int
	byProject map[string]int
	total     int
}

// open admits one more stream of caller on project (project "-" is every
// project), or refuses it at a cap; release ends it.
func (o *openWatches) open(caller, project string, caps watchCaps) (release func(), err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.byCaller == nil {
		o.byCaller, o.byProject = map[string]int{}, map[string]int{}
	}
	switch {
	case o.byCaller[caller] >= caps.perCaller:
		return nil, apierr.WatchLimit(caller, caps.perCaller)
	case project != "-" && o.byProject[project] >= caps.perProject:
		return nil, apierr.ObjectLimit(projectsPrefix+project, "open watch streams", caps.perProject)
	case o.total >= caps.total:
		return nil, apierr.WatchLimit("", caps.total)
	}
	o.byCaller[caller]++
	if project != "-" {
		o.byProject[project]++
	}
	o.total++
	return func() {
		o.mu.Lock()
		defer o.mu.Unlock()
		o.total--
		if o.byCaller[caller]--; o.byCaller[caller] == 0 {
			delete(o.byCaller, caller)
		}
		if project == "-" {
			return
		}
		if o.byProject[project]--; o.byProject[project] == 0 {
			delete(o.byProject, project)
		}
	}, nil
}
