#!/usr/bin/env bash
# Plays scenarios through the built binary, as the contract asks: each must
# exit 0 and print the same bytes when played twice.
#
#   check-scenarios.sh BIN REPO_DIR [CONTRACT_DIR [SUBDIR ...]]
#
# REPO_DIR is the repository's scenarios/ (every *.yaml in it is played).
# CONTRACT_DIR, when given and present, is ../shared/scenarios: its *.yaml are
# played there too, and each must have an identical copy in REPO_DIR, so the
# copy can never drift. Each SUBDIR (e.g. next) names a subfolder of the
# contract whose rules are built: it is checked the same way against
# REPO_DIR/SUBDIR. FORMAT.md, ../SCHEDULING.md (as ../docs/) and ../traces
# are compared as well.
set -euo pipefail
bin=${1:?usage: check-scenarios.sh BIN REPO_DIR [CONTRACT_DIR [SUBDIR ...]]}
repo=${2:?usage: check-scenarios.sh BIN REPO_DIR [CONTRACT_DIR [SUBDIR ...]]}
contract=${3:-}
shift $(( $# < 3 ? $# : 3 ))
subdirs=("" "$@")

shopt -s nullglob
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0

play() { # play FILE: exit 0 and the same bytes twice
  local f=$1 out="$tmp/out"
  if "$bin" sim run "$f" >"$out.1" 2>"$out.err" &&
     "$bin" sim run "$f" >"$out.2" 2>/dev/null &&
     cmp -s "$out.1" "$out.2"; then
    pass=$((pass + 1))
  else
    fail=$((fail + 1))
    echo "FAIL scenario $f" >&2
    cat "$out.err" >&2
  fi
}

same() { # same FILE DIR: DIR holds an identical copy of FILE
  local copy="$2/$(basename "$1")"
  if [ ! -f "$copy" ]; then
    fail=$((fail + 1))
    echo "FAIL contract: $1 has no copy at $copy" >&2
  elif ! cmp -s "$1" "$copy"; then
    fail=$((fail + 1))
    echo "FAIL contract: $copy differs from $1 (copy it again: cp $1 $copy)" >&2
  fi
}

files=("$repo"/*.yaml)
for sub in "$@"; do files+=("$repo/$sub"/*.yaml); done
if [ ${#files[@]} -eq 0 ]; then
  echo "check-scenarios: no scenario files in $repo" >&2
  exit 1
fi
for f in "${files[@]}"; do play "$f"; done

if [ -n "$contract" ] && [ -d "$contract" ]; then
  for sub in "${subdirs[@]}"; do
    shared=("$contract${sub:+/$sub}"/*.yaml)
    if [ ${#shared[@]} -eq 0 ]; then
      echo "check-scenarios: no scenario files in $contract${sub:+/$sub}" >&2
      exit 1
    fi
    for f in "${shared[@]}"; do
      play "$f"
      same "$f" "$repo${sub:+/$sub}"
    done
  done
  # The format, the rules (docs/ of the repository), and the traces a
  # replay reads (../traces beside each).
  [ -f "$contract/FORMAT.md" ] && same "$contract/FORMAT.md" "$repo"
  [ -f "$contract/../SCHEDULING.md" ] && same "$contract/../SCHEDULING.md" "$repo/../docs"
  for f in "$contract/../traces"/*; do same "$f" "$repo/../traces"; done
  echo "scenarios: every file of $contract${*:+ (and $*)} checked against its copy in $repo"
elif [ -n "$contract" ]; then
  echo "scenarios: no $contract beside the clone; played the repository's copy only"
fi
echo "scenarios: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
