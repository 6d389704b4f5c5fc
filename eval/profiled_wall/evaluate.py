#!/usr/bin/env python3
"""The origin's predicted wall time of each committed Kineto fixture, imported
without --wall-ns, against the same model's unprofiled wall time.

  python3 eval/profiled_wall/evaluate.py [--habitat build/client/habitat]
      [--sets h200,h100] [--markdown OUT.md] [--json OUT.json]

For each case of tests/testdata/measurements/<set>.json it runs
`habitat predict tests/testdata/kineto/<set>/<case>.json.gz --devices ORIGIN
--format json` and takes the origin's wall_time_ns and host_bound; the
reference is the case's wall_ns_median (CUDA events around 30 unprofiled
iterations, eval/capture/capture_fixtures.py). A case whose importer could
not take the profiler's cost out has its "profiled: ..." warning in the
JSON. `--root DIR` reads
DIR/measurements and DIR/kineto instead of tests/testdata (another capture
of the same protocol). Plain Python; no GPU.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

ORIGIN = {"h100": "H100-SXM", "h200": "H200"}


def predict(habitat: str, fixture: Path, origin: str) -> dict:
    out = subprocess.run([habitat, "predict", str(fixture), "--devices", origin,
                          "--format", "json"], capture_output=True, text=True, check=True)
    response = json.loads(out.stdout)
    row = next(p for p in response["predictions"] if p.get("is_origin"))
    return {"wall_ns": int(row["wall_time_ns"]), "host_bound": bool(row.get("host_bound")),
            "gpu_busy_ns": int(row.get("gpu_busy_ns", 0)),
            "warnings": response.get("warnings", []) + row.get("warnings", [])}


def evaluate(habitat: str, root: Path, tag: str) -> list:
    measured = json.loads((root / "measurements" / f"{tag}.json").read_text())
    origin = ORIGIN.get(tag, ORIGIN.get(tag[:4], "H200"))
    rows = []
    for case in measured["cases"]:
        fixture = root / "kineto" / tag / f"{case['case']}.json.gz"
        got = predict(habitat, fixture, origin)
        ref = case["wall_ns_median"]
        rows.append({"set": tag, "case": case["case"], "predicted_wall_ns": got["wall_ns"],
                     "unprofiled_wall_ns": ref, "unprofiled_p10_ns": case["wall_ns_p10"],
                     "unprofiled_p90_ns": case["wall_ns_p90"],
                     "profiled_step_ns": case["kept_step_cpu_duration_ns"],
                     "error": got["wall_ns"] / ref - 1, "host_bound": got["host_bound"],
                     "measured_host_bound": case["gpu_busy_ns_median"] < 0.85 * ref,
                     "profiled_warnings": [w for w in got["warnings"]
                                           if w.startswith("profiled:")]})
    return rows


def summary(rows: list) -> dict:
    errors = [abs(r["error"]) for r in rows]
    return {"cases": len(rows), "within_10pct": sum(e <= 0.10 for e in errors),
            "within_p10_p90": sum(r["unprofiled_p10_ns"] <= r["predicted_wall_ns"]
                                  <= r["unprofiled_p90_ns"] for r in rows),
            "host_bound_agrees": sum(r["host_bound"] == r["measured_host_bound"] for r in rows),
            "median_abs_error": statistics.median(errors), "max_abs_error": max(errors),
            "median_error": statistics.median(r["error"] for r in rows),
            "host_bound": sum(r["host_bound"] for r in rows),
            "measured_host_bound": sum(r["measured_host_bound"] for r in rows)}


def markdown(rows: list, sets: list) -> str:
    out = []
    for tag in sets:
        part = [r for r in rows if r["set"] == tag]
        s = summary(part)
        out.append(f"**{tag}**: {s['within_10pct']} of {s['cases']} within 10 % of the "
                   f"unprofiled median ({s['within_p10_p90']} within its p10-p90); median "
                   f"|error| {100 * s['median_abs_error']:.1f} %, largest "
                   f"{100 * s['max_abs_error']:.0f} %; {s['host_bound']} flagged host-bound, "
                   f"{s['measured_host_bound']} are (unprofiled GPU busy < 85 % of the wall "
                   f"time), the flag right for {s['host_bound_agrees']}\n")
        out.append("| case | profiled step ms | origin wall ms | unprofiled ms (p10-p90) "
                   "| error | host-bound |")
        out.append("| --- | ---: | ---: | ---: | ---: | --- |")
        for r in part:
            out.append(
                f"| {r['case']} | {r['profiled_step_ns'] / 1e6:.1f} | "
                f"{r['predicted_wall_ns'] / 1e6:.1f} | {r['unprofiled_wall_ns'] / 1e6:.1f} "
                f"({r['unprofiled_p10_ns'] / 1e6:.1f}-{r['unprofiled_p90_ns'] / 1e6:.1f}) | "
                f"{100 * r['error']:+.0f} % | {'yes' if r['host_bound'] else 'no'} |")
        out.append("")
    return "\n".join(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--habitat", default="build/client/habitat")
    parser.add_argument("--root", default="tests/testdata")
    parser.add_argument("--sets", default="h200,h100")
    parser.add_argument("--markdown")
    parser.add_argument("--json")
    args = parser.parse_args()
    sets = args.sets.split(",")
    rows = [r for tag in sets for r in evaluate(args.habitat, Path(args.root), tag)]
    text = markdown(rows, sets)
    print(text)
    if args.markdown:
        Path(args.markdown).write_text(text)
    if args.json:
        doc = {"command": " ".join(sys.argv), "summary": {
            tag: summary([r for r in rows if r["set"] == tag]) for tag in sets}, "rows": rows}
        Path(args.json).write_text(json.dumps(doc, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
