package apierr

import commonv1 "github.com/runwayhq/runway/gen/go/runway/common/v1"

// Resource is a kind of thing a request names, with the reasons NotFound and
// AlreadyExists report for it. The set is closed (the fields are unexported)
// so that every not-found and already-exists reason comes from this table.
type Resource struct {
	key           string // metadata key, lowerCamel: "nodePool"
	display       string // in messages: "node pool"
	notFound      commonv1.ErrorReason
	alreadyExists commonv1.ErrorReason // ERROR_REASON_UNSPECIFIED: never created by id
}

// The resources of the API. Role and Priority are referenced, never targeted,
// so their not-found reasons are INVALID_ARGUMENT (see error_reason.proto);
// nodes register themselves, so they have no already-exists reason.
var (
	Project         = Resource{"project", "project", commonv1.ErrorReason_PROJECT_NOT_FOUND, commonv1.ErrorReason_PROJECT_ALREADY_EXISTS}
	Department      = Resource{"department", "department", commonv1.ErrorReason_DEPARTMENT_NOT_FOUND, commonv1.ErrorReason_DEPARTMENT_ALREADY_EXISTS}
	NodePool        = Resource{"nodePool", "node pool", commonv1.ErrorReason_NODE_POOL_NOT_FOUND, commonv1.ErrorReason_NODE_POOL_ALREADY_EXISTS}
	Workload        = Resource{"workload", "workload", commonv1.ErrorReason_WORKLOAD_NOT_FOUND, commonv1.ErrorReason_WORKLOAD_ALREADY_EXISTS}
	Node            = Resource{"node", "node", commonv1.ErrorReason_NODE_NOT_FOUND, commonv1.ErrorReason_ERROR_REASON_UNSPECIFIED}
	User            = Resource{"user", "user", commonv1.ErrorReason_USER_NOT_FOUND, commonv1.ErrorReason_USER_ALREADY_EXISTS}
	Application     = Resource{"application", "application", commonv1.ErrorReason_APPLICATION_NOT_FOUND, commonv1.ErrorReason_APPLICATION_ALREADY_EXISTS}
	AccessRule      = Resource{"accessRule", "access rule", commonv1.ErrorReason_ACCESS_RULE_NOT_FOUND, commonv1.ErrorReason_ACCESS_RULE_ALREADY_EXISTS}
	Role            = Resource{"role", "role", commonv1.ErrorReason_ROLE_NOT_FOUND, commonv1.ErrorReason_ERROR_REASON_UNSPECIFIED}
	Policy          = Resource{"policy", "policy", commonv1.ErrorReason_POLICY_NOT_FOUND, commonv1.ErrorReason_ERROR_REASON_UNSPECIFIED}
	Environment     = Resource{"environment", "environment", commonv1.ErrorReason_ENVIRONMENT_NOT_FOUND, commonv1.ErrorReason_ENVIRONMENT_ALREADY_EXISTS}
	ComputeResource = Resource{"computeResource", "compute resource", commonv1.ErrorReason_COMPUTE_RESOURCE_NOT_FOUND, commonv1.ErrorReason_COMPUTE_RESOURCE_ALREADY_EXISTS}
	Credential      = Resource{"credential", "credential", commonv1.ErrorReason_CREDENTIAL_NOT_FOUND, commonv1.ErrorReason_CREDENTIAL_ALREADY_EXISTS}
	Template        = Resource{"template", "template", commonv1.ErrorReason_TEMPLATE_NOT_FOUND, commonv1.ErrorReason_TEMPLATE_ALREADY_EXISTS}
	DataSource      = Resource{"dataSource", "data source", commonv1.ErrorReason_DATA_SOURCE_NOT_FOUND, commonv1.ErrorReason_DATA_SOURCE_ALREADY_EXISTS}
	Priority        = Resource{"priority", "priority", commonv1.ErrorReason_PRIORITY_NOT_FOUND, commonv1.ErrorReason_ERROR_REASON_UNSPECIFIED}
	Report          = Resource{"report", "report", commonv1.ErrorReason_REPORT_NOT_FOUND, commonv1.ErrorReason_REPORT_ALREADY_EXISTS}
	Subscription    = Resource{"subscription", "subscription", commonv1.ErrorReason_SUBSCRIPTION_NOT_FOUND, commonv1.ErrorReason_SUBSCRIPTION_ALREADY_EXISTS}
)

// String is the resource's metadata key, for logs and test names.
func (r Resource) String() string { return r.key }
