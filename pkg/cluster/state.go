package cluster

import (
	"fmt"
	"sort"
	"time"

	"github.com/google/btree"

	"github.com/runwayhq/runway/pkg/fairshare"
)

// State is the live model. It is not safe for concurrent use.
type State struct {
	Pools       []*Pool // declaration order
	Departments []*Queue
	pools       map[string]*Pool
	nodes       map[string]*Node
	queues      map[string]*Queue
	projects    []*Queue // creation order
	workloads   map[string]*Workload
	belowMin    map[*Workload]struct{}
	seq         int64
	order       int
	// placedOrder is the largest Placement.Order given so far.
	placedOrder int64
	// roleNodes counts the nodes that have each role (roles.go).
	roleNodes [len(roleNames)]int

	log     []change
	logging bool
}

// change is one entry of the undo log.
type change struct {
	place bool // true: a pod was placed; false: it was removed
	w     *Workload
	pod   int
	at    Placement
	since time.Duration // w.BelowMinSince before the change, which reindex may reset
	index int           // for a removal: where the pod stood in its node's Pods
}

// New returns an empty State with the pool "default".
func New() *State {
	s := &State{
		pools:     map[string]*Pool{},
		nodes:     map[string]*Node{},
		queues:    map[string]*Queue{},
		workloads: map[string]*Workload{},
		belowMin:  map[*Workload]struct{}{},
	}
	s.AddPool("default")
	return s
}

// AddPool declares a node pool; adding one that exists returns it.
func (s *State) AddPool(name string) *Pool {
	if p, ok := s.pools[name]; ok {
		return p
	}
	p := &Pool{Name: name, Index: len(s.Pools), byFree: btree.NewG(16, lessFree)}
	s.Pools = append(s.Pools, p)
	s.pools[name] = p
	for _, q := range s.queues {
		s.growQueue(q)
	}
	return p
}

// Pool finds a pool by name.
func (s *State) Pool(name string) *Pool { return s.pools[name] }

// NodeSpec describes a node to add.
type NodeSpec struct {
	Name      string
	Pool      string
	GPUs      int
	GPUMemory int64 // bytes per device
	CPU       int64 // milli-cores
	Memory    int64 // bytes
	Labels    map[string]string
	NotReady  bool
	// Cordoned: Ready, keeps its pods, takes nothing new.
	Cordoned bool
	// Unhealthy devices by index, with why; they are not counted in the
	// node's capacity and take no pod.
	Unhealthy map[int]string
	Roles     NodeRoles
}

// capacity is the node's resources: its healthy devices, CPU and memory.
func (spec NodeSpec) capacity() Resources {
	gpus := spec.GPUs
	for i := range spec.Unhealthy {
		if i >= 0 && i < spec.GPUs {
			gpus--
		}
	}
	return Resources{GPU: int64(gpus) * FullDevice, CPU: spec.CPU, Memory: spec.Memory}
}

// devices are the node's devices as spec describes them.
func (spec NodeSpec) devices(into []Device) []Device {
	for i := 0; i < spec.GPUs; i++ {
		into = append(into, Device{Index: i, Memory: spec.GPUMemory, Unhealthy: spec.Unhealthy[i]})
	}
	return into
}

// AddNode adds a Ready node (unless spec.NotReady).
func (s *State) AddNode(spec NodeSpec) (*Node, error) {
	if _, ok := s.nodes[spec.Name]; ok {
		return nil, fmt.Errorf("node %q already exists", spec.Name)
	}
	p, ok := s.pools[spec.Pool]
	if !ok {
		return nil, fmt.Errorf("node %q: node pool %q does not exist", spec.Name, spec.Pool)
	}
	n := &Node{
		Name:     spec.Name,
		Pool:     p,
		Labels:   spec.Labels,
		Roles:    spec.Roles,
		Ready:    !spec.NotReady,
		Cordoned: spec.Cordoned,
		Capacity: spec.capacity(),
	}
	n.Devices = spec.devices(nil)
	s.countRoles(n.Roles, 1)
	// Keep Pool.Nodes in name order; ranks follow.
	i := sort.Search(len(p.Nodes), func(i int) bool { return p.Nodes[i].Name >= n.Name })
	for _, m := range p.Nodes {
		p.unindexNode(m)
	}
	p.Nodes = append(p.Nodes, nil)
	copy(p.Nodes[i+1:], p.Nodes[i:])
	p.Nodes[i] = n
	for r, m := range p.Nodes {
		m.rank = r
		p.indexNode(m)
	}
	s.nodes[n.Name] = n
	p.recompute()
	return n, nil
}

