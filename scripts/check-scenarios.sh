#!/usr/bin/env bash
# Plays every shared scenario through the built binary, as the contract asks:
# each must exit 0, and print the same bytes when played twice.
set -euo pipefail
bin=${1:?usage: check-scenarios.sh BIN DIR}
dir=${2:?usage: check-scenarios.sh BIN DIR}
shopt -s nullglob
files=("$dir"/*.yaml)
if [ ${#files[@]} -eq 0 ]; then
  echo "check-scenarios: no scenario files in $dir" >&2
  exit 1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0
for f in "${files[@]}"; do
  name=$(basename "$f" .yaml)
  if "$bin" sim run "$f" >"$tmp/$name.1" 2>"$tmp/$name.err" &&
     "$bin" sim run "$f" >"$tmp/$name.2" 2>/dev/null &&
     cmp -s "$tmp/$name.1" "$tmp/$name.2"; then
    pass=$((pass + 1))
  else
    fail=$((fail + 1))
    echo "FAIL scenario $name" >&2
    cat "$tmp/$name.err" >&2
  fi
done
echo "scenarios: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
