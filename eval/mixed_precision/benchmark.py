#!/usr/bin/env python3
"""Mixed precision across architectures: timm's AMP training steps captured
on a Hopper GPU (capture_timm.py) predicted for an RTX 3090 through the
product (`habitat predict`), against the step times measured on that card
(../shared/data/timm-rtx3090, README.md there says what was timed).

Beside the prediction, three baselines move the origin's measured step by
one ratio of the two GPUs (as the predictor takes them, models/
habitat_models/features.py): streaming DRAM bandwidth, fp16 tensor-core
datasheet peak, sustained fp16 GEMM throughput.

Run from the repository root after building:
    python3 eval/mixed_precision/benchmark.py \
        --results eval/mixed_precision/results/h200_2026-11-28 \
        [--timm-dir ../shared/data/timm-rtx3090] [--target RTX3090] \
        [--md docs/mixed_precision_accuracy_table.md] [--csv OUT.csv]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT / "models"))
from habitat_models.features import (load_devices, peak_tflops, streaming_gbps,  # noqa: E402
                                     sustained_tflops)

FAMILIES = ("mobile", "dense", "grouped", "transformer", "mlp", "hybrid")
BASELINES = ("dram", "tensor_peak", "sustained_gemm")


def families() -> dict:
    """{model: family} from models.txt."""
    out = {}
    for line in (HERE / "models.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            model, family = line.split()
            out[model] = family
    return out


def measured(timm_dir: str, layout: str) -> dict:
    with open(os.path.join(timm_dir, f"train-amp-{layout}-rtx3090.csv"), newline="") as f:
        return {r["model"]: r for r in csv.DictReader(f)}


def predict_each(cli: str, trace: Path, targets, data_dir: str = "") -> dict:
    """{GPU id: the CLI's JSON prediction of `trace` there}, one run for
    all `targets`; `data_dir`, if set, is the CLI's --data-dir."""
    cmd = [cli, "predict", str(trace), "--devices", ",".join(targets),
           "--catalog", "none", "--format", "json"]
    if data_dir:
        cmd += ["--data-dir", data_dir]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True)
    got = {p["device_id"]: p for p in json.loads(out.stdout)["predictions"]}
    if set(got) != set(targets):
        raise RuntimeError(f"{trace}: predicted {sorted(got)}, asked for {sorted(targets)}")
    return got


def predict(cli: str, trace: Path, target: str) -> dict:
    """The CLI's JSON prediction of `trace` for the target."""
    return predict_each(cli, trace, [target])[target]


def baseline_ratios(devices: dict, origin: str, target: str) -> dict:
    o, t = devices[origin], devices[target]
    return {
        "dram": streaming_gbps(o) / streaming_gbps(t),
        "tensor_peak": peak_tflops(o, "fp16") / peak_tflops(t, "fp16"),
        "sustained_gemm": sustained_tflops(o, "fp16") / sustained_tflops(t, "fp16"),
    }


def rows_for(args, layout: str, devices: dict) -> list:
    results = Path(args.results)
    jsonl = results / f"{layout}.jsonl"
    if not jsonl.exists():
        return []
    caps = [json.loads(x) for x in jsonl.read_text().splitlines() if x.strip()]
    caps = [c for c in caps if c.get("status") == "ok"]
    truth = measured(args.timm_dir, layout)
    fam = families()

    def one(c):
        return c, predict(args.cli, results / layout / f"{c['model']}.trace.gz", args.target)

    with ThreadPoolExecutor(max_workers=2) as pool:
        done = list(pool.map(one, caps))
    ratios = baseline_ratios(devices, args.origin, args.target)
    rows = []
    for c, t in done:
        meas = float(truth[c["model"]]["train_step_time"]) * 1e6
        origin_ns = c["origin_step_ns_median"]
        row = {
            "model": c["model"], "family": fam.get(c["model"], "?"), "layout": layout,
            "batch": c["batch_size"], "origin_ms": origin_ns / 1e6, "measured_ms": meas / 1e6,
            "predicted_ms": t["wall_ns"] / 1e6, "err_pct": 100 * (t["wall_ns"] - meas) / meas,
            "expected_err_pct": t["expected_error_percent"],
        }
        for b in BASELINES:
            row[f"{b}_pct"] = 100 * (origin_ns * ratios[b] - meas) / meas
        rows.append(row)
    return rows


def mape(values) -> float:
    values = list(values)
    return sum(abs(v) for v in values) / len(values) if values else float("nan")


# How far apart the two software stacks may run one model's two layouts
# before the model counts as running different software on them (below).
LAYOUT_AGREEMENT = 1.5


