#!/usr/bin/env bash
# `habitat import-kineto` then `habitat predict` on the binary trace must
# give exactly what `habitat predict` gives on the JSON trace directly.
# usage: import_roundtrip.sh HABITAT JSON_TRACE IMPORT_ARGS...
set -eu
habitat="$1"
json="$2"
shift 2
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT

"$habitat" import-kineto "$json" "$dir/trace.pb.gz" "$@"
"$habitat" predict "$dir/trace.pb.gz" --format json >"$dir/from_binary.json"
"$habitat" predict "$json" "$@" --format json >"$dir/from_json.json"
diff -u "$dir/from_json.json" "$dir/from_binary.json"
# The binary file really is a gzipped trace, not the JSON copied.
[[ "$(head -c 2 "$dir/trace.pb.gz" | od -An -tx1 | tr -d ' ')" == "1f8b" ]]
echo "import round trip: identical predictions"
