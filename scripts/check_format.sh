#!/usr/bin/env bash
# Fails, listing the files, when a tracked C/C++/CUDA file is not formatted
# as .clang-format says. Pinned to clang-format 14 (Debian 12's): other
# versions format some constructs differently. `scripts/check_format.sh --fix`
# formats them instead.
set -euo pipefail
cd "$(dirname "$0")/.."
format=""
for candidate in clang-format-14 clang-format; do
  if command -v "$candidate" > /dev/null &&
    "$candidate" --version | grep -q "version 14\."; then
    format="$candidate"
    break
  fi
done
if [ -z "$format" ]; then
  echo "check_format: clang-format 14 not found (Debian: apt-get install clang-format)" >&2
  exit 1
fi
if git rev-parse --is-inside-work-tree > /dev/null 2>&1; then
  mapfile -t files < <(git ls-files '*.cc' '*.h' '*.cu' '*.cpp')
else
  mapfile -t files < <(find . -path ./build\* -prune -o \
    \( -name '*.cc' -o -name '*.h' -o -name '*.cu' -o -name '*.cpp' \) -print)
fi
if [ "${1:-}" = --fix ]; then
  "$format" -i "${files[@]}"
  exit 0
fi
unformatted=()
for file in "${files[@]}"; do
  if ! "$format" --dry-run --Werror "$file" > /dev/null 2>&1; then
    unformatted+=("$file")
  fi
done
if [ "${#unformatted[@]}" -gt 0 ]; then
  echo "check_format: ${#unformatted[@]} of ${#files[@]} files are not formatted" \
    "(scripts/check_format.sh --fix formats them):" >&2
  printf '  %s\n' "${unformatted[@]}" >&2
  exit 1
fi
echo "check_format: ${#files[@]} files formatted as .clang-format says"
