package kwoktest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/runwayhq/runway/services/nodemanager/kube"
)

// DevicePlugin is a test stand-in, on KWOK's nodes, for what no KWOK node
// has: the NVIDIA device plugin handing each pod that requests
// nvidia.com/gpu its own devices, and the reservation pod's container
// reporting the UUID it was given (NVIDIA_VISIBLE_DEVICES) on its pod. Each
// bound pod with an nvidia.com/gpu limit gets that many of its node's
// devices (DeviceUUID), none held by another live pod there, in the
// annotation kube.AnnotationGPUUUID (comma-separated). A pod that asks for
// more than is free is what the kubelet refuses (OutOfnvidia.com/gpu): it is
// recorded in Refused and gets nothing.
type DevicePlugin struct {
	c       *Cluster
	events  chan podEvent
	mu      sync.Mutex
	held    map[string]map[string][]string // node → pod uid → devices
	refused []string
}

type podEvent struct {
	pod     *corev1.Pod
	deleted bool
}

// DeviceUUID is the UUID of the node's device i.
func DeviceUUID(node string, i int64) string { return fmt.Sprintf("GPU-%s-%d", node, i) }

// StartDevicePlugin runs the stand-in until ctx ends.
func (c *Cluster) StartDevicePlugin(ctx context.Context) (*DevicePlugin, error) {
	d := &DevicePlugin{c: c, events: make(chan podEvent, 1024), held: map[string]map[string][]string{}}
	f := informers.NewSharedInformerFactory(c.Kube, 0)
	inf := f.Core().V1().Pods().Informer()
	// Deletions go through the same channel as the rest, so that an update
	// queued before a pod's deletion cannot give it devices after it.
	send := func(obj any, deleted bool) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		if p, ok := obj.(*corev1.Pod); ok {
			d.events <- podEvent{p, deleted}
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { send(obj, false) },
		UpdateFunc: func(_, obj any) { send(obj, false) },
		DeleteFunc: func(obj any) { send(obj, true) },
	}); err != nil {
		return nil, err
	}
	f.Start(ctx.Done())
	f.WaitForCacheSync(ctx.Done())
	go func() {
		defer f.Shutdown()
		for {
			select {
			case <-ctx.Done():
				return
			case ev := <-d.events:
				if ev.deleted {
					d.release(ev.pod)
				} else {
					d.sync(ctx, ev.pod)
				}
			}
		}
	}()
	return d, nil
}

// Refused lists the pods the kubelet would have refused: "ns/name on node".
func (d *DevicePlugin) Refused() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.refused)
}

func gpuLimit(p *corev1.Pod) int64 {
	var n int64
	for _, c := range p.Spec.Containers {
		n += c.Resources.Limits.Name(kube.ResourceGPU, resource.DecimalSI).Value()
	}
	return n
}

func (d *DevicePlugin) release(p *corev1.Pod) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.held[p.Spec.NodeName], string(p.UID))
}

// sync gives a newly bound GPU pod its devices; an ended pod's go back.
func (d *DevicePlugin) sync(ctx context.Context, p *corev1.Pod) {
	if p.Spec.NodeName == "" || gpuLimit(p) == 0 {
		return
	}
	if p.DeletionTimestamp != nil {
		return // the kubelet admits no pod that is being deleted
	}
	if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		d.release(p)
		return
	}
	d.mu.Lock()
	held := d.held[p.Spec.NodeName]
	if held == nil {
		held = map[string][]string{}
		d.held[p.Spec.NodeName] = held
	}
	if _, ok := held[string(p.UID)]; ok {
		d.mu.Unlock()
		return
	}
	node, err := d.c.Kube.CoreV1().Nodes().Get(ctx, p.Spec.NodeName, metav1.GetOptions{})
	if err != nil || node.Annotations[AnnotationManaged] == "" {
		d.mu.Unlock()
		return
	}
	taken := map[string]bool{}
	for _, devs := range held {
		for _, u := range devs {
			taken[u] = true
		}
	}
	var mine []string
	total := node.Status.Allocatable.Name(kube.ResourceGPU, resource.DecimalSI).Value()
	for i := int64(0); i < total && int64(len(mine)) < gpuLimit(p); i++ {
		if u := DeviceUUID(node.Name, i); !taken[u] {
			mine = append(mine, u)
		}
	}
	if int64(len(mine)) < gpuLimit(p) {
		d.refused = append(d.refused, p.Namespace+"/"+p.Name+" on "+node.Name)
		held[string(p.UID)] = nil
		d.mu.Unlock()
		return
	}
	held[string(p.UID)] = mine
	d.mu.Unlock()
	// What the pod's container would see and report (runway reserve-gpu).
	_ = kube.ReportGPU(ctx, d.c.Kube, p.Namespace, p.Name, strings.Join(mine, ","))
}
