#!/usr/bin/env bash
# Re-captures every real-GPU fixture on the GPU of the machine it runs on.
#
#   run_capture.sh GPU_TAG OUT_DIR [CAPTURE_BUDGET_S]
#
# Writes, under OUT_DIR (lay it over tests/testdata/ afterwards, see README.md):
#   device_properties/GPU_TAG.json  occupancy/GPU_TAG.csv
#   measurements/GPU_TAG.json       kineto/GPU_TAG/*.json.gz
#   cases/*.json (per-case results) raw/*.raw.json.gz (unshrunk traces, not
#   committed)
# Each stage runs even if an earlier one failed; failures print "STAGE FAILED".
set -u
if [[ $# -lt 2 ]]; then
  echo "usage: $0 GPU_TAG OUT_DIR [CAPTURE_BUDGET_S]" >&2
  exit 2
fi
GPU=$1
OUT=$2
BUDGET=${3:-380}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
PROBE=$ROOT/tools/occupancy_probe
BIN=$(mktemp -d)
mkdir -p "$OUT/device_properties" "$OUT/occupancy" "$OUT/measurements" \
  "$OUT/kineto/$GPU"
status=0

stage() { echo "=== $(date -u +%H:%M:%S) $*"; }

build() {  # build NAME: nvcc for this GPU, falling back to Hopper's sm_90
  nvcc -O3 -std=c++17 -arch=native -o "$BIN/$1" "$PROBE/$1.cu" ||
    nvcc -O3 -std=c++17 -arch=sm_90 -o "$BIN/$1" "$PROBE/$1.cu"
}

stage "environment"
nvidia-smi || true
python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.get_device_name(0))' || true

stage "device attributes and copy bandwidth"
if build device_attributes && "$BIN/device_attributes" >"$BIN/device_attributes.json"; then
  cat "$BIN/device_attributes.json"
else
  echo "STAGE FAILED: device_attributes"; status=1
fi
python3 "$HERE/capture_fixtures.py" devprops --gpu "$GPU" --out "$OUT" \
  --cuda-json "$BIN/device_attributes.json" >/dev/null ||
  { echo "STAGE FAILED: devprops"; status=1; }

stage "occupancy probe"
if ! { build occupancy_probe && "$BIN/occupancy_probe" "$OUT/occupancy/$GPU.csv"; }; then
  echo "STAGE FAILED: occupancy_probe"; status=1
fi

stage "smoke case"
timeout 150 python3 "$HERE/capture_fixtures.py" smoke --out "$BIN/smoke" ||
  echo "SMOKE FAILED (carrying on with the full capture)"

stage "capture (budget ${BUDGET}s)"
timeout $((${BUDGET%.*} + 90)) python3 "$HERE/capture_fixtures.py" all \
  --gpu "$GPU" --out "$OUT" --budget-s "$BUDGET" ||
  { echo "STAGE FAILED: capture (some cases missing, see above)"; status=1; }

stage "done (status $status)"
rm -rf "$BIN"
exit $status
