package etcdstore

import (
	"context"
	"errors"
	"fmt"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// AgentRole is the etcd role of the node agents: what they read and write,
// and nothing else. Above all not the identity keys (the signing keys, the
// users, the sessions) nor the sealed credentials: an agent's etcd
// credential sits on a node, where tenants' code runs, and root on that
// node must not become an administrator of the platform. The control
// plane's own etcd user has the root role.
const AgentRole = "runway-agent"

// Permission is one key range of a role.
type Permission struct {
	Key       string // a key, or a prefix when Prefix
	Prefix    bool
	ReadWrite bool // else read only
}

// AgentPermissions are AgentRole's ranges.
func AgentPermissions() []Permission {
	read := func(key string, prefix bool) Permission { return Permission{Key: key, Prefix: prefix} }
	rw := func(prefix string) Permission { return Permission{Key: prefix, Prefix: true, ReadWrite: true} }
	return []Permission{
		read(KeySchemaVersion, false),
		read(PrefixVerifyingKeys, true), // to check the workload service's token, not to sign one
		read(PrefixNodePools, true),
		read(PrefixWorkloads, true),
		read(PrefixBindings, true),
		read(PrefixDrains, true),
		read(PrefixNodeRoles, true), // copied into each registration
		rw(PrefixNodes), rw(PrefixLeases), rw(PrefixRuns), rw(PrefixPlans), rw(PrefixAgents),
	}
}

// EnsureAgentRole makes AgentRole with exactly AgentPermissions (a range
// granted before and no longer listed is revoked) and grants it to user,
// making the user when it does not exist (without a password: the agent
// authenticates with a client certificate whose common name is user).
// client must be etcd's root.
func EnsureAgentRole(ctx context.Context, client *clientv3.Client, user string) error {
	if user == "" {
		return errors.New("the agents' etcd user is required")
	}
	if _, err := client.RoleAdd(ctx, AgentRole); err != nil && !errors.Is(err, rpctypes.ErrRoleAlreadyExist) {
		return fmt.Errorf("etcd: add role %s: %w", AgentRole, err)
	}
	want := map[string]bool{}
	for _, p := range AgentPermissions() {
		end := ""
		if p.Prefix {
			end = clientv3.GetPrefixRangeEnd(p.Key)
		}
		typ := clientv3.PermissionType(clientv3.PermRead)
		if p.ReadWrite {
			typ = clientv3.PermissionType(clientv3.PermReadWrite)
		}
		if _, err := client.RoleGrantPermission(ctx, AgentRole, p.Key, end, typ); err != nil {
			return fmt.Errorf("etcd: grant %s on %s: %w", AgentRole, p.Key, err)
		}
		want[p.Key+"\x00"+end] = true
	}
	role, err := client.RoleGet(ctx, AgentRole)
	if err != nil {
		return fmt.Errorf("etcd: read role %s: %w", AgentRole, err)
	}
	for _, p := range role.Perm {
		if !want[string(p.Key)+"\x00"+string(p.RangeEnd)] {
			if _, err := client.RoleRevokePermission(ctx, AgentRole, string(p.Key), string(p.RangeEnd)); err != nil {
				return fmt.Errorf("etcd: revoke %s on %s: %w", AgentRole, p.Key, err)
			}
		}
	}
	if _, err := client.UserAddWithOptions(ctx, user, "", &clientv3.UserAddOptions{NoPassword: true}); err != nil &&
		!errors.Is(err, rpctypes.ErrUserAlreadyExist) {
		return fmt.Errorf("etcd: add user %s: %w", user, err)
	}
	if _, err := client.UserGrantRole(ctx, user, AgentRole); err != nil {
		return fmt.Errorf("etcd: grant %s to %s: %w", AgentRole, user, err)
	}
	return nil
}
