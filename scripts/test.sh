#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test that needs no GPU;
# then builds the libFuzzer targets with clang and runs each briefly over its
# seed corpus (scripts/fuzz_ci.sh; HABITAT_FUZZERS=0 skips that stage); then
# builds the same tests with AddressSanitizer + UBSan in a second build
# directory and runs them again (HABITAT_SANITIZERS=0 skips that stage).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
scripts/build.sh
(
  cd "${HABITAT_BUILD_DIR:-build}"
  # GPU tests carry the label "gpu" and are skipped on machines without one.
  ctest --output-on-failure -LE gpu -j 2
)

# Fuzzer stage (docs/fuzzing.md, "In CI"): a clang build of fuzz_trace,
# fuzz_kineto and fuzz_predict in build-fuzz/, each run over a copy of its
# seeds and then mutating them for 20 s.
if [ "${HABITAT_FUZZERS:-1}" != 0 ]; then
  scripts/fuzz_ci.sh
fi

if [ "${HABITAT_SANITIZERS:-1}" = 0 ]; then
  exit 0
fi
# Sanitizer stage. -O1 and line-table debug info keep the build and the
# tests fast enough for CI; no benchmarks. On the 2-core development machine,
# shared with other jobs (load average 2-5), it took 31 minutes: 14 to build,
# 18 to test (40 CPU-minutes in all). Every test runs; none needed excluding.
SAN_DIR="${HABITAT_SANITIZE_BUILD_DIR:-build-asan}"
if [ ! -f "$SAN_DIR/build.ninja" ] \
   || ! grep -q '^HABITAT_WITH_CUPTI:' "$SAN_DIR/CMakeCache.txt" 2>/dev/null; then
  cmake -S . -B "$SAN_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Debug \
    -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g1" -DHABITAT_SANITIZE=ON -DHABITAT_BUILD_BENCHMARKS=OFF \
    "$(scripts/cupti_option.sh)"
fi
cmake --build "$SAN_DIR" -j "${HABITAT_JOBS:-2}"
cd "$SAN_DIR"
# Any report fails the test that triggered it; leaks are checked (LSan).
export ASAN_OPTIONS="detect_leaks=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
ctest --output-on-failure -LE gpu -j 2
