#!/usr/bin/env bash
# Import boundaries (ARCHITECTURE.md): the scheduler core is pure, so the
# simulator and the service run the same code with no etcd, gRPC or generated
# code underneath it.
set -euo pipefail
cd "$(dirname "$0")/.."
module=github.com/runwayhq/runway
pure=(pkg/cluster pkg/fairshare pkg/placement pkg/scheduling pkg/scenario)
status=0
for p in "${pure[@]}"; do
  bad=$(go list -deps "./$p" | grep -E '^(go\.etcd\.io/|google\.golang\.org/grpc|'"$module"'/gen/)' || true)
  if [ -n "$bad" ]; then
    echo "check-imports: $p must not import:" >&2
    echo "$bad" | sed 's/^/  /' >&2
    status=1
  fi
done
# pkg/clusterproto converts gen/go types, so it depends on gen/go (whose
# packages carry the gRPC stubs), but it imports no etcd and no gRPC itself.
bad=$( (go list -deps ./pkg/clusterproto | grep -E '^go\.etcd\.io/'; go list -f '{{join .Imports "\n"}}' ./pkg/clusterproto | grep -E '^google\.golang\.org/grpc') || true)
if [ -n "$bad" ]; then
  echo "check-imports: pkg/clusterproto must not import:" >&2
  echo "$bad" | sed 's/^/  /' >&2
  status=1
fi
# No services/X imports services/Y (non-test files): services talk through
# gen/go clients, and shared pure code lives in pkg (e.g. pkg/clusterproto).
for dir in services/*/; do
  svc=$(basename "$dir")
  ls "$dir"*.go >/dev/null 2>&1 || ls -d "$dir"*/ >/dev/null 2>&1 || continue
  for p in $(go list "./services/$svc/..." 2>/dev/null); do
    bad=$(go list -f '{{join .Imports "\n"}}' "$p" | grep -E "^$module/services/" | grep -vE "^$module/services/$svc(/|\$)" || true)
    if [ -n "$bad" ]; then
      echo "check-imports: $p must not import another service:" >&2
      echo "$bad" | sed 's/^/  /' >&2
      status=1
    fi
  done
done
[ "$status" -eq 0 ] && echo "check-imports: the scheduler core imports no etcd, gRPC or generated code; no service imports another"
exit "$status"
