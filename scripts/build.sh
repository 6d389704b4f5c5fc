#!/usr/bin/env bash
# Configures and builds into build/ (or $HABITAT_BUILD_DIR).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR="${HABITAT_BUILD_DIR:-build}"
if [ ! -f "$BUILD_DIR/build.ninja" ]; then
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@"
fi
# Two jobs: the machines this runs on have two cores and 24 GiB.
cmake --build "$BUILD_DIR" -j "${HABITAT_JOBS:-2}"
