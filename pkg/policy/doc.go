// Package policy is the pure logic of workload policies: which fields of a
// WorkloadSpec a policy may speak of (named by their JSON paths, as the REST
// API writes them), the merge of the account's, a department's and a
// project's policies into the one in force for a project, the defaults it
// fills in and the rules it checks. It reads and writes protobuf messages
// and does no I/O; services/workload stores the policies and calls it at
// submit.
package policy