def layout_agreement(rows: list) -> dict:
    """Per model captured in both layouts: the origin's NCHW/NHWC step ratio
    over the target's. Near 1 when both stacks run the two layouts alike; far
    from it when one stack runs one layout through other, much slower
    software (the H200's cuDNN 9.19 batch norm in NCHW, the 3090's PyTorch
    1.12 grouped convolutions in NHWC). Uses measured steps only, never a
    prediction."""
    by = {}
    for r in rows:
        by.setdefault(r["model"], {})[r["layout"]] = r
    out = {}
    for model, d in by.items():
        if "nchw" in d and "nhwc" in d:
            origin = d["nchw"]["origin_ms"] / d["nhwc"]["origin_ms"]
            target = d["nchw"]["measured_ms"] / d["nhwc"]["measured_ms"]
            out[model] = origin / target
    return out


def summary(rows: list) -> list:
    lines = ["| set | N | MAPE | median abs | worst | within ±err | "
             + " | ".join(f"{b} MAPE" for b in BASELINES) + " |",
             "|---|---|---|---|---|---|" + "---|" * len(BASELINES)]
    groups = [("all", rows)] + [(f, [r for r in rows if r["family"] == f]) for f in FAMILIES]
    for layout in ("nchw", "nhwc"):
        groups.append((f"layout {layout}", [r for r in rows if r["layout"] == layout]))
    agreement = layout_agreement(rows)
    agree = [r for r in rows if r["model"] in agreement
             and 1 / LAYOUT_AGREEMENT < agreement[r["model"]] < LAYOUT_AGREEMENT]
    if agree:
        groups.append(("stacks agree on layout", agree))
        groups += [(f"  {f}", [r for r in agree if r["family"] == f]) for f in FAMILIES]
        groups.append(("stacks disagree", [r for r in rows if r["model"] in agreement
                                           and r not in agree]))
    for name, rs in groups:
        if not rs:
            continue
        errs = [r["err_pct"] for r in rs]
        worst = max(rs, key=lambda r: abs(r["err_pct"]))
        inside = sum(abs(r["err_pct"]) <= r["expected_err_pct"] for r in rs)
        lines.append(f"| {name} | {len(rs)} | {mape(errs):.1f} | "
                     f"{statistics.median(abs(e) for e in errs):.1f} | "
                     f"{worst['err_pct']:+.1f} ({worst['model']}) | {inside}/{len(rs)} | "
                     + " | ".join(f"{mape(r[f'{b}_pct'] for r in rs):.1f}" for b in BASELINES)
                     + " |")
    return lines


def table(rows: list) -> list:
    lines = ["| model | family | layout | batch | origin ms | measured ms | predicted ms | "
             "error % | ±err % | dram % | tensor peak % | sustained GEMM % |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in sorted(rows, key=lambda r: (r["layout"], FAMILIES.index(r["family"])
                                         if r["family"] in FAMILIES else 99, r["model"])):
        lines.append(f"| {r['model']} | {r['family']} | {r['layout']} | {r['batch']} | "
                     f"{r['origin_ms']:.1f} | {r['measured_ms']:.1f} | {r['predicted_ms']:.1f} | "
                     f"{r['err_pct']:+.1f} | {r['expected_err_pct']:.1f} | "
                     f"{r['dram_pct']:+.1f} | {r['tensor_peak_pct']:+.1f} | "
                     f"{r['sustained_gemm_pct']:+.1f} |")
    return lines


def write_outputs(lines: list, rows: list, md: str, csv_path: str) -> None:
    """The report to `md` (else stdout) and the rows to `csv_path` if set."""
    text = "\n".join(lines) + "\n"
    if md:
        Path(md).write_text(text)
    else:
        print(text)
    if csv_path:
        with open(csv_path, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--results", required=True, help="a capture_timm.py output folder")
    ap.add_argument("--timm-dir", default=str(ROOT.parent / "shared" / "data" / "timm-rtx3090"))
    ap.add_argument("--cli", default=str(ROOT / "build" / "client" / "habitat"))
    ap.add_argument("--origin", default="H200")
    ap.add_argument("--target", default="RTX3090")
    ap.add_argument("--md", default="", help="write the tables here (else stdout)")
    ap.add_argument("--csv", default="", help="also write the rows as CSV")
    args = ap.parse_args()
    devices = load_devices(str(ROOT / "data" / "devices.textproto"))
    rows = rows_for(args, "nchw", devices) + rows_for(args, "nhwc", devices)
    if not rows:
        sys.exit(f"no captures under {args.results}")
    write_outputs(summary(rows) + [""] + table(rows), rows, args.md, args.csv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
