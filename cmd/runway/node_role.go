package main

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	nodemanagerv1 "github.com/runwayhq/runway/gen/go/runway/nodemanager/v1"
	"github.com/runwayhq/runway/pkg/sdk"
)

// nodeRoleFlags are the --system, --gpu-worker and --cpu-worker flags, in
// the API's order.
var nodeRoleFlags = []struct {
	flag string
	role nodemanagerv1.NodeRole
}{
	{"system", nodemanagerv1.NodeRole_NODE_ROLE_SYSTEM},
	{"gpu-worker", nodemanagerv1.NodeRole_NODE_ROLE_GPU_WORKER},
	{"cpu-worker", nodemanagerv1.NodeRole_NODE_ROLE_CPU_WORKER},
}

// roleNames is a node's roles as the flags name them ("gpu-worker,system"),
// or "-".
func roleNames(roles []nodemanagerv1.NodeRole) string {
	var out []string
	for _, f := range nodeRoleFlags {
		if slices.Contains(roles, f.role) {
			out = append(out, f.flag)
		}
	}
	return orDefault(strings.Join(out, ","), "-")
}

func nodeRoleCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "role", Short: "Node roles (system, gpu-worker, cpu-worker): which workloads a node takes"}
	cmd.AddCommand(nodeRoleChangeCommand("set"), nodeRoleChangeCommand("unset"))
	return cmd
}

// nodeRoleChangeCommand is `node role set` (adds the roles named) or
// `node role unset` (takes them off).
func nodeRoleChangeCommand(verb string) *cobra.Command {
	chosen := make([]bool, len(nodeRoleFlags))
	cmd := &cobra.Command{
		Use:   verb + " NODE [--system] [--gpu-worker] [--cpu-worker]",
		Short: map[string]string{"set": "Give a node roles (keeping its others)", "unset": "Take roles off a node"}[verb],
		Long: `Node roles decide which workloads a node takes, from the next scheduling cycle:
once any node is a gpu-worker, GPU workloads go only to gpu-workers; once any
is a cpu-worker, CPU-only workloads go only to cpu-workers; a system node
(for Runway's own services) takes no workload unless it also has the worker
role the workload needs. In Kubernetes mode the roles are the node's
node-role.kubernetes.io/runai-* labels.`,
		Example: "  runway node role " + verb + " node-1 --gpu-worker\n  runway node role " + verb + " node-2 --system --cpu-worker",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !slices.Contains(chosen, true) {
				return usageError("name at least one role: --system, --gpu-worker or --cpu-worker")
			}
			return withClient(cmd, func(ctx context.Context, c *sdk.Client) error {
				n, err := c.GetNode(ctx, args[0])
				if err != nil {
					return err
				}
				roles := slices.Clone(n.GetRoles())
				for i, f := range nodeRoleFlags {
					if !chosen[i] {
						continue
					}
					roles = slices.DeleteFunc(roles, func(r nodemanagerv1.NodeRole) bool { return r == f.role })
					if verb == "set" {
						roles = append(roles, f.role)
					}
				}
				// The etag: a change made meanwhile is not overwritten.
				out, err := c.NodeManagerService.SetNodeRoles(ctx, &nodemanagerv1.SetNodeRolesRequest{Name: n.GetName(), Roles: roles, Etag: n.GetEtag()})
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "node %q roles: %s\n", args[0], roleNames(out.GetRoles()))
				return nil
			})
		},
	}
	for i, f := range nodeRoleFlags {
		cmd.Flags().BoolVar(&chosen[i], f.flag, false, "the "+f.flag+" role")
	}
	return cmd
}
