#!/usr/bin/env bash
# Prints the -DHABITAT_WITH_CUPTI=ON|OFF argument for configuring this
# project: $HABITAT_WITH_CUPTI when set, else ON where CMake finds the CUDA
# toolkit with CUPTI (cmake/cupti_probe), OFF where it does not (a fresh
# Debian machine: scripts/install_deps.sh does not install CUDA). The option
# itself defaults to ON and fails the configure without CUPTI, so a plain
# `cmake -S . -B build` never leaves the agent's CUPTI source out silently.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -n "${HABITAT_WITH_CUPTI:-}" ]; then
  echo "-DHABITAT_WITH_CUPTI=$HABITAT_WITH_CUPTI"
  exit 0
fi
probe="$(mktemp -d)"
trap 'rm -rf "$probe"' EXIT
if cmake -S cmake/cupti_probe -B "$probe" >/dev/null 2>&1; then
  echo "-DHABITAT_WITH_CUPTI=ON"
else
  echo "cupti_option: no CUDA toolkit with CUPTI found; configuring with -DHABITAT_WITH_CUPTI=OFF" >&2
  echo "-DHABITAT_WITH_CUPTI=OFF"
fi
