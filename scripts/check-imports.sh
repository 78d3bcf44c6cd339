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
[ "$status" -eq 0 ] && echo "check-imports: the scheduler core imports no etcd, gRPC or generated code"
exit "$status"