// Node finds a node by name.
func (s *State) Node(name string) *Node { return s.nodes[name] }

// SetReady marks a node Ready or not. A node that stops being Ready loses its
// pods: they are returned so the caller can tell their owners.
func (s *State) SetReady(n *Node, ready bool) []PodRef {
	if n.Ready == ready {
		return nil
	}
	var lost []PodRef
	if !ready {
		lost = append(lost, n.Pods...)
		for _, ref := range lost {
			s.unplace(ref.Workload, ref.Pod)
		}
	}
	n.Pool.unindexNode(n)
	n.Ready = ready
	n.Pool.indexNode(n)
	n.Pool.recompute()
	return lost
}

// SetCordoned lets a Ready node take new pods (false) or not (true); its
// pods stay either way.
func (s *State) SetCordoned(n *Node, cordoned bool) {
	if n.Cordoned == cordoned {
		return
	}
	n.Pool.unindexNode(n)
	n.Cordoned = cordoned
	n.Pool.indexNode(n)
}

// Reshape gives a node new capacity, devices, labels and roles (another
// scheduler took or freed GPUs on it; it was relabelled); its pool does not
// change.
// The node's pods are taken off first and returned: the caller puts back
// those that still hold (a store's bindings), as after SetReady.
func (s *State) Reshape(n *Node, spec NodeSpec) []PodRef {
	lost := append([]PodRef(nil), n.Pods...)
	for _, ref := range lost {
		s.unplace(ref.Workload, ref.Pod)
	}
	n.Pool.unindexNode(n)
	n.Labels = spec.Labels
	s.countRoles(n.Roles, -1)
	n.Roles = spec.Roles
	s.countRoles(n.Roles, 1)
	n.Capacity = spec.capacity()
	n.Devices = spec.devices(n.Devices[:0])
	n.Pool.indexNode(n)
	n.Pool.recompute()
	return lost
}

// SameShape reports whether spec describes n as it is (capacity, devices,
// labels, roles), so that Reshape would change nothing.
func (n *Node) SameShape(spec NodeSpec) bool {
	if n.Capacity != spec.capacity() || len(n.Devices) != spec.GPUs || len(n.Labels) != len(spec.Labels) || n.Roles != spec.Roles {
		return false
	}
	for i := range n.Devices {
		if n.Devices[i].Unhealthy != spec.Unhealthy[i] {
			return false
		}
	}
	if spec.GPUs > 0 && n.Devices[0].Memory != spec.GPUMemory {
		return false
	}
	for k, v := range spec.Labels {
		if n.Labels[k] != v {
			return false
		}
	}
	return true
}

// AddDepartment declares a department with its quota per pool (pools not named
// get DefaultQuota).
func (s *State) AddDepartment(name string, quotas map[string]Quota) (*Queue, error) {
	q := &Queue{Name: name, Kind: Department}
	if err := s.addQueue(q, quotas); err != nil {
		return nil, err
	}
	s.Departments = append(s.Departments, q)
	return q, nil
}

