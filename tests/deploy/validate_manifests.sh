#!/usr/bin/env bash
# Validates deploy/k8s offline: every object against the Kubernetes OpenAPI
# schemas (kubernetes-validate --strict: unknown fields are errors) for the
# oldest version the manifests target (1.29: native sidecars on by default)
# and the newest one bundled, then the cross-references between the objects
# (check_manifests.py). `kubectl apply --dry-run=client` cannot be used here:
# it asks an API server for the resource types even in client mode.
# usage: validate_manifests.sh VENV_DIR REPO_ROOT
set -euo pipefail
venv="$1"
root="$2"
# The optional sets in subdirectories (deploy/k8s/postgres) too.
manifests=("$root"/deploy/k8s/*.yaml "$root"/deploy/k8s/postgres/*.yaml)
[[ ${#manifests[@]} -ge 1 && -f "${manifests[0]}" ]] || { echo "no manifests in $root/deploy/k8s" >&2; exit 1; }

status=0
for version in 1.29.0 1.37.0; do
  out="$("$venv/bin/kubernetes-validate" --strict -k "$version" "${manifests[@]}" 2>&1)" || status=1
  echo "$out"
  # Only the Prometheus Operator's CRD may lack a schema; anything else
  # unrecognised is a typo in apiVersion or kind.
  if grep "Couldn't find schema" <<<"$out" | grep -v "kind PodMonitor with api version monitoring.coreos.com/v1"; then
    echo "a manifest has a kind/apiVersion with no schema" >&2
    status=1
  fi
done
"$venv/bin/python" "$root/tests/deploy/check_manifests.py" "$root" || status=1
exit $status
