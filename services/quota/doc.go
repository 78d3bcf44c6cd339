// Package quota is Runway's QuotaService: node pools, departments, projects
// and their quotas per node pool and resource, and the account-wide quota
// settings (proto/runway/quota/v1). It owns the etcd prefixes nodepools/,
// departments/, projects/ and the settings key (pkg/etcdstore/schema.go) and
// is the only writer there; the scheduler reads them and turns them into its
// model with clusterproto.ToClusterQuota and ClusterQuotas (pkg/clusterproto).
//
// Files, one concept each:
//
//	server.go        Server, New(Config, Deps), Register, RegisterGateway, the built-ins
//	node_pools.go    NodePool RPCs         departments.go  Department RPCs
//	projects.go      Project RPCs          settings.go     Settings RPCs
//	resource.go      the get/list/create/update/delete flow the three share
//	validate.go      request rules → apierr.Invalid with AIP field paths
//	defaults.go      unset quota and pool fields → their documented defaults
//	mask.go          update_mask (AIP-134) resolution and application
//	setby.go         who set each scheduling rule, and who may change it
//	oversubscription.go  the reject_over_subscription check, with its numbers
//	capacity.go      a pool's Ready capacity, read from the node keys
//	store.go         keys, collections and the one guarded write (change)
//	errors.go        store errors → apierr
//	(pkg/clusterproto converts stored quotas → pkg/cluster.Quota for the scheduler)
//
// See README.md for the write path and the decisions behind it.
package quota