// AddProject declares a project under a department ("" = the implicit
// default department, created on first use with an unlimited quota).
func (s *State) AddProject(name, department string, quotas map[string]Quota) (*Queue, error) {
	if department == "" {
		department = DefaultDepartment
	}
	parent, ok := s.queues[department]
	if !ok && department == DefaultDepartment {
		var err error
		if parent, err = s.AddDepartment(DefaultDepartment, nil); err != nil {
			return nil, err
		}
	} else if !ok || parent.Kind != Department {
		return nil, fmt.Errorf("project %q: department %q does not exist", name, department)
	}
	q := &Queue{Name: name, Kind: Project, Parent: parent,
		waiting: map[*Workload]struct{}{}, running: map[*Workload]struct{}{}}
	if err := s.addQueue(q, quotas); err != nil {
		return nil, err
	}
	s.projects = append(s.projects, q)
	parent.Children = append(parent.Children, q)
	return q, nil
}

// addQueue checks q's name and quotas, then registers it: a rejected queue
// leaves nothing behind.
func (s *State) addQueue(q *Queue, quotas map[string]Quota) error {
	if _, ok := s.queues[q.Name]; ok {
		return fmt.Errorf("queue %q already exists", q.Name)
	}
	for pool := range quotas {
		if _, ok := s.pools[pool]; !ok {
			return fmt.Errorf("%s %q: node pool %q does not exist", q.Kind, q.Name, pool)
		}
	}
	q.Order = s.order
	s.order++
	s.queues[q.Name] = q
	s.growQueue(q)
	for pool, quota := range quotas {
		q.Quotas[s.pools[pool].Index] = quota
	}
	return nil
}

func (s *State) growQueue(q *Queue) {
	for len(q.Quotas) < len(s.Pools) {
		def := DefaultQuota()
		if q.Kind == Department && q.Name == DefaultDepartment {
			def = UnlimitedQuota()
		}
		q.Quotas = append(q.Quotas, def)
		q.Usage = append(q.Usage, Usage{})
		q.FairShare = append(q.FairShare, Resources{})
		q.Decayed = append(q.Decayed, Decayed{})
		q.Adjusted = append(q.Adjusted, [NumResources]fairshare.Adjustment{})
	}
}

// Queue finds a department or project by name.
func (s *State) Queue(name string) *Queue { return s.queues[name] }

// Projects lists projects in creation order.
func (s *State) Projects() []*Queue { return s.projects }

// WorkloadSpec describes a workload to submit.
type WorkloadSpec struct {
	ID, Name  string
	Project   string
	Type      string
	Priority  Priority
	Pods      int
	MinPods   int
	Pod       PodRequest
	Lead      *PodRequest // pod 0's request where it differs (Workload.Lead)
	Pools     []string
	NodeType  string
	Submitted time.Duration
}

// Submit adds a Pending workload.
func (s *State) Submit(spec WorkloadSpec) (*Workload, error) {
	if _, ok := s.workloads[spec.ID]; ok {
		return nil, fmt.Errorf("workload %q already exists", spec.ID)
	}
	q, ok := s.queues[spec.Project]
	if !ok || q.Kind != Project {
		return nil, fmt.Errorf("workload %q: project %q does not exist", spec.ID, spec.Project)
	}
	if spec.Pods < 1 || spec.MinPods < 1 || spec.MinPods > spec.Pods {
		return nil, fmt.Errorf("workload %q: pods %d and minPods %d: want 1 <= minPods <= pods", spec.ID, spec.Pods, spec.MinPods)
	}
	pools := spec.Pools
	if len(pools) == 0 {
		pools = []string{"default"}
	}
	for _, p := range pools {
		if _, ok := s.pools[p]; !ok {
			return nil, fmt.Errorf("workload %q: node pool %q does not exist", spec.ID, p)
		}
	}
	s.seq++
	w := &Workload{
		ID: spec.ID, Name: spec.Name, Project: q, Type: spec.Type, Priority: spec.Priority,
		Pods: spec.Pods, MinPods: spec.MinPods, Pod: spec.Pod, Lead: spec.Lead, Pools: pools, NodeType: spec.NodeType,
		Submitted: spec.Submitted, Seq: s.seq, Phase: Pending, FirstRunning: -1, BelowMinSince: -1,
		Placed: make([]Placement, spec.Pods),
	}
	s.workloads[w.ID] = w
	s.reindex(w)
	return w, nil
}

