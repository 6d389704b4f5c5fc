#!/usr/bin/env bash
# One round of agent work on a GPU machine, every stage under its own time
# limit so the results are always packed, even when a stage runs long:
#
#   tests/gpu/device_round.sh OUT GPU_TAG STAGE...
#
# Stages: build | hostbench | gputest | capture:SECONDS[:ARGS] | overhead
#   capture:380:--counters  runs capture_agent.py all with a 380 s budget
#   (ARGS: comma-separated extra arguments, e.g. --counters,--measure-ops).
# Everything lands in OUT/work, packed into OUT/round.tgz (the device tool
# brings back at most 8 files), with OUT/round.log beside it.
set -u
OUT=$1
GPU=$2
shift 2
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
WORK=$OUT/work
mkdir -p "$WORK"
export PYTHONUNBUFFERED=1
stage() { echo "=== $(date -u +%H:%M:%S) $*"; }
pack() {
  stage "pack"
  tar czf "$OUT/round.tgz" -C "$WORK" . && ls -la "$OUT/round.tgz"
}
trap pack EXIT

for s in "$@"; do
  case $s in
    build)
      stage "build extension"
      (cd "$ROOT/agent/python" && timeout 300 python3 setup.py build_ext --inplace \
        >"$WORK/build.log" 2>&1) || { tail -40 "$WORK/build.log"; echo "BUILD FAILED"; exit 1; }
      grep -E "habitat setup" "$WORK/build.log" ;;
    hostbench)
      stage "host benchmark"
      timeout 120 python3 "$ROOT/eval/capture/capture_agent.py" hostbench \
        --out "$WORK/hostbench_$GPU.json" 2>&1 | tail -12 ;;
    gputest)
      stage "agent GPU test"
      timeout 240 bash "$ROOT/tests/gpu/run_agent_gpu.sh" "$WORK/gputest" \
        >"$WORK/gputest.log" 2>&1
      echo "rc=$?"; grep -E "FAIL|ok  |SKIP|passed|failed|Error|error" "$WORK/gputest.log" | head -60 ;;
    capture:*)
      IFS=: read -r _ budget extra <<<"$s"
      stage "capture ($budget s) ${extra//,/ }"
      # shellcheck disable=SC2086
      timeout $((budget + 60)) python3 "$ROOT/eval/capture/capture_agent.py" all \
        --gpu "$GPU" --out "$WORK/agent_$GPU" --budget-s "$budget" ${extra//,/ } \
        >"$WORK/capture_$GPU.log" 2>&1
      echo "rc=$?"; grep -E "ok   |FAIL|SKIP|counters:|measure_ops:|merged|stopped" \
        "$WORK/capture_$GPU.log" | cut -c1-330 ;;
    overhead)
      stage "overhead benchmark"
      timeout 230 python3 "$ROOT/eval/capture/capture_agent.py" overhead \
        --out "$WORK/overhead_$GPU.json" --timeout-s 80 2>&1 | cut -c1-400 ;;
    *)
      echo "unknown stage $s" ;;
  esac
done
