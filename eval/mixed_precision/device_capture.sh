#!/usr/bin/env bash
# One device call of the mixed-precision capture:
#   device_capture.sh OUT LAYOUT BUDGET_S [FIRST [COUNT]]
# builds the agent's extension, captures models FIRST.. (1-based, COUNT of
# them; default all) of models.txt with capture_timm.py in LAYOUT (nchw|nhwc)
# within BUDGET_S, and packs the traces and results into OUT/capture.tgz
# (split into 15 MB parts when larger: the device tool returns files of at
# most 16 MiB). MODE=infer captures timm's AMP inference step instead, at the
# batch and image size of CSV (capture_timm.py).
set -u
OUT=$1 LAYOUT=$2 BUDGET=$3 FIRST=${4:-1} COUNT=${5:-1000}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
WORK=$(mktemp -d)
export PYTHONUNBUFFERED=1
echo "=== $(date -u +%FT%TZ) build"
(cd "$ROOT/agent/python" && timeout 300 python3 setup.py build_ext --inplace >"$WORK/build.log" 2>&1) ||
  { tail -30 "$WORK/build.log"; echo "BUILD FAILED"; exit 1; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem,power.limit --format=csv
MODELS=$(grep -v '^#' "$HERE/models.txt" | awk '{print $1}' | tail -n +"$FIRST" | head -n "$COUNT" | paste -sd,)
echo "=== $(date -u +%FT%TZ) capture $LAYOUT"
CSV=${CSV:-${TIMM_CSV_DIR:-$ROOT/../shared/data/timm-rtx3090}/train-amp-$LAYOUT-rtx3090.csv}
python3 "$HERE/capture_timm.py" all --csv "$CSV" --mode "${MODE:-train}" \
  --models "$MODELS" --out "$WORK/cap" --layout "$LAYOUT" --budget-s "$BUDGET"
echo "=== $(date -u +%FT%TZ) pack"
tar czf "$WORK/capture.tgz" -C "$WORK/cap" .
split -b 15M -d "$WORK/capture.tgz" "$OUT/capture.tgz.part"
ls -la "$OUT"
