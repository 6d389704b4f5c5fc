#!/usr/bin/env bash
# Configures and builds into build/ (or $HABITAT_BUILD_DIR). The first
# configure picks HABITAT_WITH_CUPTI from what is installed
# (scripts/cupti_option.sh; set HABITAT_WITH_CUPTI=ON|OFF to choose).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR="${HABITAT_BUILD_DIR:-build}"
# Configured before HABITAT_WITH_CUPTI existed: configure again with it.
if [ ! -f "$BUILD_DIR/build.ninja" ] \
   || ! grep -q '^HABITAT_WITH_CUPTI:' "$BUILD_DIR/CMakeCache.txt" 2>/dev/null; then
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    "$(scripts/cupti_option.sh)" "$@"
fi
# Two jobs: the machines this runs on have two cores and 24 GiB.
cmake --build "$BUILD_DIR" -j "${HABITAT_JOBS:-2}"
