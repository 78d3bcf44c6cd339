package kubelet

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
)

// DefaultPodResources is the kubelet's pod-resources socket.
const DefaultPodResources = "/var/lib/kubelet/pod-resources/kubelet.sock"

// askTimeout bounds one question to the kubelet.
const askTimeout = 5 * time.Second

// maxPodResources bounds the kubelet's answer (every pod of the node).
const maxPodResources = 16 << 20

// Devices asks the kubelet's pod-resources API (its unix socket; a
// device plugin's allocations) which devices of resource (nvidia.com/gpu)
// the containers of pod namespace/name hold: the device plugin's ids, GPU
// UUIDs for NVIDIA's. A pod's spec does not say which devices the plugin
// gave it; only the kubelet knows.
func Devices(ctx context.Context, socket, namespace, name, resource string) ([]string, error) {
	if socket == "" {
		socket = DefaultPodResources
	}
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxPodResources)))
	if err != nil {
		return nil, fmt.Errorf("kubelet pod resources %s: %w", socket, err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, askTimeout)
	defer cancel()
	// List, not Get: Get is behind a feature gate on older kubelets.
	resp, err := podresourcesv1.NewPodResourcesListerClient(conn).List(ctx, &podresourcesv1.ListPodResourcesRequest{})
	if err != nil {
		return nil, fmt.Errorf("kubelet pod resources %s: %w", socket, err)
	}
	var ids []string
	for _, p := range resp.GetPodResources() {
		if p.GetNamespace() != namespace || p.GetName() != name {
			continue
		}
		for _, c := range p.GetContainers() {
			for _, d := range c.GetDevices() {
				if d.GetResourceName() == resource {
					ids = append(ids, d.GetDeviceIds()...)
				}
			}
		}
	}
	return ids, nil
}
