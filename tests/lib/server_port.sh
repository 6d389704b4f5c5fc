# shellcheck shell=bash
# Sourced by the shell tests that start habitat-server on port 0.

# server_scratch: sets dir to a new temporary folder and server_pid to "",
# and on exit stops the server the caller started as server_pid (if any) and
# removes dir.
server_scratch() {
  dir="$(mktemp -d)"
  server_pid=""
  trap server_scratch_cleanup EXIT
}
server_scratch_cleanup() {
  if [[ -n "$server_pid" ]]; then kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
  rm -rf "$dir"
}

# server_port LOG PID: waits up to 30 s for the server's "serving on port N"
# line in LOG and prints N; fails, printing LOG, if PID exits first.
server_port() {
  local log="$1" pid="$2" port=""
  for _ in $(seq 1 300); do
    port="$(sed -n 's/.*serving on port \([0-9]*\).*/\1/p' "$log")"
    if [[ -n "$port" ]]; then
      echo "$port"
      return 0
    fi
    kill -0 "$pid" 2>/dev/null || { cat "$log" >&2; return 1; }
    sleep 0.1
  done
  echo "habitat-server did not report its port" >&2
  return 1
}
