#!/usr/bin/env bash
# Runs a program from the deploy tools' virtual environment (setup_venv.sh).
# usage: venv_run.sh VENV_DIR PROGRAM ARGS...
set -euo pipefail
venv="$1"
program="$2"
shift 2
[[ -x "$venv/bin/$program" ]] || { echo "$venv/bin/$program missing: run the deploy.venv test (setup_venv.sh) first" >&2; exit 1; }
exec "$venv/bin/$program" "$@"
