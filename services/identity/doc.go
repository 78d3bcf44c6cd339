// Package identity implements runway.identity.v1.IdentityService on etcd:
// local users (bcrypt passwords, temporary until changed at the first
// sign-in), SSO users through OpenID Connect (groups from the ID token),
// personal applications (client id + secret, the secret stored as a hash
// and shown once), immutable access rules, the built-in roles, sign-in with
// throttling, and listing the audit log.
//
// Deciding who may call what is pkg/auth's: this service stores what the
// decisions read and asks pkg/auth to sign tokens.
package identity
