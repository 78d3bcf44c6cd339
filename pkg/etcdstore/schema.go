package etcdstore

import (
	"context"
	"fmt"
	"sort"
	"strconv"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Owner names the one service allowed to write under a key prefix. Any
// service may read any prefix (through its owner's API where one exists);
// only the owner writes, so each key has a single source of truth.
type Owner string

// The owners. "runway" is the process that bootstraps the store (the dev
// mode or the first service to start); it only writes KeySchemaVersion.
const (
	OwnerRunway      Owner = "runway"
	OwnerQuota       Owner = "quota"
	OwnerWorkload    Owner = "workload"
	OwnerScheduler   Owner = "scheduler"
	OwnerNodeManager Owner = "nodemanager"
	OwnerIdentity    Owner = "identity"
	OwnerMetrics     Owner = "metrics"
)

// Root is the prefix of every Runway key; v1 is the schema generation.
const Root = "/runway/v1/"

// SchemaVersion is the layout of keys and values this binary reads and
// writes. Bump it (and write a migration) when a stored encoding changes
// incompatibly; additive proto changes do not need a bump.
const SchemaVersion = 1

// Every key and prefix Runway writes. A prefix ends in "/" and holds a
// collection keyed by the resource-name path below it (for example
// PrefixWorkloads + "team-a/train-1"); the others are single keys. The
// trailing slash matters: it keeps "nodes/" from matching "nodepools/".
const (
	// KeySchemaVersion holds SchemaVersion as a decimal string.
	KeySchemaVersion = Root + "schema-version"

	// Quota service.
	PrefixNodePools   = Root + "nodepools/"   // {node_pool}
	PrefixDepartments = Root + "departments/" // {department}
	PrefixProjects    = Root + "projects/"    // {project}
	KeySettings       = Root + "settings"     // the quota Settings singleton

	// Workload service.
	PrefixWorkloads = Root + "workloads/" // {project}/{workload}
	// Policies, environments and compute resources are keyed by scope
	// ("account", "departments/{department}" or "projects/{project}") and id
	// (for a policy, the workload type).
	PrefixPolicies         = Root + "policies/"         // {scope}/{type}
	PrefixEnvironments     = Root + "environments/"     // {scope}/{environment}
	PrefixComputeResources = Root + "computeresources/" // {scope}/{compute_resource}
	PrefixCredentials      = Root + "credentials/"      // {scope}/{credential}: values sealed
	PrefixTemplates        = Root + "templates/"        // {scope}/{template}
	PrefixDataSources      = Root + "datasources/"      // {scope}/{data_source}
	// Notifications: each user's subscriptions and the record of each
	// notification (what was sent or why not, the attempts).
	PrefixSubscriptions = Root + "subscriptions/" // {user}/{subscription}
	PrefixDeliveries    = Root + "deliveries/"    // {user}/{subscription}/{delivery}
	// PrefixToolTickets holds the ids of the tool tickets already
	// exchanged, under a lease as long as a ticket lives: each is accepted
	// once, on any replica.
	PrefixToolTickets = Root + "tooltickets/" // {ticket id}

	// Scheduler service.
	PrefixBindings = Root + "bindings/" // {node}/{project}.{workload}.{pod}: a workloadv1.PodStatus
	// PrefixPods holds one key per bound pod, written and deleted in the
	// same transaction as its binding and created only if absent, so etcd
	// refuses a second binding of a pod that is bound (on any node).
	PrefixPods = Root + "pods/" // {project}/{workload}/{pod}: a workloadv1.PodStatus (index, node)
	// PrefixElectionScheduler is handed to concurrency.NewElection, which
	// appends "/<lease id>" per candidate; the leader's key and its
	// CreateRevision fence every plan the scheduler writes (Batch.Fence).
	PrefixElectionScheduler = Root + "election/scheduler"
	PrefixQueues            = Root + "queues/" // {node_pool}/{project}: published queue status
	// PrefixEvictions holds one workloadv1.WorkloadEvent (PREEMPTED, with
	// the rule and the workload it made room for) per eviction, written in
	// the same fenced transaction that deletes the bindings; the Workload
	// service folds them into the workload's status.
	PrefixEvictions = Root + "evictions/" // {project}/{workload}/{time}-{n}
	// PrefixReasons holds, per waiting workload, the last cycle's reasons
	// it could not be placed (a workloadv1.WorkloadStatus with only
	// pending_reasons set), written by the leader in its fenced plan
	// transaction only when they change, deleted once the workload is
	// placed or gone; the Workload service folds them into
	// status.pending_reasons.
	PrefixReasons = Root + "reasons/" // {project}/{workload}
	// PrefixUsage holds, per queue, its decayed usage for time-based fair
	// share (a schedulerv1.QueueUsage), rewritten in place by the leader on
	// its own cadence, fenced like a plan, so a new leader continues from it.
	PrefixUsage = Root + "usage/" // {projects|departments}/{id}

	// NodeManager service and its node agents.
	PrefixNodes  = Root + "nodes/"  // {node}, kept alive with a lease
	PrefixLeases = Root + "leases/" // {node}: the node's etcd lease id
	PrefixRuns   = Root + "runs/"   // {node}/{project}.{workload}.{pod}: run reports
	PrefixDrains = Root + "drains/" // {node}
	// PrefixNodeRoles holds the roles an administrator gave each node
	// (SetNodeRoles), which outlive its leased node key like a drain.
	PrefixNodeRoles = Root + "noderoles/" // {node}
	// PrefixPlans holds each node's current time-slicing plan (a
	// nodemanagerv1.TimeSlicePlan), written by its agent when it changes.
	PrefixPlans = Root + "plans/" // {node}
	// KeyKubePodMark is where an older Runway kept the Kubernetes runtime's
	// key for the marks on its pods. The key is now a Secret of Runway's
	// namespace (kube.MarkKeySecret: the node agents hold an etcd
	// credential); the runtime moves a key found here into it and deletes
	// this one.
	KeyKubePodMark = Root + "kubernetes/pod-mark-key"
	// PrefixAgents holds the address of each Kubernetes node's agent
	// (Kubernetes mode: the runtime writes the node key), under the
	// agent's lease.
	PrefixAgents = Root + "agents/" // {node}

	// Identity service.
	PrefixUsers        = Root + "users/"        // {user}
	PrefixApplications = Root + "applications/" // {application}
	PrefixAccessRules  = Root + "accessrules/"  // {access_rule}
	PrefixSigningKeys  = Root + "signingkeys/"  // {key id}
	// PrefixVerifyingKeys holds the public halves of the signing keys: all
	// that node agents need to check a service's token.
	PrefixVerifyingKeys = Root + "verifyingkeys/" // {key id}
	PrefixAudit         = Root + "audit/"         // {time}-{request id}

	// The metrics service's consumption reports (their CSVs are in the
	// blob store).
	PrefixReports = Root + "reports/" // {report}

	// PrefixSignInFailures: failed sign-ins per user or client id (hashed),
	// under a lease, so every replica throttles alike and nothing stays.
	PrefixSignInFailures = Root + "signinfailures/" // {sha-256 of the key}/{time}-{rand}
	// PrefixSessions: refresh-token families (a sign-in and its refreshes).
	PrefixSessions = Root + "sessions/" // {session id}
	// PrefixUserSessions indexes the live sessions of each principal, under
	// the session's lease, so a sign-in finds (and caps) them without
	// reading every session.
	PrefixUserSessions = Root + "usersessions/" // {sha-256 of the principal}/{time}-{session id}
	// The sign-in indexes: a sign-in by email, client id or SSO subject
	// reads one key, not every user or application.
	PrefixUserEmails  = Root + "useremails/"  // {sha-256 of the email}: the local user's id
	PrefixClientIDs   = Root + "clientids/"   // {client id}: the application's id
	PrefixSSOSubjects = Root + "ssosubjects/" // {sha-256 of issuer and sub}: the SSO user's id
	// PrefixAuditRefused indexes the audit events that aggregate refused
	// calls, so the size cap drops the oldest of them (never a change's).
	PrefixAuditRefused = Root + "auditrefused/" // {audit event id}
	// KeyBootstrapped marks that the bootstrap administrator was created
	// once: it is never created again, even if it is deleted.
	KeyBootstrapped = Root + "bootstrapped"
)

// PrefixInfo describes one entry of the schema.
type PrefixInfo struct {
	Key    string // the prefix (ends in "/"), election prefix or single key
	Owner  Owner  // the only service that writes it
	Single bool   // a single key rather than a prefix of many
	Doc    string // what lives there
}

var prefixes = []PrefixInfo{
	{KeySchemaVersion, OwnerRunway, true, "schema version of everything under " + Root},
	{PrefixNodePools, OwnerQuota, false, "NodePool by id"},
	{PrefixDepartments, OwnerQuota, false, "Department by id"},
	{PrefixProjects, OwnerQuota, false, "Project by id"},
	{KeySettings, OwnerQuota, true, "quota Settings (over-subscription policy)"},
	{PrefixWorkloads, OwnerWorkload, false, "Workload by project/workload"},
	{PrefixPolicies, OwnerWorkload, false, "workload Policy by scope/type"},
	{PrefixEnvironments, OwnerWorkload, false, "Environment by scope/id"},
	{PrefixComputeResources, OwnerWorkload, false, "ComputeResource by scope/id"},
	{PrefixCredentials, OwnerWorkload, false, "SealedCredential by scope/id (values AES-GCM sealed)"},
	{PrefixTemplates, OwnerWorkload, false, "Template by scope/id"},
	{PrefixDataSources, OwnerWorkload, false, "DataSource by scope/id"},
	{PrefixSubscriptions, OwnerWorkload, false, "notification Subscription by user/id"},
	{PrefixDeliveries, OwnerWorkload, false, "notification Delivery records by user/subscription/id"},
	{PrefixToolTickets, OwnerWorkload, false, "exchanged tool ticket ids, leased"},
	{PrefixBindings, OwnerScheduler, false, "pod binding (PodStatus) by node/project.workload.pod"},
	{PrefixPods, OwnerScheduler, false, "one key per bound pod (PodStatus: index, node) by project/workload/pod"},
	{PrefixEvictions, OwnerScheduler, false, "eviction events (WorkloadEvent) by project/workload/time-n"},
	{PrefixReasons, OwnerScheduler, false, "pending reasons (WorkloadStatus.pending_reasons) by project/workload"},
	{PrefixElectionScheduler, OwnerScheduler, false, "scheduler leader election candidates (concurrency.Election)"},
	{PrefixQueues, OwnerScheduler, false, "queue status by node_pool/project"},
	{PrefixUsage, OwnerScheduler, false, "decayed usage for time-based fair share (QueueUsage) by projects|departments/id"},
	{PrefixNodes, OwnerNodeManager, false, "Node by id, leased"},
	{PrefixLeases, OwnerNodeManager, false, "node lease ids by node"},
	{PrefixRuns, OwnerNodeManager, false, "run reports by node/project.workload"},
	{PrefixDrains, OwnerNodeManager, false, "drain requests by node"},
	{PrefixNodeRoles, OwnerNodeManager, false, "node roles (SetNodeRolesRequest) by node"},
	{PrefixPlans, OwnerNodeManager, false, "time-slicing plan (TimeSlicePlan) by node"},
	{KeyKubePodMark, OwnerNodeManager, true, "former home of the Kubernetes runtime's mark key (moved into a Secret, then deleted)"},
	{PrefixAgents, OwnerNodeManager, false, "address of a Kubernetes node's agent by node, leased"},
	{PrefixUsers, OwnerIdentity, false, "User by id"},
	{PrefixApplications, OwnerIdentity, false, "Application by id"},
	{PrefixAccessRules, OwnerIdentity, false, "AccessRule by id"},
	{PrefixSigningKeys, OwnerIdentity, false, "token signing keys by key id"},
	{PrefixVerifyingKeys, OwnerIdentity, false, "the signing keys' public halves by key id (node agents read these)"},
	{PrefixAudit, OwnerIdentity, false, "audit records by time"},
	{PrefixReports, OwnerMetrics, false, "consumption Report by id"},
	{PrefixSignInFailures, OwnerIdentity, false, "failed sign-ins by hashed key and time, leased"},
	{PrefixSessions, OwnerIdentity, false, "refresh-token families by session id"},
	{PrefixUserSessions, OwnerIdentity, false, "live sessions by hashed principal and time, leased"},
	{PrefixUserEmails, OwnerIdentity, false, "local user id by hashed email (sign-in index)"},
	{PrefixClientIDs, OwnerIdentity, false, "application id by client id (sign-in index)"},
	{PrefixSSOSubjects, OwnerIdentity, false, "SSO user id by hashed issuer and sub (sign-in index)"},
	{PrefixAuditRefused, OwnerIdentity, false, "ids of the audit events of refused calls, oldest first (size cap)"},
	{KeyBootstrapped, OwnerIdentity, true, "when the bootstrap administrator was created (once)"},
}

// Prefixes lists every key and prefix of the schema, sorted by key, for
// tests (no overlaps, one owner each) and docs. The slice is a copy.
func Prefixes() []PrefixInfo {
	out := append([]PrefixInfo(nil), prefixes...)
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// EnsureSchemaVersion writes SchemaVersion to KeySchemaVersion if the store
// is new, and otherwise checks that the stored version is the one this
// binary speaks (ErrSchemaVersion if not). Call it once at startup.
func EnsureSchemaVersion(ctx context.Context, client *clientv3.Client) error {
	want := strconv.Itoa(SchemaVersion)
	resp, err := client.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(KeySchemaVersion), "=", 0)).
		Then(clientv3.OpPut(KeySchemaVersion, want)).
		Else(clientv3.OpGet(KeySchemaVersion)).
		Commit()
	if err != nil {
		return wrapErr(ctx, "ensure schema version", KeySchemaVersion, err)
	}
	if resp.Succeeded {
		return nil
	}
	kvs := resp.Responses[0].GetResponseRange().Kvs
	if len(kvs) == 1 && string(kvs[0].Value) == want {
		return nil
	}
	got := "<deleted>"
	if len(kvs) == 1 {
		got = string(kvs[0].Value)
	}
	return fmt.Errorf("store at %s has schema version %s, this binary needs %s: %w", Root, got, want, ErrSchemaVersion)
}
