package sdk

import (
	"context"
	"iter"

	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
)

// DataSourceName is the name of data source id at the scope.
func (s Scope) DataSourceName(id string) string { return s.child("dataSources", id) }

// CreateDataSource creates data source id at a scope.
func (c *Client) CreateDataSource(ctx context.Context, s Scope, id string, d *workloadv1.DataSource) (*workloadv1.DataSource, error) {
	return c.DataSourceService.CreateDataSource(ctx, &workloadv1.CreateDataSourceRequest{Parent: s.Name(), DataSourceId: id, DataSource: d})
}

// GetDataSource reads data source id of a scope.
func (c *Client) GetDataSource(ctx context.Context, s Scope, id string) (*workloadv1.DataSource, error) {
	return c.DataSourceService.GetDataSource(ctx, &workloadv1.GetDataSourceRequest{Name: s.DataSourceName(id)})
}

// DeleteDataSource removes data source id of a scope.
func (c *Client) DeleteDataSource(ctx context.Context, s Scope, id string) error {
	_, err := c.DataSourceService.DeleteDataSource(ctx, &workloadv1.DeleteDataSourceRequest{Name: s.DataSourceName(id)})
	return err
}

// DataSources walks the data sources of a scope, by name.
func (c *Client) DataSources(ctx context.Context, s Scope) iter.Seq2[*workloadv1.DataSource, error] {
	return All(ctx, func(ctx context.Context, token string) (Page[*workloadv1.DataSource], error) {
		r, err := c.DataSourceService.ListDataSources(ctx, &workloadv1.ListDataSourcesRequest{Parent: s.Name(), PageToken: token, PageSize: 1000})
		return Page[*workloadv1.DataSource]{Items: r.GetDataSources(), Next: r.GetNextPageToken()}, err
	})
}
