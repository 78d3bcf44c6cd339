// Package hostile is the hostile-tenant suite: each test is a real attempt
// by a tenant's workload or an API caller, through real processes (runway
// dev or runway serve, node agents, podman, a rendered chart), at what must
// stay out of its reach, and checks that it failed for the right reason.
// Files by area: hostile_api_test.go (exhaustion and scopes),
// hostile_scope_test.go (rules and policies set from above, assets read
// only where they may be used),
// hostile_container_test.go (the container runtime's users, capabilities and
// network), hostile_creds_test.go and hostile_process_test.go (the agent's
// credentials, the process runtime), hostile_tls_test.go (TLS and signing
// keys); each area's harness is in its *_harness_test.go, and the programs
// it runs as other processes in testdata (credsearch, flood).
package hostile
