#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test that needs no GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
scripts/build.sh
cd "${HABITAT_BUILD_DIR:-build}"
# GPU tests carry the label "gpu" and are skipped on machines without one.
ctest --output-on-failure -LE gpu -j 2
