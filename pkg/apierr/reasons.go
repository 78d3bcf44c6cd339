package apierr

import (
	"slices"

	"google.golang.org/grpc/codes"

	commonv1 "github.com/runwayhq/runway/gen/go/runway/common/v1"
)

// rule is one row of the table: the code a reason is always returned with and
// the metadata keys its ErrorInfo carries. keys[0] is the subject key, the
// one constructors such as FailedPrecondition fill from their subject
// argument; the rest are added with (*Error).With.
type rule struct {
	code codes.Code
	keys []string
}

// table is the single mapping from ErrorReason to gRPC code and metadata keys.
// It copies the "Code X. Metadata: ..." of each value's comment in
// proto/runway/common/v1/error_reason.proto; TestTable_matchesProto fails when
// the two drift apart. A reason missing here is a bug and maps to Internal.
var table = map[commonv1.ErrorReason]rule{
	commonv1.ErrorReason_INVALID_FIELD:      {codes.InvalidArgument, []string{"field"}},
	commonv1.ErrorReason_IMMUTABLE_FIELD:    {codes.InvalidArgument, []string{"field"}},
	commonv1.ErrorReason_INVALID_PAGE_TOKEN: {codes.InvalidArgument, nil},
	commonv1.ErrorReason_INVALID_FILTER:     {codes.InvalidArgument, []string{"filter"}},

	commonv1.ErrorReason_ETAG_MISMATCH:            {codes.Aborted, []string{"name", "etag"}},
	commonv1.ErrorReason_INVALID_STATE_TRANSITION: {codes.FailedPrecondition, []string{"name", "phase"}},
	commonv1.ErrorReason_RESUME_TOKEN_EXPIRED:     {codes.FailedPrecondition, nil},

	commonv1.ErrorReason_PROJECT_NOT_FOUND:         {codes.NotFound, []string{"project"}},
	commonv1.ErrorReason_PROJECT_ALREADY_EXISTS:    {codes.AlreadyExists, []string{"project"}},
	commonv1.ErrorReason_PROJECT_NOT_EMPTY:         {codes.FailedPrecondition, []string{"project", "workloadCount"}},
	commonv1.ErrorReason_DEPARTMENT_NOT_FOUND:      {codes.NotFound, []string{"department"}},
	commonv1.ErrorReason_DEPARTMENT_ALREADY_EXISTS: {codes.AlreadyExists, []string{"department"}},
	commonv1.ErrorReason_DEPARTMENT_NOT_EMPTY:      {codes.FailedPrecondition, []string{"department", "projectCount"}},
	commonv1.ErrorReason_NODE_POOL_NOT_FOUND:       {codes.NotFound, []string{"nodePool"}},
	commonv1.ErrorReason_NODE_POOL_ALREADY_EXISTS:  {codes.AlreadyExists, []string{"nodePool"}},
	commonv1.ErrorReason_NODE_POOL_IN_USE:          {codes.FailedPrecondition, []string{"nodePool"}},
	commonv1.ErrorReason_BUILT_IN_RESOURCE:         {codes.FailedPrecondition, []string{"name"}},
	commonv1.ErrorReason_QUOTA_LIMIT_EXCEEDED:      {codes.ResourceExhausted, []string{"subject", "nodePool", "resource", "requested", "limit"}},
	commonv1.ErrorReason_OVER_SUBSCRIBED:           {codes.FailedPrecondition, []string{"parent", "nodePool", "resource", "deserved", "available"}},
	commonv1.ErrorReason_PRIORITY_NOT_FOUND:        {codes.InvalidArgument, []string{"priority"}},

	commonv1.ErrorReason_WORKLOAD_NOT_FOUND:      {codes.NotFound, []string{"workload"}},
	commonv1.ErrorReason_WORKLOAD_ALREADY_EXISTS: {codes.AlreadyExists, []string{"workload"}},
	commonv1.ErrorReason_WORKLOAD_NOT_BOUND:      {codes.FailedPrecondition, []string{"workload", "node", "podIndex"}},
	commonv1.ErrorReason_WORKLOAD_NO_LOGS:        {codes.FailedPrecondition, []string{"workload", "podIndex"}},

	commonv1.ErrorReason_POLICY_NOT_FOUND:                {codes.NotFound, []string{"policy"}},
	commonv1.ErrorReason_POLICY_RULE_CONFLICT:            {codes.FailedPrecondition, []string{"field", "scope"}},
	commonv1.ErrorReason_ENVIRONMENT_NOT_FOUND:           {codes.NotFound, []string{"environment"}},
	commonv1.ErrorReason_ENVIRONMENT_ALREADY_EXISTS:      {codes.AlreadyExists, []string{"environment"}},
	commonv1.ErrorReason_COMPUTE_RESOURCE_NOT_FOUND:      {codes.NotFound, []string{"computeResource"}},
	commonv1.ErrorReason_COMPUTE_RESOURCE_ALREADY_EXISTS: {codes.AlreadyExists, []string{"computeResource"}},
	commonv1.ErrorReason_CREDENTIAL_NOT_FOUND:            {codes.NotFound, []string{"credential"}},
	commonv1.ErrorReason_CREDENTIAL_ALREADY_EXISTS:       {codes.AlreadyExists, []string{"credential"}},
	commonv1.ErrorReason_CREDENTIAL_KEY_MISSING:          {codes.FailedPrecondition, []string{"credential", "keyId"}},
	commonv1.ErrorReason_TEMPLATE_NOT_FOUND:              {codes.NotFound, []string{"template"}},
	commonv1.ErrorReason_TEMPLATE_ALREADY_EXISTS:         {codes.AlreadyExists, []string{"template"}},
	commonv1.ErrorReason_DATA_SOURCE_NOT_FOUND:           {codes.NotFound, []string{"dataSource"}},
	commonv1.ErrorReason_DATA_SOURCE_ALREADY_EXISTS:      {codes.AlreadyExists, []string{"dataSource"}},

	commonv1.ErrorReason_NODE_NOT_FOUND: {codes.NotFound, []string{"node"}},

	commonv1.ErrorReason_REPORT_NOT_FOUND:      {codes.NotFound, []string{"report"}},
	commonv1.ErrorReason_REPORT_ALREADY_EXISTS: {codes.AlreadyExists, []string{"report"}},
	commonv1.ErrorReason_REPORT_NOT_READY:      {codes.FailedPrecondition, []string{"report"}},

	commonv1.ErrorReason_SUBSCRIPTION_NOT_FOUND:      {codes.NotFound, []string{"subscription"}},
	commonv1.ErrorReason_SUBSCRIPTION_ALREADY_EXISTS: {codes.AlreadyExists, []string{"subscription"}},

	commonv1.ErrorReason_USER_NOT_FOUND:             {codes.NotFound, []string{"user"}},
	commonv1.ErrorReason_USER_ALREADY_EXISTS:        {codes.AlreadyExists, []string{"user"}},
	commonv1.ErrorReason_APPLICATION_NOT_FOUND:      {codes.NotFound, []string{"application"}},
	commonv1.ErrorReason_APPLICATION_ALREADY_EXISTS: {codes.AlreadyExists, []string{"application"}},
	commonv1.ErrorReason_ACCESS_RULE_NOT_FOUND:      {codes.NotFound, []string{"accessRule"}},
	commonv1.ErrorReason_ACCESS_RULE_ALREADY_EXISTS: {codes.AlreadyExists, []string{"accessRule"}},
	commonv1.ErrorReason_ROLE_NOT_FOUND:             {codes.InvalidArgument, []string{"role"}},
	commonv1.ErrorReason_APPLICATION_LIMIT_EXCEEDED: {codes.ResourceExhausted, []string{"user", "limit"}},
	commonv1.ErrorReason_OBJECT_LIMIT_EXCEEDED:      {codes.ResourceExhausted, []string{"project", "kind", "limit"}},

	commonv1.ErrorReason_CREDENTIALS_MISSING:       {codes.Unauthenticated, nil},
	commonv1.ErrorReason_CREDENTIALS_INVALID:       {codes.Unauthenticated, nil},
	commonv1.ErrorReason_PERMISSION_DENIED:         {codes.PermissionDenied, []string{"permission", "resource"}},
	commonv1.ErrorReason_PASSWORD_CHANGE_REQUIRED:  {codes.FailedPrecondition, []string{"user"}},
	commonv1.ErrorReason_TOO_MANY_SIGN_IN_ATTEMPTS: {codes.ResourceExhausted, nil},
	commonv1.ErrorReason_NO_SESSION:                {codes.FailedPrecondition, []string{"principal"}},
	commonv1.ErrorReason_TOO_MANY_REFUSED_CALLS:    {codes.ResourceExhausted, nil},
	commonv1.ErrorReason_WATCH_LIMIT_EXCEEDED:      {codes.ResourceExhausted, []string{"caller", "limit"}},

	commonv1.ErrorReason_NOT_LEADER:        {codes.Unavailable, nil},
	commonv1.ErrorReason_STORE_UNAVAILABLE: {codes.Unavailable, nil},
	commonv1.ErrorReason_INTERNAL_ERROR:    {codes.Internal, []string{"requestId"}},
}

// CodeOf is the gRPC code the reason is always returned with; Internal for a
// reason the table does not know.
func CodeOf(reason commonv1.ErrorReason) codes.Code {
	if r, ok := table[reason]; ok {
		return r.code
	}
	return codes.Internal
}

// subjectKey is the metadata key for the subject of a reason, or "subject"
// when the reason documents none.
func subjectKey(reason commonv1.ErrorReason) string {
	if r, ok := table[reason]; ok && len(r.keys) > 0 {
		return r.keys[0]
	}
	return "subject"
}

// MetadataKeys lists the metadata keys the reason's ErrorInfo may carry, in
// the table's order; nil for a reason without metadata or not in the table.
func MetadataKeys(reason commonv1.ErrorReason) []string {
	return slices.Clone(table[reason].keys)
}
