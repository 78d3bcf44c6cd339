package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/runwayhq/runway/pkg/sdk"
	"github.com/runwayhq/runway/pkg/sealing"
)

// adminCommand holds the platform operator's commands.
func adminCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "admin", Short: "Platform operations: the credentials key file, node agents' tokens and etcd role"}
	creds := &cobra.Command{Use: "credentials", Short: "Rotate the key that seals credentials in etcd",
		Long: `Rotate the platform key that seals credentials' values in etcd:

  1. runway admin credentials add-key --key-file FILE   (on the workload service's key file;
                                                        new values are sealed under the new key)
  2. runway admin credentials reencrypt                  (every stored value sealed again under it)
  3. runway admin credentials prune-keys --key-file FILE (the older keys removed)

The workload service reads the key file again whenever it changes; values
sealed under an older key stay readable until step 3.`}
	var keyFile string
	addKey := &cobra.Command{
		Use:     "add-key --key-file FILE",
		Short:   "Add a new key to the key file (created, mode 0600, when missing): new values are sealed under it",
		Example: "  runway admin credentials add-key --key-file /etc/runway/credentials.keys",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			created, err := sealing.Create(keyFile)
			if err != nil {
				return err
			}
			if created {
				fmt.Fprintf(cmd.OutOrStdout(), "key file %s created with one key\n", keyFile)
				return nil
			}
			id, err := sealing.AddKey(keyFile)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "key %s added to %s; run runway admin credentials reencrypt, then prune-keys\n", id, keyFile)
			return nil
		},
	}
	prune := &cobra.Command{
		Use:     "prune-keys --key-file FILE",
		Short:   "Remove every key but the newest (after reencrypt: a value under a removed key no longer opens)",
		Example: "  runway admin credentials reencrypt && runway admin credentials prune-keys --key-file /etc/runway/credentials.keys",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			removed, err := sealing.PruneKeys(keyFile)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "removed %d keys: %s\n", len(removed), orDefault(strings.Join(removed, ", "), "-"))
			return nil
		},
	}
	for _, c := range []*cobra.Command{addKey, prune} {
		c.Flags().StringVar(&keyFile, "key-file", "", "the workload service's --credentials-key-file (required)")
		_ = c.MarkFlagRequired("key-file")
	}
	reencrypt := &cobra.Command{
		Use:     "reencrypt",
		Short:   "Seal every stored credential again under the newest key of the workload service's key file",
		Example: "  runway admin credentials reencrypt",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withClient(cmd, func(ctx context.Context, c *sdk.Client) error {
				r, err := c.ReencryptCredentials(ctx)
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%d credentials sealed again under key %s, %d were already\n", r.GetReencrypted(), r.GetKeyId(), r.GetUnchanged())
				return nil
			})
		},
	}
	creds.AddCommand(addKey, reencrypt, prune)
	cmd.AddCommand(creds, nodeTokenCommand(), etcdAgentRoleCommand())
	return cmd
}
