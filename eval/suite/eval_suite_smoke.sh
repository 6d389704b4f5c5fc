#!/usr/bin/env bash
# habitat_eval_suite on two cases through a real habitat-server (no GPU):
# the CSV has the suite's header and one predicted row per (case,
# direction), and report.py turns it into Markdown and an SVG that parses.
# usage: eval_suite_smoke.sh HABITAT_EVAL_SUITE PYTHON3 SOURCE_DIR
set -eu
suite="$1"
python="$2"
src="$3"
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT

"$suite" --cases=resnet50_b16_fp32,transformer_b32_bf16 --out="$dir/out.csv" 2>"$dir/log" ||
  { cat "$dir/log" >&2; exit 1; }

header="case,model,batch,precision,origin,target,origin_wall_ns,origin_busy_ns,origin_host_share,target_wall_ns,target_busy_ns,target_host_share,trace_busy_ns,origin_op_sum_ns,replayed_origin_wall_ns,replayed_origin_busy_ns,predicted_wall_ns,predicted_gpu_busy_ns,predicted_op_sum_ns,host_bound,predicted_busy_scaled_ns,same_flops_busy_ns,same_flops_wall_ns,bandwidth_busy_ns,bandwidth_wall_ns,trace_id,error"
[[ "$(head -n 1 "$dir/out.csv")" == "$header" ]] || { echo "unexpected header" >&2; head -n 1 "$dir/out.csv" >&2; exit 1; }

# Exactly these four rows, each with a positive prediction, a trace id and
# no error.
"$python" - "$dir/out.csv" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
keys = sorted((r["case"], r["origin"], r["target"]) for r in rows)
expected = sorted((c, o, t) for c in ("resnet50_b16_fp32", "transformer_b32_bf16")
                  for o, t in (("H100-SXM", "H200"), ("H200", "H100-SXM")))
assert keys == expected, keys
for r in rows:
    assert r["error"] == "", r["error"]
    assert r["trace_id"].startswith("sha256:"), r["trace_id"]
    for column in ("predicted_wall_ns", "predicted_gpu_busy_ns", "predicted_op_sum_ns",
                   "predicted_busy_scaled_ns", "target_busy_ns", "bandwidth_busy_ns"):
        assert int(r[column]) > 0, (column, r[column])
    assert r["host_bound"] in ("0", "1")
    # The baselines are the origin measurement x a datasheet ratio: same
    # peak FLOPS on these two GPUs.
    assert r["same_flops_busy_ns"] == r["origin_busy_ns"], r
print("csv ok")
PY

"$python" "$src/eval/suite/report.py" "$dir/out.csv" --md "$dir/report.md" --svg "$dir/plot.svg"
grep -q "^## H100-SXM → H200: GPU time" "$dir/report.md"
grep -q "^## H200 → H100-SXM: wall time" "$dir/report.md"
grep -q "](plot.svg)" "$dir/report.md"
[[ "$(grep -c '^| resnet50_b16_fp32 |' "$dir/report.md")" == 4 ]]
"$python" -c "import sys, xml.etree.ElementTree as E; E.parse(sys.argv[1])" "$dir/plot.svg"

# Bad input is refused with a message, not a crash.
set +e
"$suite" --cases=no_such_case --out="$dir/x.csv" 2>"$dir/err"; code=$?
set -e
[[ $code -eq 1 ]] || { echo "expected exit 1 for an unknown case, got $code" >&2; exit 1; }
grep -q 'no GPU has a case "no_such_case"' "$dir/err" || { cat "$dir/err" >&2; exit 1; }
echo "eval_suite smoke: 4 rows predicted through habitat-server, report written"
