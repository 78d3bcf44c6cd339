#!/usr/bin/env bash
# check-ui.sh: fail if pkg/webui/dist (the committed, embedded web UI) is not
# what a fresh build of ui/ produces, as check-generated.sh does for gen/.
# Builds into a temporary directory, so the tree is never touched.
# Usage: scripts/check-ui.sh (run by `make check-ui` after npm ci in ui/).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$root/ui" && OUT_DIR="$tmp/dist" npm run --silent build >"$tmp/build.log" 2>&1) ||
  { cat "$tmp/build.log" >&2; echo "check-ui: the UI does not build" >&2; exit 1; }
if ! diff -r -q "$root/pkg/webui/dist" "$tmp/dist" >&2; then
  echo "check-ui: pkg/webui/dist is not what make ui builds from ui/; run 'make ui' and commit pkg/webui/dist." >&2
  exit 1
fi
echo "check-ui: pkg/webui/dist is up to date."
