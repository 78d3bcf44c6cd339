package sdk

import (
	"context"
	"iter"

	nodemanagerv1 "github.com/runwayhq/runway/gen/go/runway/nodemanager/v1"
)

// GetNode reads one node with its devices.
func (c *Client) GetNode(ctx context.Context, node string) (*nodemanagerv1.Node, error) {
	return c.NodeManagerService.GetNode(ctx, &nodemanagerv1.GetNodeRequest{Name: NodeName(node)})
}

// Nodes walks every registered node, by name.
func (c *Client) Nodes(ctx context.Context, filter string) iter.Seq2[*nodemanagerv1.Node, error] {
	return All(ctx, func(ctx context.Context, token string) (Page[*nodemanagerv1.Node], error) {
		r, err := c.NodeManagerService.ListNodes(ctx, &nodemanagerv1.ListNodesRequest{Filter: filter, PageToken: token, PageSize: 1000})
		return Page[*nodemanagerv1.Node]{Items: r.GetNodes(), Next: r.GetNextPageToken()}, err
	})
}
