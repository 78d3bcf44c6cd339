package etcdtest_test

import (
	"testing"
	"time"

	"github.com/runwayhq/runway/pkg/etcdstore/etcdtest"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
	"go.uber.org/zap"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestNew(t *testing.T) {
	cl := etcdtest.New(t)
	if _, err := cl.Client.Put(t.Context(), "k", "v"); err != nil {
		t.Fatalf("Put: %v", err)
	}
	other := cl.NewClient(t)
	resp, err := other.Get(t.Context(), "k")
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "v" {
		t.Fatalf("Get from a second client = %v, %v; want v", resp, err)
	}
}

// The dev mode's contract: data written before a stop is there after a
// start on the same directory.
func TestStartEmbedded_RestartResumes(t *testing.T) {
	dir := t.TempDir()
	quiet := etcdtest.WithLogger(zap.NewNop())

	put := func(url string) {
		e, err := etcdtest.StartEmbedded(dir, url, quiet)
		if err != nil {
			t.Fatalf("StartEmbedded: %v", err)
		}
		defer e.Close()
		cli := client(t, e.Clients[0].Addr().String())
		defer cli.Close()
		if _, err := cli.Put(t.Context(), "k", "durable"); err != nil {
			t.Fatalf("Put: %v", err)
		}
	}
	put("http://127.0.0.1:0")

	e, err := etcdtest.StartEmbedded(dir, "http://127.0.0.1:0", quiet)
	if err != nil {
		t.Fatalf("StartEmbedded again: %v", err)
	}
	defer e.Close()
	cli := client(t, e.Clients[0].Addr().String())
	defer cli.Close()
	resp, err := cli.Get(t.Context(), "k")
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "durable" {
		t.Fatalf("Get after restart = %v, %v; want durable", resp, err)
	}
}

func TestStartEmbedded_BadURL(t *testing.T) {
	if _, err := etcdtest.StartEmbedded(t.TempDir(), "::not a url", etcdtest.WithLogger(zap.NewNop())); err == nil {
		t.Fatal("StartEmbedded with a bad URL succeeded")
	}
}

func client(t *testing.T, endpoint string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	return cli
}
