package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/runwayhq/runway/cmd/runway/server"
	nodemanagerv1 "github.com/runwayhq/runway/gen/go/runway/nodemanager/v1"
	"github.com/runwayhq/runway/pkg/sdk"
)

// nodeTokenCommand mints a node agent's Runway token.
func nodeTokenCommand() *cobra.Command {
	var ttl time.Duration
	cmd := &cobra.Command{
		Use:   "node-token NODE [--ttl D]",
		Short: "Print the Runway token of one node's agent, for an agent outside Kubernetes (runway agent --agent-token-file)",
		Long: `Print the token of the agent of NODE (services/agent/nodes/NODE): the
only principal that opens the credentials of the pods bound to that node,
and nothing else. Give it to that node's agent alone, in a file of mode
0600 (runway agent --agent-token-file); mint a new one before --ttl ends
and replace the file (the agent reads it at each call). Agents in
Kubernetes need none: they get theirs for their service account token.
System administrators only; audited.`,
		Example: "  runway admin node-token gpu-1 --ttl 720h > /etc/runway/agent-token && chmod 600 /etc/runway/agent-token",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withClient(cmd, func(ctx context.Context, c *sdk.Client) error {
				req := &nodemanagerv1.CreateNodeAgentTokenRequest{Node: "nodes/" + args[0]}
				if ttl != 0 {
					req.Ttl = durationpb.New(ttl)
				}
				r, err := c.NodeManagerService.CreateNodeAgentToken(ctx, req)
				if err != nil {
					return err
				}
				fmt.Fprintln(cmd.OutOrStdout(), r.GetToken())
				fmt.Fprintf(cmd.ErrOrStderr(), "the token of the agent of %s, valid until %s\n", args[0], r.GetExpireTime().AsTime().Format(time.RFC3339))
				return nil
			})
		},
	}
	cmd.Flags().DurationVar(&ttl, "ttl", 0, "how long the token is valid (at least 1m; default and most: the longest token lifetime, 720h)")
	return cmd
}

// etcdAgentRoleCommand makes the node agents' etcd role.
func etcdAgentRoleCommand() *cobra.Command {
	var endpoints []string
	var tls server.EtcdTLS
	var user string
	cmd := &cobra.Command{
		Use:   "etcd-agent-role --user NAME --etcd-endpoints URLS ...",
		Short: "Make etcd's role for the node agents (runway-agent) and grant it to their etcd user",
		Long: `Make etcd's role runway-agent, with exactly what node agents read and write
(their nodes, leases, run reports and plans; the workloads, bindings, node
pools and the signing keys' public halves) and nothing else: not the
signing keys, users, sessions, audit or sealed credentials, so that root
on a node, which can read its agent's etcd credential, cannot sign a token
or read another tenant's secrets. Then grant it to --user (made without a
password when missing: give the agents a client certificate whose common
name is that user). Run it with etcd's root credentials, before etcd's
auth is enabled or after; run it again after an upgrade (ranges no longer
needed are revoked). The control plane's etcd user needs the root role.`,
		Example: `  runway admin etcd-agent-role --user runway-agent --etcd-endpoints https://etcd-0.etcd:2379 \
    --etcd-ca-file ca.crt --etcd-cert-file root.crt --etcd-key-file root.key
  etcdctl auth enable`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := server.EnsureAgentEtcdRole(cmd.Context(), endpoints, tls, user); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "etcd role runway-agent granted to %s\n", user)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&user, "user", "", "the agents' etcd user (the common name of their client certificate) (required)")
	f.StringSliceVar(&endpoints, "etcd-endpoints", nil, "etcd client endpoints, comma-separated (required)")
	f.StringVar(&tls.CAFile, "etcd-ca-file", "", "CA bundle that verifies etcd's certificate")
	f.StringVar(&tls.CertFile, "etcd-cert-file", "", "etcd root's client certificate")
	f.StringVar(&tls.KeyFile, "etcd-key-file", "", "etcd root's client key")
	_ = cmd.MarkFlagRequired("user")
	_ = cmd.MarkFlagRequired("etcd-endpoints")
	return cmd
}
