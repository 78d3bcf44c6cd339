package kube

import (
	"context"

	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/client-go/kubernetes"
)

// LoadMarkKey is loadMarker's key, for the tests of package kube_test.
func LoadMarkKey(ctx context.Context, kc kubernetes.Interface, namespace string, etcd *clientv3.Client) ([]byte, error) {
	m, err := loadMarker(ctx, kc, namespace, etcd)
	return m.key, err
}
