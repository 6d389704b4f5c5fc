#!/usr/bin/env bash
# Fresh Debian 12 machine -> dependencies, build, and a prediction of a real
# ResNet-50 training iteration captured on an H100, for every known GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
scripts/build.sh
TRACE=tests/testdata/kineto/h100/resnet50_b64_fp32.json.gz
# The iteration's wall time measured without the profiler on that H100
# (median of 30), so the host model starts from the real host speed.
WALL_NS=$(python3 -c 'import json; print(next(c["wall_ns_median"] for c in json.load(open("tests/testdata/measurements/h100.json"))["cases"] if c["case"] == "resnet50_b64_fp32"))')
echo
echo "== habitat predict $TRACE --batch-size 64 --precision fp32 --wall-ns $WALL_NS --catalog aws"
build/client/habitat predict "$TRACE" --batch-size 64 --precision fp32 --model resnet50 \
  --wall-ns "$WALL_NS" --catalog aws
