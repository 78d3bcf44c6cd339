package workload

import (
	"strings"

	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/clusterproto"
)

// Policies, environments and compute resources live at one of three
// scopes: the account (scope ""), `departments/{department}` or
// `projects/{project}`. Their names are the scope, the collection and the
// id: `policies/training`, `departments/research/environments/jupyter`.
const (
	policiesCollection    = "policies"
	envsCollection        = "environments"
	computeCollection     = "computeResources"
	templateCollection    = "templates"
	credentialsCollection = "credentials"
	dataSourcesCollection = "dataSources"
	departmentsPrefix     = "departments/"
	// accountKey stands for the account scope in store keys.
	accountKey = "account"
)

// parseScope checks a scope: "" (the account), `departments/{id}` or
// `projects/{id}`.
func parseScope(scope string) bool {
	if scope == "" {
		return true
	}
	kind, id, ok := strings.Cut(scope, "/")
	return ok && (kind+"/" == departmentsPrefix || kind+"/" == projectsPrefix) && validID(id)
}

// parseScoped splits a scoped resource name of collection into its scope and
// id; ok is false for anything else.
func parseScoped(name, collection string) (scope, id string, ok bool) {
	parts := strings.Split(name, "/")
	switch {
	case len(parts) == 2 && parts[0] == collection:
		return "", parts[1], parts[1] != ""
	case len(parts) == 4 && parts[2] == collection && parts[3] != "":
		scope = parts[0] + "/" + parts[1]
		return scope, parts[3], parseScope(scope)
	}
	return "", "", false
}

// scopedName is the resource name of id in collection at scope.
func scopedName(scope, collection, id string) string {
	if scope == "" {
		return collection + "/" + id
	}
	return scope + "/" + collection + "/" + id
}

// storeKey is the id under a collection's store prefix: the scope (or
// "account") and the id.
func storeKey(scope, id string) string {
	if scope == "" {
		return accountKey + "/" + id
	}
	return scope + "/" + id
}

// scopeOfKey is the scope of a store key (inverse of storeKey).
func scopeOfKey(key string) (scope, id string) {
	i := strings.LastIndex(key, "/")
	scope, id = key[:i], key[i+1:]
	if scope == accountKey {
		scope = ""
	}
	return scope, id
}

// policyType is the workload type a policy id names (`training`), or
// UNSPECIFIED.
func policyType(id string) workloadv1.WorkloadType {
	for _, t := range []workloadv1.WorkloadType{workloadv1.WorkloadType_WORKLOAD_TYPE_WORKSPACE,
		workloadv1.WorkloadType_WORKLOAD_TYPE_TRAINING, workloadv1.WorkloadType_WORKLOAD_TYPE_INFERENCE} {
		if clusterproto.TypeName(t) == id {
			return t
		}
	}
	return workloadv1.WorkloadType_WORKLOAD_TYPE_UNSPECIFIED
}

// scopeDisplay is a scope for people: "the account" or its name.
func scopeDisplay(scope string) string {
	if scope == "" {
		return "the account"
	}
	return scope
}
