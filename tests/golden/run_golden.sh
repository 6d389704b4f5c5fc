#!/usr/bin/env bash
# Runs one `habitat` command and compares its exit code, stdout and stderr
# with a committed golden file. The golden files are the real program's
# output; regenerate them after an intended change with
#   UPDATE_GOLDEN=1 ctest --test-dir BUILD -R '^golden\.'
# and review the diff before committing.
#
# usage: run_golden.sh HABITAT GOLDEN_FILE [ARGS...]   (run from the repo root)
set -u
habitat="$1"
golden="$2"
shift 2

out="$(mktemp)"
err="$(mktemp)"
actual="$(mktemp)"
trap 'rm -f "$out" "$err" "$actual"' EXIT

"$habitat" "$@" >"$out" 2>"$err"
code=$?
{
  echo "# habitat $*"
  echo "# exit: $code"
  echo "# --- stdout"
  cat "$out"
  echo "# --- stderr"
  cat "$err"
} >"$actual"

if [[ "${UPDATE_GOLDEN:-0}" == "1" ]]; then
  cp "$actual" "$golden"
  echo "updated $golden"
  exit 0
fi
if [[ ! -f "$golden" ]]; then
  echo "missing golden file $golden; create it with UPDATE_GOLDEN=1" >&2
  cat "$actual"
  exit 1
fi
if ! cmp -s "$golden" "$actual"; then
  # Numbers may differ in their last digit between CPUs (see numeric_diff.awk).
  if ! awk -f "$(dirname "$0")/numeric_diff.awk" "$golden" "$actual"; then
    diff -u "$golden" "$actual"
    echo "output differs from $golden (UPDATE_GOLDEN=1 regenerates it)" >&2
    exit 1
  fi
  echo "equal to $golden within the numeric tolerance of numeric_diff.awk"
fi
