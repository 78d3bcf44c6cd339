package kube_test

import (
	"fmt"
	"os"
	"testing"

	"k8s.io/client-go/kubernetes"

	"github.com/runwayhq/runway/services/nodemanager/kube/kwoktest"
)

// The one cluster of this test binary (TestMain): a real kube-apiserver
// with its own embedded etcd, and KWOK playing the kubelets. Each test has
// its own Runway (server.RunDev) and its own namespaces and nodes, which it
// deletes at cleanup.
var (
	cluster  *kwoktest.Cluster
	kubeSkip string // why the tests skip: a binary is not built
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	for _, b := range []string{"kube-apiserver", "kwok"} {
		if _, err := kwoktest.Bin(b); err != nil {
			kubeSkip = err.Error()
			return m.Run()
		}
	}
	dir, err := os.MkdirTemp("", "runway-kube-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	c, err := kwoktest.Start(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer c.Stop()
	cluster = c
	return m.Run()
}

// kubeClient is a client of the shared apiserver; the test skips when it
// could not be built.
func kubeClient(t *testing.T) kubernetes.Interface {
	t.Helper()
	if kubeSkip != "" {
		t.Skip(kubeSkip)
	}
	return cluster.Kube
}
