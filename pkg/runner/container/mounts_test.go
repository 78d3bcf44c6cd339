package container_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/runwayhq/runway/pkg/runner"
	"github.com/runwayhq/runway/pkg/runner/container"
)

// An NFS data source is an engine volume of the local driver (type nfs,
// the server in its options, read-only said there too), labelled as the
// pod's and removed with it; a server that does not answer fails the
// start; a missing node directory is refused before anything is made.
func TestContainer_DataSourceVolumes(t *testing.T) {
	dir := t.TempDir()
	r := newRunner(t, engine.Host, filepath.Join(dir, "data"))
	s := spec("nfs", "true")
	s.Mounts = []runner.Mount{{Target: "/n", NFSServer: "127.0.0.1", NFSPath: "/exports/none", ReadOnly: true}}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	p, err := r.Start(s)
	if err == nil {
		ex := waitDone(t, p, 3*time.Minute)
		if ex.Code == 0 {
			t.Errorf("a pod with an unreachable NFS export ran: %+v", ex)
		}
	}
	cli, cerr := client.New(client.WithHost(engine.Host))
	if cerr != nil {
		t.Fatal(cerr)
	}
	defer cli.Close()
	list, lerr := cli.VolumeList(ctx, client.VolumeListOptions{Filters: client.Filters{}.Add("label", container.LabelPodID+"=nfs")})
	if lerr != nil || len(list.Items) != 1 {
		t.Fatalf("volumes of the pod: %v, %v (start: %v)", list.Items, lerr, err)
	}
	v := list.Items[0]
	if v.Driver != "local" || v.Options["type"] != "nfs" || v.Options["o"] != "addr=127.0.0.1,ro" || v.Options["device"] != ":/exports/none" {
		t.Errorf("the NFS volume: driver %s options %v", v.Driver, v.Options)
	}
	if err := r.Remove("nfs"); err != nil {
		t.Fatal(err)
	}
	if list, _ := cli.VolumeList(ctx, client.VolumeListOptions{Filters: client.Filters{}.Add("label", container.LabelPodID+"=nfs")}); len(list.Items) != 0 {
		t.Errorf("volumes left after Remove: %v", list.Items)
	}

	missing := spec("nodir", "true")
	missing.Mounts = []runner.Mount{{Target: "/x", HostPath: filepath.Join(dir, "no-such-dir")}}
	if _, err := r.Start(missing); err == nil || !strings.Contains(err.Error(), "the node has no directory") {
		t.Errorf("a missing node directory: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "no-such-dir")); err == nil {
		t.Error("the engine made the missing directory on the node")
	}
}
