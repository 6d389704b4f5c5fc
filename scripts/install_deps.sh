#!/usr/bin/env bash
# Installs the Debian 12 packages the build needs. Idempotent and quick when
# everything is already there.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build pkg-config
  libgrpc++-dev libgrpc-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev prometheus-cpp-dev nlohmann-json3-dev zlib1g-dev libssl-dev
  libgtest-dev libgmock-dev libbenchmark-dev prometheus openssl
  libsqlite3-dev libpq-dev postgresql
  python3-grpcio python3-protobuf  # the Python client's tests (client/python, client_server_test)
  python3-matplotlib  # habitat predict --plot and the Python client's plot tests
  # python_client_fresh_venv_install: venv (with pip and setuptools from
  # ensurepip) and wheel, which setuptools builds the wheel with offline.
  python3-venv python3-wheel
  # The kernel-varying model: the server predicts with libxgboost's C API;
  # models/train.py trains with the same XGBoost version. `xgboost` (the
  # command-line program) only because libxgboost-dev's CMake config
  # refuses to load without /usr/bin/xgboost.
  libxgboost-dev xgboost python3-xgboost python3-numpy
  clang-format  # scripts/check_format.sh (the style.clang_format test)
  # The fuzzer stage of scripts/test.sh (scripts/fuzz_ci.sh): clang, and
  # compiler-rt's libFuzzer, ASan and UBSan runtimes for it (a
  # recommendation of clang's, which --no-install-recommends leaves out).
  clang libclang-rt-14-dev
)

missing=()
for package in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" \
    || missing+=("$package")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "install_deps: installing ${missing[*]}" >&2
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "install_deps: need root or sudo to install packages" >&2; exit 1; }
  SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
