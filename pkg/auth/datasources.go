package auth

import (
	"context"
	"strings"

	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/apierr"
	"github.com/runwayhq/runway/pkg/clusterproto"
	"github.com/runwayhq/runway/pkg/etcdstore"
)

// A host-path data source reaches the node's filesystem, under every
// project's pods: creating one, changing one, or submitting (or putting in
// a template) a one-off needs nodes.edit on the account, which only an
// account-wide administrator holds; a department's administrator does not.
// Using a stored one is the scope's ordinary use.
var hostPathPerm = perm(Nodes, Edit)

func (g *Guard) checkHostPath(c Caller, field string) error {
	if ok, _ := g.Allowed(c, hostPathPerm, account("nodes"), nil); ok {
		return nil
	}
	return apierr.PermissionDenied(hostPathPerm.String(), "account").InField(field)
}

func checkCreateDataSource(_ context.Context, g *Guard, c Caller, req any) error {
	if req.(*workloadv1.CreateDataSourceRequest).GetDataSource().GetHostPath() == nil {
		return nil
	}
	return g.checkHostPath(c, "data_source.host_path")
}

// checkUpdateDataSource: making a data source host-path, or changing one
// that is (its path, or read-only to read-write), is the administrator's.
func checkUpdateDataSource(ctx context.Context, g *Guard, c Caller, req any) error {
	in := req.(*workloadv1.UpdateDataSourceRequest).GetDataSource()
	if in.GetHostPath() != nil {
		return g.checkHostPath(c, "data_source.host_path")
	}
	scope, id := dataSourceKey(in.GetName())
	cur := &workloadv1.DataSource{}
	found, err := stored(ctx, g, etcdstore.PrefixDataSources+scope+"/"+id, cur)
	if err != nil || !found || cur.GetHostPath() == nil {
		return err
	}
	return g.checkHostPath(c, "data_source")
}

// dataSourceKey is the store key's scope and id of a data source's name
// ("account" for the account's).
func dataSourceKey(name string) (scope, id string) {
	i := strings.LastIndex(name, "/dataSources/")
	if i < 0 {
		return "account", strings.TrimPrefix(name, "dataSources/")
	}
	return name[:i], name[i+len("/dataSources/"):]
}

func checkCreateWorkload(_ context.Context, g *Guard, c Caller, req any) error {
	if !clusterproto.DefinesHostPath(req.(*workloadv1.CreateWorkloadRequest).GetWorkload().GetSpec()) {
		return nil
	}
	return g.checkHostPath(c, "workload.spec.data_sources")
}

func checkCreateTemplate(_ context.Context, g *Guard, c Caller, req any) error {
	if !clusterproto.DefinesHostPath(req.(*workloadv1.CreateTemplateRequest).GetTemplate().GetSpec()) {
		return nil
	}
	return g.checkHostPath(c, "template.spec.data_sources")
}
