package etcdstore_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/runwayhq/runway/pkg/etcdstore"
	"github.com/runwayhq/runway/pkg/etcdstore/etcdtest"
)

// With etcd's auth on, the agents' role reads and writes what an agent
// needs and is refused what root on a node must never reach: the signing
// keys (to sign a token), users, sessions, audit and sealed credentials,
// and writes to the bindings or workloads (to run what the scheduler did
// not place). A range granted by an older Runway is revoked.
func TestAgentRoleReachesOnlyWhatAgentsNeed(t *testing.T) {
	cluster := etcdtest.New(t)
	ctx := t.Context()
	admin := cluster.Client
	for _, step := range []func() error{
		func() error { _, err := admin.UserAdd(ctx, "root", "root's password"); return err },
		func() error { _, err := admin.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := admin.UserAdd(ctx, "agent", "the agent's password"); return err },
		func() error { _, err := admin.RoleAdd(ctx, etcdstore.AgentRole); return err },
		func() error { // what an older Runway might have granted
			_, err := admin.RoleGrantPermission(ctx, etcdstore.AgentRole, etcdstore.PrefixSigningKeys,
				clientv3.GetPrefixRangeEnd(etcdstore.PrefixSigningKeys), clientv3.PermissionType(clientv3.PermRead))
			return err
		},
		func() error { return etcdstore.EnsureAgentRole(ctx, admin, "agent") },
		func() error { return etcdstore.EnsureAgentRole(ctx, admin, "agent") }, // again: no change, no error
		func() error { _, err := admin.Put(ctx, etcdstore.PrefixSigningKeys+"k1", "secret"); return err },
		func() error { _, err := admin.AuthEnable(ctx); return err },
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	login := func(user, password string) *clientv3.Client {
		c, err := clientv3.New(clientv3.Config{Endpoints: admin.Endpoints(), Username: user, Password: password,
			DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	root := login("root", "root's password")
	t.Cleanup(func() { _, _ = root.AuthDisable(t.Context()) }) // leaves the member as etcdtest expects
	agent := login("agent", "the agent's password")
	denied := func(err error) bool { return errors.Is(err, rpctypes.ErrPermissionDenied) }
	for _, key := range []string{etcdstore.PrefixSigningKeys, etcdstore.PrefixUsers, etcdstore.PrefixSessions,
		etcdstore.PrefixAudit, etcdstore.PrefixCredentials, etcdstore.PrefixAccessRules, etcdstore.KeyKubePodMark} {
		if _, err := agent.Get(ctx, key, clientv3.WithPrefix()); !denied(err) {
			t.Errorf("the agent reads %s: %v, want permission denied", key, err)
		}
	}
	for _, key := range []string{etcdstore.PrefixBindings + "n1/p.w.0", etcdstore.PrefixWorkloads + "p/w", etcdstore.PrefixVerifyingKeys + "k"} {
		if _, err := agent.Put(ctx, key, "x"); !denied(err) {
			t.Errorf("the agent writes %s: %v, want permission denied", key, err)
		}
	}
	for _, key := range []string{etcdstore.PrefixVerifyingKeys, etcdstore.PrefixWorkloads, etcdstore.PrefixBindings, etcdstore.KeySchemaVersion} {
		var opts []clientv3.OpOption
		if strings.HasSuffix(key, "/") {
			opts = append(opts, clientv3.WithPrefix())
		}
		if _, err := agent.Get(ctx, key, opts...); err != nil {
			t.Errorf("the agent cannot read %s: %v", key, err)
		}
	}
	for _, key := range []string{etcdstore.PrefixNodes + "n1", etcdstore.PrefixRuns + "n1/p.w.0", etcdstore.PrefixPlans + "n1"} {
		if _, err := agent.Put(ctx, key, "x"); err != nil {
			t.Errorf("the agent cannot write %s: %v", key, err)
		}
	}
}
