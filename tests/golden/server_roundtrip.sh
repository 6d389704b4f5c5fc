#!/usr/bin/env bash
# The CLI against a real habitat-server: `habitat upload` prints an id,
# `habitat predict ID --server` by that id and `habitat predict FILE
# --server` give the same JSON, table and warnings as the embedded mode,
# and `habitat devices` / `catalogs` agree between the modes.
# usage: server_roundtrip.sh HABITAT HABITAT_SERVER DATA_DIR JSON_TRACE TRACE_ARGS...
set -eu
# shellcheck source=tests/lib/server_port.sh
source "$(dirname "$0")/../lib/server_port.sh"
habitat="$1"
server_bin="$2"
data_dir="$3"
json="$4"
shift 4
server_scratch

# A fresh in-memory store: the default (a SQLite file in the home directory)
# would remember traces from earlier runs.
"$server_bin" --address=127.0.0.1:0 --metrics_address= --data_dir="$data_dir" --store=memory \
  2>"$dir/server.log" &
server_pid=$!
port="$(server_port "$dir/server.log" "$server_pid")"
addr="127.0.0.1:$port"

id="$("$habitat" upload "$json" --server "$addr" "$@" 2>"$dir/upload.err")"
grep -q "stored as a new trace" "$dir/upload.err"
[[ "$id" =~ ^sha256:[0-9a-f]{64}$ ]] || { echo "bad id '$id'" >&2; exit 1; }
again="$("$habitat" upload "$json" --server "$addr" "$@" 2>"$dir/upload2.err")"
[[ "$again" == "$id" ]]
grep -q "already had this trace" "$dir/upload2.err"

"$habitat" predict "$json" "$@" --data-dir "$data_dir" --format json >"$dir/embedded.json"
"$habitat" predict "$json" "$@" --server "$addr" --format json >"$dir/remote_file.json"
"$habitat" predict "$id" --server "$addr" --format json >"$dir/remote_id.json"
diff -u "$dir/embedded.json" "$dir/remote_file.json"
diff -u "$dir/embedded.json" "$dir/remote_id.json"

# The table (stdout) and its warnings (stderr: one line per kind, each in
# full with --explain) are the same from the server, which sends the
# structured warnings the CLI prints.
for explain in "" --explain; do
  "$habitat" predict "$json" "$@" --data-dir "$data_dir" $explain \
    >"$dir/embedded.txt" 2>"$dir/embedded.err"
  "$habitat" predict "$json" "$@" --server "$addr" $explain >"$dir/remote.txt" 2>"$dir/remote.err"
  diff -u "$dir/embedded.txt" "$dir/remote.txt"
  diff -u "$dir/embedded.err" "$dir/remote.err"
  grep -q '^warnings' "$dir/remote.err"
  if grep -q '^warnings' "$dir/remote.txt"; then
    echo "warnings on stdout" >&2
    exit 1
  fi
done

# By id there is no trace file to read the model and precision from: the
# header takes them from the response, as from the file.
"$habitat" predict "$id" --server "$addr" >"$dir/remote_id.txt" 2>/dev/null
diff -u <(head -n 1 "$dir/embedded.txt") <(head -n 1 "$dir/remote_id.txt")
if grep -q '^model ?' "$dir/remote_id.txt"; then
  echo "no model name in the header by id" >&2
  exit 1
fi

for cmd in devices catalogs; do
  "$habitat" "$cmd" --data-dir "$data_dir" --format json >"$dir/$cmd.embedded.json"
  "$habitat" "$cmd" --server "$addr" --format json >"$dir/$cmd.remote.json"
  diff -u "$dir/$cmd.embedded.json" "$dir/$cmd.remote.json"
done

# A server error reaches the user with its message and exit code 1.
set +e
"$habitat" predict "$id" --server "$addr" --devices NO-SUCH-GPU 2>"$dir/err.txt"
code=$?
set -e
[[ $code -eq 1 ]] || { echo "expected exit 1, got $code" >&2; exit 1; }
grep -q 'unknown GPU id "NO-SUCH-GPU"' "$dir/err.txt"

# An id needs a server; unreachable servers are named.
set +e
"$habitat" predict "$id" 2>"$dir/err2.txt"; code2=$?
"$habitat" devices --server 127.0.0.1:1 2>"$dir/err3.txt"; code3=$?
set -e
[[ $code2 -eq 2 ]] && grep -q "give --server" "$dir/err2.txt"
[[ $code3 -eq 1 ]] && grep -q "127.0.0.1:1" "$dir/err3.txt"

kill -TERM "$server_pid"
wait "$server_pid"
server_pid=""
echo "CLI against habitat-server: embedded and remote answers identical"
