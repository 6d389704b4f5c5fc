#!/usr/bin/env bash
# Debian's real Prometheus scraping the real habitat-server, on loopback:
#   1. start habitat-server (free ports) and Prometheus (its own config, a
#      1 s scrape of the server, deploy/prometheus/alerts.yml as its rules,
#      storage in a temporary directory);
#   2. call the server with the habitat CLI: devices, upload, predict twice;
#   3. read back through Prometheus's HTTP API: habitat_devices_loaded equals
#      the number of GPUs in data/devices.textproto, the request, store and
#      cache counters show the calls, every dashboard query evaluates, every
#      alert rule evaluates without error;
#   4. stop the server and see HabitatServerDown go pending.
# Every wait is bounded (60 s at most); both processes are stopped on exit.
# usage: prometheus_scrape_test.sh HABITAT_SERVER HABITAT_CLI PROMETHEUS REPO_ROOT TRACE TRACE_ARGS...
set -euo pipefail
server_bin="$1"
cli="$2"
prometheus_bin="$3"
root="$4"
trace="$5"
shift 5
data_dir="$root/data"
here="$root/tests/deploy"

dir="$(mktemp -d)"
server_pid=""
prom_pid=""
cleanup() {
  for pid in $server_pid $prom_pid; do
    kill "$pid" 2>/dev/null || true
  done
  for pid in $server_pid $prom_pid; do
    wait "$pid" 2>/dev/null || true
  done
  rm -rf "$dir"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*" >&2
  for log in server prometheus; do
    [[ -f "$dir/$log.log" ]] && { echo "--- $log log (tail)" >&2; tail -20 "$dir/$log.log" >&2; }
  done
  exit 1
}
query() { python3 "$here/prom_query.py" "$prom_url" "$1"; }
# wait_for SECONDS DESCRIPTION COMMAND...: retries COMMAND every 0.5 s.
wait_for() {
  local seconds="$1" what="$2"
  shift 2
  local deadline=$((SECONDS + seconds))
  until "$@"; do
    ((SECONDS < deadline)) || fail "timed out after ${seconds}s waiting for $what"
    sleep 0.5
  done
}

# --- habitat-server on free loopback ports.
"$server_bin" --address=127.0.0.1:0 --metrics_address=127.0.0.1:0 \
  --data_dir="$data_dir" --store="dir:$dir/traces" >"$dir/server.log" 2>&1 &
server_pid=$!
server_ports() {
  kill -0 "$server_pid" 2>/dev/null || fail "habitat-server exited"
  grpc_port="$(sed -n 's/.*serving on port \([0-9]*\).*/\1/p' "$dir/server.log")"
  metrics_port="$(sed -n 's/.*metrics on port \([0-9]*\).*/\1/p' "$dir/server.log")"
  [[ -n "$grpc_port" && -n "$metrics_port" && "$metrics_port" != 0 ]]
}
wait_for 30 "habitat-server to report its ports" server_ports
addr="127.0.0.1:$grpc_port"

# --- Prometheus with its own config; retry if the port we picked was taken.
cat >"$dir/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files:
  - $root/deploy/prometheus/alerts.yml
scrape_configs:
  - job_name: habitat-server
    static_configs:
      - targets: ["127.0.0.1:$metrics_port"]
EOF
for attempt in 1 2 3; do
  prom_port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
  prom_url="http://127.0.0.1:$prom_port"
  "$prometheus_bin" --config.file="$dir/prometheus.yml" --storage.tsdb.path="$dir/tsdb" \
    --web.listen-address="127.0.0.1:$prom_port" --log.level=warn >"$dir/prometheus.log" 2>&1 &
  prom_pid=$!
  prom_ready() {
    kill -0 "$prom_pid" 2>/dev/null || return 2
    python3 "$here/prom_query.py" "$prom_url" "vector(1)" >/dev/null 2>&1
  }
  deadline=$((SECONDS + 30))
  until prom_ready; do
    if ! kill -0 "$prom_pid" 2>/dev/null; then
      wait "$prom_pid" 2>/dev/null || true
      prom_pid=""
      break
    fi
    ((SECONDS < deadline)) || fail "timed out after 30s waiting for Prometheus to answer"
    sleep 0.5
  done
  [[ -n "$prom_pid" ]] && break
  grep -q "address already in use" "$dir/prometheus.log" || fail "Prometheus exited"
done
[[ -n "$prom_pid" ]] || fail "Prometheus could not get a port"
echo "habitat-server gRPC $addr, metrics 127.0.0.1:$metrics_port; Prometheus $prom_url"