// Workload finds a workload by ID.
func (s *State) Workload(id string) *Workload { return s.workloads[id] }

// Workloads lists every workload in submission order.
func (s *State) Workloads() []*Workload {
	out := make([]*Workload, 0, len(s.workloads))
	for _, w := range s.workloads {
		out = append(out, w)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Seq < out[j].Seq })
	return out
}

// Finish ends a workload (Completed or Failed), freeing what it holds.
func (s *State) Finish(w *Workload, phase Phase) {
	s.release(w)
	w.Phase = phase
	s.reindex(w)
}

// Remove deletes a workload, freeing what it holds.
func (s *State) Remove(w *Workload) {
	s.release(w)
	w.Phase = Completed
	s.reindex(w)
	delete(s.workloads, w.ID)
}

func (s *State) release(w *Workload) {
	for i := range w.Placed {
		if w.Placed[i].Node != nil {
			s.unplace(w, i)
		}
	}
}

// Place puts pod of w on node n: devices whole when share is FullDevice,
// otherwise one device shared. The pod counts as placed after every pod
// placed before it (Placement.Order). Recorded in the undo log while logging.
func (s *State) Place(w *Workload, pod int, n *Node, devices []int, share int64) {
	s.PlaceInOrder(w, pod, n, devices, share, s.placedOrder+1)
}

// PlaceInOrder is Place with the pod's placement order given, for a model
// rebuilt from a store in any order (the Scheduler service passes the
// binding's etcd revision). Pods placed later with Place come
// after it.
func (s *State) PlaceInOrder(w *Workload, pod int, n *Node, devices []int, share, order int64) {
	s.placedOrder = max(s.placedOrder, order)
	req := w.PodAt(pod)
	held := Resources{GPU: share * int64(len(devices)), CPU: req.CPU, Memory: req.Memory}
	at := Placement{Node: n, Devices: devices, Share: share, Held: held, Order: order}
	since := w.BelowMinSince
	s.place(w, pod, at)
	if s.logging {
		s.log = append(s.log, change{place: true, w: w, pod: pod, at: at, since: since})
	}
}

// Unplace removes pod of w from its node. Recorded in the undo log while logging.
func (s *State) Unplace(w *Workload, pod int) {
	at := w.Placed[pod]
	since := w.BelowMinSince
	index := s.unplace(w, pod)
	if s.logging {
		s.log = append(s.log, change{place: false, w: w, pod: pod, at: at, since: since, index: index})
	}
}

func (s *State) place(w *Workload, pod int, at Placement) {
	if w.Placed[pod].Node != nil {
		panic(fmt.Sprintf("cluster: pod %d of %s placed twice", pod, w.ID))
	}
	n := at.Node
	n.Pool.unindexNode(n)
	for _, d := range at.Devices {
		dev := &n.Devices[d]
		dev.Used += at.Share
		if at.Share >= FullDevice {
			dev.Whole = true
		} else {
			dev.Shared++
		}
	}
	n.Used = n.Used.Add(at.Held)
	if n.Ready {
		n.Pool.Used = n.Pool.Used.Add(at.Held)
	}
	n.Pods = append(n.Pods, PodRef{w, pod})
	n.Pool.indexNode(n)
	w.Placed[pod] = at
	w.placed++
	w.pool = n.Pool
	s.account(w, at.Held, n.Pool.Index, 1)
	s.reindex(w)
}

