#!/usr/bin/env bash
# habitat_eval_suite --source=agent on two cases of the agent's captures
# (tests/testdata/agent_suite) through a real habitat-server (no GPU): the
# CSV has the Kineto header plus the host-speed columns, one predicted row
# per (case, direction), the hostbench speed is the ratio of the two leases'
# tiny_mlp_adam_step_ns, and report.py --source=agent reads it.
# usage: eval_suite_agent_smoke.sh HABITAT_EVAL_SUITE PYTHON3 SOURCE_DIR
set -eu
suite="$1"
python="$2"
src="$3"
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT

"$suite" --source=agent --gpus=h100_run2=H100-SXM,h200=H200 \
  --cases=resnet50_b16_fp32,transformer_b32_bf16 --out="$dir/out.csv" 2>"$dir/log" ||
  { cat "$dir/log" >&2; exit 1; }

"$python" - "$dir/out.csv" "$src/tests/testdata/agent_suite" <<'PY'
import csv, json, os, sys
sys.path.insert(0, os.path.join(os.path.dirname(sys.argv[2]), "..", "..", "eval", "suite"))
import report
rows = list(csv.DictReader(open(sys.argv[1])))
with open(sys.argv[1]) as f:
    assert f.readline().rstrip("\n").split(",") == report.AGENT_COLUMNS
keys = sorted((r["case"], r["origin_tag"], r["target_tag"]) for r in rows)
expected = sorted((c, o, t) for c in ("resnet50_b16_fp32", "transformer_b32_bf16")
                  for o, t in (("h100_run2", "h200"), ("h200", "h100_run2")))
assert keys == expected, keys

def bench(tag):
    values = [json.load(open(os.path.join(sys.argv[2], tag, f"hostbench_{w}.json")))
              ["tiny_mlp_adam_step_ns"] for w in ("before", "after")]
    return sum(values) / len(values)

for r in rows:
    assert r["error"] == "", r["error"]
    assert r["trace_id"].startswith("sha256:"), r["trace_id"]
    for column in ("predicted_wall_ns", "predicted_gpu_busy_ns", "predicted_op_sum_ns",
                   "target_busy_ns", "predicted_wall_hostbench_ns",
                   "predicted_wall_calibrated_ns"):
        assert int(r[column]) > 0, (column, r[column])
    want = bench(r["origin_tag"]) / bench(r["target_tag"])
    assert abs(float(r["host_speed_hostbench"]) - want) < 1e-4, (r["host_speed_hostbench"], want)
    # Calibrated on the other models: the H200 lease's host is the faster one.
    speed = float(r["host_speed_calibrated"])
    assert (speed > 1) == (r["target_tag"] == "h200"), (r["case"], speed)
    # A faster host gives a shorter (or equal) wall time.
    slower = float(r["host_speed_hostbench"]) < 1
    assert (int(r["predicted_wall_hostbench_ns"]) >= int(r["predicted_wall_ns"])) == slower or \
        r["predicted_wall_hostbench_ns"] == r["predicted_wall_ns"], r
print("csv ok")
PY

"$python" "$src/eval/suite/report.py" --source=agent "$dir/out.csv" \
  --md "$dir/report.md" --svg "$dir/plot.svg"
grep -q "^## H100-SXM (h100_run2) → H200 (h200): GPU time" "$dir/report.md"
grep -q "^## H200 (h200) → H100-SXM (h100_run2): wall time" "$dir/report.md"
grep -q "^| H100-SXM (h100_run2) → H200 (h200) | host-bound |" "$dir/report.md"
[[ "$(grep -c '^| resnet50_b16_fp32 |' "$dir/report.md")" == 4 ]]
"$python" -c "import sys, xml.etree.ElementTree as E; E.parse(sys.argv[1])" "$dir/plot.svg"

# Bad input is refused with a message, not a crash.
set +e
"$suite" --source=agnt --out="$dir/x.csv" 2>"$dir/err"; code=$?
set -e
[[ $code -eq 1 ]] && grep -q '"agnt" is neither kineto nor agent' "$dir/err" ||
  { echo "expected a --source error, got $code" >&2; cat "$dir/err" >&2; exit 1; }
set +e
"$suite" --source=agent --gpus=nosuch=H100-SXM,h200=H200 --out="$dir/x.csv" 2>"$dir/err"; code=$?
set -e
[[ $code -eq 1 ]] && grep -q 'nosuch/measurements.json' "$dir/err" ||
  { echo "expected a missing-file error, got $code" >&2; cat "$dir/err" >&2; exit 1; }
echo "eval_suite agent smoke: 4 rows predicted through habitat-server, host speeds, report written"
