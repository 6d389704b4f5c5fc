#!/usr/bin/env bash
# Builds the agent extension against the local torch and runs the GPU test.
#   tests/gpu/run_agent_gpu.sh OUT_DIR
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${1:-/tmp/habitat_agent_gpu}
mkdir -p "$OUT"
cd "$ROOT/agent/python"
echo "=== build $(date -u +%T)"
python3 setup.py build_ext --inplace >"$OUT/build.log" 2>&1 || {
  tail -60 "$OUT/build.log"; echo "BUILD FAILED"; exit 1; }
grep -E "habitat setup|warning" "$OUT/build.log" | head -20 || true
echo "=== CPU recorder tests $(date -u +%T)"
python3 -m unittest discover -s tests 2>&1 | tail -3
echo "=== GPU test $(date -u +%T)"
cd "$ROOT"
echo "=== counter metric probe $(date -u +%T) (diagnostic: $OUT/counter_probe.log)"
PYTHONUNBUFFERED=1 python3 tests/gpu/counter_probe.py --out "$OUT" \
  >"$OUT/counter_probe.log" 2>&1 || tail -5 "$OUT/counter_probe.log"
PYTHONUNBUFFERED=1 python3 tests/gpu/agent_gpu_test.py --out "$OUT"
