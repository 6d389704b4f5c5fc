#!/usr/bin/env bash
# usage: install_test.sh CMAKE BUILD_DIR PREFIX BUILD_TREE_HABITAT TRACE TRACE_ARGS...
# (run from the repository root). See CMakeLists.txt beside this file.
set -euo pipefail
# shellcheck source=tests/lib/server_port.sh
source "$(dirname "$0")/../lib/server_port.sh"
cmake_bin="$1"
build_dir="$2"
prefix="$3"
build_habitat="$4"
trace="$5"
shift 5

rm -rf "$prefix"
mkdir -p "$prefix"
prefix="$(cd "$prefix" && pwd -P)"
for component in server cli agent data; do
  "$cmake_bin" --install "$build_dir" --prefix "$prefix" --component "$component" >/dev/null
done

for file in bin/habitat bin/habitat-server bin/habitat-agent \
    share/habitat/data/devices.textproto share/habitat/data/catalogs/aws.textproto \
    share/habitat/models/kernel_varying/manifest.json \
    share/habitat/models/kernel_varying/model.json.gz; do
  [[ -f "$prefix/$file" ]] || { echo "not installed: $file" >&2; exit 1; }
done

server_scratch
habitat="$prefix/bin/habitat"

# The CLI's embedded mode (GPU specs, catalogs, the kernel-varying model) and
# the build tree's CLI (the source tree's files) give the same answers.
for args in "devices" "catalogs" "predict $trace $* --catalog aws --format json"; do
  # shellcheck disable=SC2086
  "$build_habitat" $args >"$dir/build.out"
  # shellcheck disable=SC2086
  "$habitat" $args >"$dir/installed.out"
  diff -u "$dir/build.out" "$dir/installed.out"
done
grep -q '"H100-SXM"' "$dir/installed.out"

"$prefix/bin/habitat-agent" --version >/dev/null

# The installed server starts with the installed data and model (it refuses
# to start without them) and serves the same GPUs.
"$prefix/bin/habitat-server" --address=127.0.0.1:0 --metrics_address= --store=memory \
  2>"$dir/server.log" &
server_pid=$!
port="$(server_port "$dir/server.log" "$server_pid")"
"$habitat" devices --server "127.0.0.1:$port" >"$dir/remote.out"
"$build_habitat" devices >"$dir/build.out"
diff -u "$dir/build.out" "$dir/remote.out"
kill -TERM "$server_pid"
wait "$server_pid"
server_pid=""

# Without the installed data the installed CLI fails, naming the installed
# directory: it does not read the source tree it was built from.
mv "$prefix/share/habitat/data" "$prefix/share/habitat/data.moved"
if "$habitat" devices >"$dir/out" 2>"$dir/err"; then
  echo "the installed habitat ran without its installed data" >&2
  exit 1
fi
grep -q "$prefix/share/habitat/data" "$dir/err" || { cat "$dir/err" >&2; exit 1; }
mv "$prefix/share/habitat/data.moved" "$prefix/share/habitat/data"
echo "installed programs find their data in $prefix/share/habitat"
