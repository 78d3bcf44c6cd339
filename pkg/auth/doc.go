// Package auth decides, on every call of every Runway service, who is calling
// and whether they may: one interceptor for gRPC (and so for REST, whose
// gateway calls the same gRPC server) built from one table.
//
//   - roles.go is THE permission table: each built-in role × entity ×
//     action (view, create, edit, delete), and where the role may be granted.
//   - methods.go declares, for every RPC, the permission it needs and the
//     scope it touches (a project, a department, the account, or anywhere);
//     an RPC without a declaration is refused (deny by default).
//   - guard.go is the interceptor: it verifies the bearer token (tokens.go;
//     HMAC keys kept in etcd and rotated, keys.go), matches the caller's
//     access rules (subjects user, group, application) against the target,
//     filters List and Watch results to what the caller may view, and hands
//     every mutating call to the audit recorder (audit.go).
//   - escalation.go is what a call needs beyond its permission: a rule
//     grants (or is deleted) only by a caller holding every permission of
//     its role there, a role that administers access only from a wider
//     scope; a department's quota is set from the account; a project moves
//     only into a department where the caller may create projects.
//   - setby.go is where a rule or policy was set from: every mutating call
//     carries the widest scope the caller acts from (ActingScope), and the
//     services storing rules refuse a change to one set from a scope it
//     does not cover (Covers).
//   - mirror.go keeps watch-fed copies of what decisions read (access rules,
//     users, applications, project → department, signing keys), so a
//     decision reads no etcd on the hot path.
//
// Internal callers (the workload service asking the quota service) present a
// service token (ServiceCredentials) signed with the same keys; it carries the
// non-grantable `service` role.
package auth
