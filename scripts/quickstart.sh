#!/usr/bin/env bash
# Fresh Debian 12 machine -> dependencies, build, and a prediction of a real
# ResNet-50 training iteration captured on an H100, for every known GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
scripts/build.sh
TRACE=tests/testdata/kineto/h100/resnet50_b64_fp32.json.gz
echo
echo "== habitat predict $TRACE --batch-size 64 --catalog aws"
build/client/habitat predict "$TRACE" --batch-size 64 --model resnet50 --catalog aws
