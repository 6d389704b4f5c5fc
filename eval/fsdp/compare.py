#!/usr/bin/env python3
"""Predicted FSDP peak memory per GPU against what one GPU measured
(measure_fsdp_one_gpu.py): each model's N = 1 agent trace predicted on its
own GPU with `habitat predict --parallel fsdp --gpus N --fsdp-units U`
(U = the model's transformer blocks, as it was wrapped), against the peak
`max_memory_allocated` of rank 0 of the fake-process-group run at that N.
The step time is not compared: the fake process group moves no data.

Run from the repository root after building:
    python3 eval/fsdp/compare.py \
        --results eval/fsdp/results/h200_fakepg_2026-11-29 [--gpu H200] [--md OUT]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
GIB = 2**30


def cases(results: Path) -> dict:
    """{(model, precision): {world_size: line}} of the ok lines."""
    out = {}
    for line in (results / "fsdp_one_gpu.jsonl").read_text().splitlines():
        r = json.loads(line)
        if r.get("status") == "ok":
            out.setdefault((r["model"], r["precision"]), {})[r["world_size"]] = r
    return out


def predicted_peaks(cli: str, trace: Path, gpu: str, worlds: list, units: int) -> dict:
    """{N: predicted peak bytes per GPU} for each N of `worlds`."""
    out = {}
    for n in worlds:
        cmd = [cli, "predict", str(trace), "--devices", gpu, "--catalog", "none",
               "--format", "json", "-q", "--parallel", "fsdp", "--gpus", str(n),
               "--fsdp-units", str(units)]
        got = json.loads(subprocess.run(cmd, capture_output=True, text=True,
                                        check=True).stdout)
        (prediction,) = got["predictions"]
        (config,) = [p for p in prediction.get("parallel", [])
                     if int(p.get("gpus_per_node", 0)) == n]
        out[n] = int(config.get("peak_memory_bytes_per_gpu", 0))
    return out


def error_pct(predicted: int, measured: int) -> float:
    return 100.0 * (predicted - measured) / measured


def rows(args) -> list:
    results = Path(args.results)
    out = []
    for (model, precision), by_n in sorted(cases(results).items()):
        plain = by_n.get(1)
        if plain is None or "trace" not in plain:
            continue
        worlds = sorted(n for n in by_n if n > 1)
        peaks = predicted_peaks(args.cli, results / plain["trace"], args.gpu, worlds,
                                plain["blocks"])
        for n in worlds:
            measured = by_n[n]["peak_allocated_bytes"]
            out.append({"model": model, "precision": precision, "gpus": n,
                        "measured_gib": measured / GIB, "predicted_gib": peaks[n] / GIB,
                        "err_pct": error_pct(peaks[n], measured)})
    return out


def report(rs: list) -> list:
    lines = ["| model | precision | N | measured GiB | predicted GiB | error % |",
             "|---|---|---|---|---|---|"]
    for r in rs:
        lines.append(f"| {r['model']} | {r['precision']} | {r['gpus']} | "
                     f"{r['measured_gib']:.2f} | {r['predicted_gib']:.2f} | "
                     f"{r['err_pct']:+.1f} |")
    errs = [abs(r["err_pct"]) for r in rs]
    lines.append("")
    lines.append(f"{len(rs)} cases: MAPE {statistics.mean(errs):.1f} %, "
                 f"worst {max(errs):.1f} %, within 5 %: {sum(e <= 5 for e in errs)}.")
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--results", required=True)
    ap.add_argument("--cli", default=str(ROOT / "build" / "client" / "habitat"))
    ap.add_argument("--gpu", default="H200")
    ap.add_argument("--md", default="")
    args = ap.parse_args()
    rs = rows(args)
    if not rs:
        sys.exit(f"no comparable cases under {args.results}")
    text = "\n".join(report(rs)) + "\n"
    if args.md:
        Path(args.md).write_text(text)
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
