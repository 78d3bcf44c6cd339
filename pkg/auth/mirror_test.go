package auth

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	identityv1 "github.com/runwayhq/runway/gen/go/runway/identity/v1"
	"github.com/runwayhq/runway/pkg/etcdstore/etcdtest"
)

// A value that does not decode replaces the entry it overwrote with
// nothing: the mirror never keeps honouring the old one.
func TestMirrorDropsUndecodableEntry(t *testing.T) {
	cluster := etcdtest.New(t)
	const prefix = "/test/rules/"
	rule := &identityv1.AccessRule{Name: "accessRules/r1", Role: "roles/admin"}
	b, _ := proto.Marshal(rule)
	if _, err := cluster.Client.Put(t.Context(), prefix+"r1", string(b)); err != nil {
		t.Fatal(err)
	}
	m := newMirror(cluster.Client, prefix, func() *identityv1.AccessRule { return new(identityv1.AccessRule) })
	if err := m.load(t.Context()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { _ = m.run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	if _, ok := m.get("r1"); !ok {
		t.Fatal("the loaded rule is not in the mirror")
	}
	put, err := cluster.Client.Put(t.Context(), prefix+"r1", "\xff\xff not a protobuf")
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); m.revision() < put.Header.Revision; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the mirror never saw the write")
		}
	}
	if v, ok := m.get("r1"); ok {
		t.Errorf("after an undecodable write the mirror still holds %v", v)
	}
}

// A mirror's watch on a member that has lost its leader ends with etcd's
// "no leader" error rather than waiting, silent and stale, for ever.
func TestMirrorWatchRequiresLeader(t *testing.T) {
	members, stop := startTrio(t)
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{members[0].Clients[0].Addr().String()}, DialTimeout: 5 * time.Second,
		Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	m := newMirror(cli, "/test/rules/", func() *identityv1.AccessRule { return new(identityv1.AccessRule) })
	if err := m.load(t.Context()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	followed := make(chan error, 1)
	go func() { followed <- m.follow(ctx) }()
	time.Sleep(200 * time.Millisecond) // the watch is open
	stop[1]()
	stop[2]()
	select {
	case err := <-followed:
		if !errors.Is(err, rpctypes.ErrNoLeader) {
			t.Errorf("the watch on a member without a leader ended with %v, want %v", err, rpctypes.ErrNoLeader)
		}
	case <-ctx.Done():
		t.Fatal("the watch on a member without a leader never ended")
	}
}

// startTrio starts a three-member embedded etcd cluster, fast elections.
// Each stop closes its member once (the test's cleanup closes the rest).
func startTrio(t *testing.T) ([3]*embed.Etcd, [3]func()) {
	t.Helper()
	var peers, clients [3]url.URL
	var initial []string
	for i := range 3 {
		for _, u := range []*url.URL{&peers[i], &clients[i]} {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			*u = url.URL{Scheme: "http", Host: l.Addr().String()}
			l.Close()
		}
		initial = append(initial, fmt.Sprintf("m%d=%s", i, peers[i].String()))
	}
	var out [3]*embed.Etcd
	var stop [3]func()
	before := goleak.IgnoreCurrent()
	t.Cleanup(func() {
		// The members' peer connections wind down after Close; wait for
		// them, so that the package's leak check sees none.
		for _, s := range stop {
			s()
		}
		deadline := time.Now().Add(10 * time.Second)
		for goleak.Find(before) != nil && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
		}
	})
	started := make(chan error, 3)
	for i := range 3 {
		cfg := embed.NewConfig()
		cfg.Name, cfg.Dir, cfg.LogLevel = fmt.Sprintf("m%d", i), t.TempDir(), "error"
		cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
		cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peers[i]}, []url.URL{peers[i]}
		cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{clients[i]}, []url.URL{clients[i]}
		cfg.InitialCluster = strings.Join(initial, ",")
		cfg.UnsafeNoFsync, cfg.TickMs, cfg.ElectionMs = true, 10, 100
		e, err := embed.StartEtcd(cfg)
		if err != nil {
			t.Fatal(err)
		}
		out[i], stop[i] = e, sync.OnceFunc(e.Close)
		t.Cleanup(stop[i])
		go func() {
			select {
			case <-e.Server.ReadyNotify():
				started <- nil
			case <-time.After(30 * time.Second):
				started <- errors.New("member not ready in 30 s")
			}
		}()
	}
	for range 3 {
		if err := <-started; err != nil {
			t.Fatal(err)
		}
	}
	return out, stop
}
