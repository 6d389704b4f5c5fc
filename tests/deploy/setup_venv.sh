#!/usr/bin/env bash
# Creates (once) a Python virtual environment with the tools the deploy/
# checks use, from PyPI. Idempotent: does nothing when the environment already
# holds exactly requirements.txt.
# usage: setup_venv.sh VENV_DIR
set -euo pipefail
venv="$1"
requirements="$(dirname "$0")/requirements.txt"
stamp="$venv/.requirements"
if [[ -f "$stamp" ]] && cmp -s "$stamp" "$requirements"; then
  exit 0
fi
python3 -m venv "$venv" || { echo "setup_venv: python3 -m venv failed (Debian: apt-get install python3-venv)" >&2; exit 1; }
"$venv/bin/pip" install --quiet --disable-pip-version-check -r "$requirements"
cp "$requirements" "$stamp"
echo "setup_venv: tools installed in $venv"
