package kube_test

import (
	"bytes"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/runwayhq/runway/pkg/etcdstore"
	"github.com/runwayhq/runway/pkg/etcdstore/etcdtest"
	"github.com/runwayhq/runway/services/nodemanager/kube"
	"github.com/runwayhq/runway/services/nodemanager/kube/kwoktest"
)

// TestMarkKeyOutOfEtcd: the mark key lives in a Secret of Runway's
// namespace (a real kube-apiserver here), never in etcd, whose credential
// the node agents hold. A key an older Runway kept in etcd is moved into
// the Secret (the pods it marked stay Runway's) and deleted from etcd; a
// first start makes a new key; each is read back the same.
func TestMarkKeyOutOfEtcd(t *testing.T) {
	bin, err := kwoktest.Bin("kube-apiserver")
	if err != nil {
		t.Fatal(err) // built by make
	}
	stop, cfg, err := kwoktest.StartAPIServer(bin, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{"upgraded", "fresh"} {
		if _, err := cs.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
			metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	etcd := etcdtest.New(t).Client
	legacy := bytes.Repeat([]byte("L"), 32)
	if _, err := etcd.Put(t.Context(), etcdstore.KeyKubePodMark, string(legacy)); err != nil {
		t.Fatal(err)
	}
	inEtcd := func() int {
		r, err := etcd.Get(t.Context(), etcdstore.KeyKubePodMark)
		if err != nil {
			t.Fatal(err)
		}
		return len(r.Kvs)
	}
	load := func(ns string) []byte {
		t.Helper()
		k, err := kube.LoadMarkKey(t.Context(), cs, ns, etcd)
		if err != nil {
			t.Fatalf("the mark key in %s: %v", ns, err)
		}
		return k
	}
	if k := load("upgraded"); !bytes.Equal(k, legacy) {
		t.Errorf("the upgraded Runway's key %q, want the one it kept in etcd", k)
	}
	if inEtcd() != 0 {
		t.Error("the mark key is still in etcd once moved into the Secret")
	}
	s, err := cs.CoreV1().Secrets("upgraded").Get(t.Context(), kube.MarkKeySecret, metav1.GetOptions{})
	if err != nil || !bytes.Equal(s.Data["key"], legacy) || s.Immutable == nil || !*s.Immutable {
		t.Fatalf("the Secret: %v, %v; want the key, immutable", s, err)
	}
	if k := load("upgraded"); !bytes.Equal(k, legacy) {
		t.Errorf("the key read again: %q", k)
	}
	fresh := load("fresh")
	if len(fresh) != 32 || bytes.Equal(fresh, legacy) || !bytes.Equal(load("fresh"), fresh) {
		t.Errorf("a first start's key %x: want 32 new bytes, read back the same", fresh)
	}
	if inEtcd() != 0 {
		t.Error("a first start wrote the mark key to etcd")
	}
}
