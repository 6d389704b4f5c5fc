#!/usr/bin/env bash
# CI's fuzzer stage (docs/fuzzing.md, "In CI"): builds the libFuzzer targets
# with clang (coverage + ASan + UBSan) in their own build directory, so they
# cannot rot, then runs each one over a copy of its committed seed corpus:
# libFuzzer first executes every seed, then mutates them for a short,
# bounded time. Any crash, sanitizer report, failed property check, leak,
# timeout or out-of-memory fails the stage; the input is kept under
# $FUZZ_DIR/artifacts/ and its reproduction command printed.
#
#   HABITAT_FUZZ_BUILD_DIR  build directory (default build-fuzz)
#   HABITAT_FUZZ_SECONDS    mutation time per target after the seeds (default 20)
#   HABITAT_JOBS            build jobs (default 2)
set -euo pipefail
cd "$(dirname "$0")/.."
FUZZ_DIR="${HABITAT_FUZZ_BUILD_DIR:-build-fuzz}"
SECONDS_PER_TARGET="${HABITAT_FUZZ_SECONDS:-20}"
stage_start=$(date +%s)

for tool in clang clang++; do
  command -v "$tool" >/dev/null || {
    echo "fuzz_ci: $tool is missing (scripts/install_deps.sh installs clang and libclang-rt-14-dev)" >&2
    exit 1
  }
done

# -O1 and line tables only, as the sanitizer stage, to keep the build short:
# the fuzzers' job here is to build and run (docs/fuzzing.md's campaigns use
# the default RelWithDebInfo flags).
if [ ! -f "$FUZZ_DIR/build.ninja" ]; then
  CC=clang CXX=clang++ cmake -S . -B "$FUZZ_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" \
    -DHABITAT_BUILD_FUZZERS=ON -DHABITAT_BUILD_TESTS=OFF -DHABITAT_BUILD_BENCHMARKS=OFF \
    -DHABITAT_WITH_CUPTI=OFF
fi
cmake --build "$FUZZ_DIR" -j "${HABITAT_JOBS:-2}" --target fuzz_trace fuzz_kineto fuzz_predict
build_end=$(date +%s)

work=$(mktemp -d /tmp/habitat-fuzz-XXXXXX)
trap 'rm -rf "$work"' EXIT
artifacts="$FUZZ_DIR/artifacts"
mkdir -p "$artifacts"
failed=()
for target in trace kineto predict; do
  seeds="tests/fuzz/corpus/$target"
  count=$(find "$seeds" -type f | wc -l)
  if [ "$count" -eq 0 ]; then
    echo "fuzz_ci: $seeds holds no seeds" >&2
    exit 1
  fi
  # libFuzzer adds what it finds to the directory: fuzz a copy.
  cp -r "$seeds" "$work/$target"
  extra=()
  env_vars=()
  case "$target" in
    kineto) extra+=("-dict=tests/fuzz/kineto.dict") ;;
    # As the server runs by default: with the kernel-varying predictor.
    predict) env_vars+=("HABITAT_FUZZ_MODELS_DIR=$PWD/models") ;;
  esac
  log="$FUZZ_DIR/fuzz_$target.log"
  start=$(date +%s)
  # -timeout: one input's limit, generous for a loaded machine (the slowest
  # seed takes about 1 s under ASan); -rss_limit_mb: the predictor and the
  # uploaded traces under ASan need more than libFuzzer's 2 GB default.
  if env "${env_vars[@]}" "$FUZZ_DIR/tests/fuzz/fuzz_$target" \
      -max_total_time="$SECONDS_PER_TARGET" -timeout=60 -rss_limit_mb=4096 \
      -print_final_stats=1 -artifact_prefix="$artifacts/${target}-" "${extra[@]}" \
      "$work/$target" > "$log" 2>&1; then
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    edges=$(grep -o 'cov: [0-9]*' "$log" | tail -1)
    echo "fuzz_ci: fuzz_$target: $count seeds, ${runs:-?} executions, ${edges:-cov: ?} edges" \
      "in $(($(date +%s) - start)) s, no finding"
  else
    echo "fuzz_ci: fuzz_$target FAILED (full log: $log); its last lines:" >&2
    tail -n 60 "$log" >&2
    echo "fuzz_ci: reproduce with: ${env_vars[*]} $FUZZ_DIR/tests/fuzz/fuzz_$target" \
      "$artifacts/${target}-<file above>" >&2
    failed+=("fuzz_$target")
  fi
done
end=$(date +%s)
echo "fuzz_ci: build $((build_end - stage_start)) s, fuzzing $((end - build_end)) s"
if [ ${#failed[@]} -ne 0 ]; then
  echo "fuzz_ci: failed: ${failed[*]}" >&2
  exit 1
fi