// unplace removes a pod and returns where it stood in its node's Pods.
func (s *State) unplace(w *Workload, pod int) int {
	at := w.Placed[pod]
	n := at.Node
	n.Pool.unindexNode(n)
	for _, d := range at.Devices {
		dev := &n.Devices[d]
		dev.Used -= at.Share
		if at.Share >= FullDevice {
			dev.Whole = false
		} else {
			dev.Shared--
		}
	}
	n.Used = n.Used.Sub(at.Held)
	if n.Ready {
		n.Pool.Used = n.Pool.Used.Sub(at.Held)
	}
	index := -1
	for i, ref := range n.Pods {
		if ref.Workload == w && ref.Pod == pod {
			n.Pods = append(n.Pods[:i], n.Pods[i+1:]...)
			index = i
			break
		}
	}
	n.Pool.indexNode(n)
	w.Placed[pod] = Placement{}
	w.placed--
	if w.placed == 0 {
		w.pool = nil
	}
	s.account(w, at.Held, n.Pool.Index, -1)
	s.reindex(w)
	return index
}

func (s *State) account(w *Workload, held Resources, pool, sign int) {
	delta := held.Scale(sign)
	for q := w.Project; q != nil; q = q.Parent {
		u := &q.Usage[pool]
		u.Allocated = u.Allocated.Add(delta)
		if !w.Priority.Preemptible {
			u.NonPreemptible = u.NonPreemptible.Add(delta)
		}
	}
}

// reindex keeps the project's waiting and running sets in step with w.
func (s *State) reindex(w *Workload) {
	q := w.Project
	if w.Wants() {
		q.waiting[w] = struct{}{}
	} else {
		delete(q.waiting, w)
	}
	if w.placed > 0 {
		q.running[w] = struct{}{}
	} else {
		delete(q.running, w)
	}
	if w.placed > 0 && w.placed < w.MinPods {
		s.belowMin[w] = struct{}{}
	} else if _, ok := s.belowMin[w]; ok {
		delete(s.belowMin, w)
		w.BelowMinSince = -1
	}
}

// BelowMinimum lists workloads holding pods but fewer than their gang
// minimum, in submission order.
func (s *State) BelowMinimum() []*Workload {
	out := make([]*Workload, 0, len(s.belowMin))
	for w := range s.belowMin {
		out = append(out, w)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Seq < out[j].Seq })
	return out
}

// StampBelowMinimum starts the gang-minimum clock at now for workloads that
// fell below their minimum since the last stamp.
func (s *State) StampBelowMinimum(now time.Duration) {
	for w := range s.belowMin {
		if w.BelowMinSince < 0 {
			w.BelowMinSince = now
		}
	}
}

// Mark starts (or continues) recording changes and returns a point to roll
// back to.
func (s *State) Mark() int {
	s.logging = true
	return len(s.log)
}

// Rollback undoes every change recorded since mark.
func (s *State) Rollback(mark int) {
	for i := len(s.log) - 1; i >= mark; i-- {
		c := s.log[i]
		if c.place {
			s.unplace(c.w, c.pod)
		} else {
			s.place(c.w, c.pod, c.at)
			// Back where it stood, so Node.Pods keeps placement order.
			pods := c.at.Node.Pods
			last := pods[len(pods)-1]
			copy(pods[c.index+1:], pods[c.index:len(pods)-1])
			pods[c.index] = last
		}
		c.w.BelowMinSince = c.since
	}
	s.log = s.log[:mark]
}

// StopLog ends recording and forgets the log; the changes stay.
func (s *State) StopLog() {
	s.logging = false
	s.log = s.log[:0]
}

// RecomputePending sets every queue's Usage.Pending from the waiting
// workloads: each counts its unplaced pods in its first (home) pool.
func (s *State) RecomputePending() {
	for _, q := range s.queues {
		for i := range q.Usage {
			q.Usage[i].Pending = Resources{}
		}
	}
	for _, proj := range s.projects {
		for w := range proj.waiting {
			home := s.pools[w.Pools[0]]
			req := w.unplacedRequest(home.MinDeviceMemory, w.Pods-w.placed)
			for q := proj; q != nil; q = q.Parent {
				q.Usage[home.Index].Pending = q.Usage[home.Index].Pending.Add(req)
			}
		}
	}
}

func sortStrings(s []string) { sort.Strings(s) }
