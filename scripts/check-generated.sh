#!/usr/bin/env bash
# check-generated.sh: fail if proto/ or gen/ differ from what `make generate`
# would produce (proto formatting included). Regenerates into a temporary copy
# of the contract, so the working tree is never touched and the check also
# works before anything is committed, or on a clean clone with gen/ committed.
#
# Usage: scripts/check-generated.sh   (run by `make check-generated`, which
# installs the tools first). Env: BIN (tool dir, default ./bin), GO (default go).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN=${BIN:-$root/bin}
GO=${GO:-go}
export PATH="$BIN:$PATH"

for t in buf protoc-gen-go protoc-gen-go-grpc protoc-gen-grpc-gateway protoc-gen-openapiv2; do
  [[ -x "$BIN/$t" ]] || { echo "check-generated: $BIN/$t missing; run make tools" >&2; exit 2; }
done
[[ -f "$root/third_party/googleapis/google/api/annotations.proto" ]] ||
  { echo "check-generated: third_party/googleapis missing; run make generate or make check-generated" >&2; exit 2; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The inputs of generation, as they are in the working tree.
cp -R "$root/proto" "$root/buf.yaml" "$root/buf.gen.yaml" "$tmp/"
mkdir -p "$tmp/third_party"
cp -R "$root/third_party/googleapis" "$tmp/third_party/"
# gen/go keeps only its go.mod/go.sum; everything else is regenerated.
mkdir -p "$tmp/gen/go"
cp "$root/gen/go/go.mod" "$tmp/gen/go/"
[[ -f "$root/gen/go/go.sum" ]] && cp "$root/gen/go/go.sum" "$tmp/gen/go/"

# The same steps as `make generate`.
(cd "$tmp" && buf format -w proto && buf generate)
(cd "$tmp/gen/go" && GOWORK=off "$GO" mod tidy)

status=0
for d in proto gen; do
  if ! diff -r -u "$root/$d" "$tmp/$d" >"$tmp/$d.diff" 2>&1; then
    status=1
    echo "check-generated: $d/ is not what make generate produces:" >&2
    sed -e "s|$tmp/|(generated) |g" -e "s|$root/|(tree) |g" "$tmp/$d.diff" | head -n 200 >&2
  fi
done
if [[ $status -ne 0 ]]; then
  echo "check-generated: run 'make generate' and commit proto/ and gen/." >&2
  exit 1
fi
echo "check-generated: proto/ and gen/ are up to date."
