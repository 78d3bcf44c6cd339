package kwoktest

import (
	"context"
	"fmt"
	"net"
	"slices"

	"google.golang.org/grpc"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/runwayhq/runway/services/nodemanager/kube"
)

// ServePodResources serves, on the unix socket, a stand-in of the kubelet's
// pod-resources API of one KWOK node (which has no kubelet): List answers
// with the devices the device plugin stand-in gave each pod of the node,
// as a kubelet answers with its device plugins' allocations. It serves
// until ctx ends.
func (d *DevicePlugin) ServePodResources(ctx context.Context, socket, node string) error {
	l, err := net.Listen("unix", socket)
	if err != nil {
		return fmt.Errorf("pod resources stand-in: %w", err)
	}
	srv := grpc.NewServer()
	podresourcesv1.RegisterPodResourcesListerServer(srv, &podResources{d: d, node: node})
	go func() {
		<-ctx.Done()
		srv.Stop()
	}()
	go func() { _ = srv.Serve(l) }()
	return nil
}

type podResources struct {
	podresourcesv1.UnimplementedPodResourcesListerServer
	d    *DevicePlugin
	node string
}

func (s *podResources) List(ctx context.Context, _ *podresourcesv1.ListPodResourcesRequest) (*podresourcesv1.ListPodResourcesResponse, error) {
	pods, err := s.d.c.Kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("spec.nodeName", s.node).String()})
	if err != nil {
		return nil, err
	}
	s.d.mu.Lock()
	defer s.d.mu.Unlock()
	out := &podresourcesv1.ListPodResourcesResponse{}
	for _, p := range pods.Items {
		held := s.d.held[s.node][string(p.UID)]
		if len(held) == 0 || len(p.Spec.Containers) == 0 {
			continue
		}
		out.PodResources = append(out.PodResources, &podresourcesv1.PodResources{Name: p.Name, Namespace: p.Namespace,
			Containers: []*podresourcesv1.ContainerResources{{Name: p.Spec.Containers[0].Name,
				Devices: []*podresourcesv1.ContainerDevices{{ResourceName: kube.ResourceGPU, DeviceIds: slices.Clone(held)}}}}})
	}
	return out, nil
}