# --- Calls: the device list, one upload, the same prediction twice (a cache
# miss, then a hit).
"$cli" devices --server "$addr" --format json >"$dir/devices.json" 2>"$dir/cli.err" \
  || fail "habitat devices: $(cat "$dir/cli.err")"
id="$("$cli" upload "$trace" --server "$addr" "$@" 2>>"$dir/cli.err")" || fail "habitat upload: $(cat "$dir/cli.err")"
for _ in 1 2; do
  "$cli" predict "$id" --server "$addr" --format json >/dev/null 2>>"$dir/cli.err" \
    || fail "habitat predict: $(cat "$dir/cli.err")"
done

# --- Read the server's state back through Prometheus.
expected_devices="$(grep -c '^devices {' "$data_dir/devices.textproto")"
((expected_devices > 0)) || fail "no devices counted in $data_dir/devices.textproto"
# value_is QUERY VALUE: the query has exactly one series and it equals VALUE.
value_is() {
  local out
  out="$(query "$1")" || fail "query '$1' failed"
  [[ "$(wc -l <<<"$out")" -eq 1 && "${out##* }" == "$2" ]]
}
wait_for 60 "habitat_devices_loaded == $expected_devices via Prometheus" \
  value_is 'habitat_devices_loaded{job="habitat-server"}' "$expected_devices"
echo "habitat_devices_loaded = $expected_devices, as in data/devices.textproto"
wait_for 30 "ListDevices OK = 1" value_is 'habitat_requests_total{rpc="ListDevices",code="OK"}' 1
wait_for 30 "UploadTrace OK = 1" value_is 'habitat_requests_total{rpc="UploadTrace",code="OK"}' 1
wait_for 30 "Predict OK = 2" value_is 'habitat_requests_total{rpc="Predict",code="OK"}' 2
wait_for 30 "habitat_stored_traces = 1" value_is 'habitat_stored_traces' 1
wait_for 30 "a Predict latency sample" value_is 'habitat_request_duration_seconds_count{rpc="Predict"}' 2
hits="$(query 'habitat_prediction_cache_total{result="hit"}')"
[[ "${hits##* }" != 0 ]] || fail "the second identical Predict was not a cache hit: $hits"
computed="$(query 'sum(habitat_predicted_operations_total)')"
[[ -n "$computed" && "$computed" != 0 ]] || fail "no operation predictions counted: '$computed'"
# A Predict without a device list covers every GPU: each one's series counts.
on_h200="$(query 'sum(habitat_predicted_operations_total{device="H200",method="wave_scaling"})')"
[[ -n "$on_h200" && "${on_h200##* }" != 0 ]] || fail "no predictions counted for device H200: '$on_h200'"
echo "requests, store, latency, cache and prediction counters read back"

# --- Every dashboard query evaluates in this Prometheus.
exprs="$(python3 "$here/check_observability.py" "$root/server/server_metrics.cc" \
  "$root/deploy/grafana/habitat-dashboard.json" --print-exprs)" || fail "dashboard check failed"
total=0
with_data=0
while IFS= read -r expr; do
  out="$(query "$expr" 2>&1)" || fail "dashboard query does not evaluate: $expr: $out"
  total=$((total + 1))
  [[ -n "$out" ]] && with_data=$((with_data + 1))
done <<<"$exprs"
((total > 0)) || fail "no dashboard queries"
echo "$total dashboard queries evaluated ($with_data with data)"

# --- The alert rules load and evaluate cleanly against real series.
rules_ok() {
  local out
  out="$(python3 "$here/prom_query.py" "$prom_url" --rules)" || return 1
  [[ -n "$out" ]] && ! grep -qv ' ok -$' <<<"$out"
}
wait_for 30 "every alert rule evaluated with health ok" rules_ok
echo "$(python3 "$here/prom_query.py" "$prom_url" --rules | wc -l) alert rules evaluate"

# --- A stopped server is seen as down and the alert goes pending.
kill -TERM "$server_pid"
wait "$server_pid" || fail "habitat-server did not stop cleanly on SIGTERM"
server_pid=""
wait_for 30 "up == 0 after the server stopped" value_is 'up{job="habitat-server"}' 0
wait_for 30 "HabitatServerDown pending" \
  value_is 'ALERTS{alertname="HabitatServerDown",alertstate="pending"}' 1
echo "server stopped: up = 0, HabitatServerDown pending"
echo "Prometheus scraped habitat-server: all checks passed"
