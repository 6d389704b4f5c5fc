#!/usr/bin/env python3
"""Mixed precision across architectures on current software: timm's AMP
inference steps captured on a Hopper GPU (capture_timm.py --mode infer)
predicted for an RTX 4090, an RTX 3090 and an RTX 5090 through the product
(`habitat predict`), against the steps timm measured there with PyTorch
2.9.1, 2.4 and 2.9.1 (timm_infer/README.md says what was timed).

The training benchmark (benchmark.py) compares with a 2022 software stack;
this check compares with stacks of the origin's generation, so what it
measures is the predictor's physics, not a software difference. Beside it,
the measured stack effect on one card (the same 3090 on PyTorch 1.12 and
2.4; the same 4090 on 2.4 and 2.9.1) says how much a stack moves a step.

Run from the repository root after building:
    python3 eval/mixed_precision/infer_check.py \
        --results eval/mixed_precision/results/h200_2026-11-29_infer \
        [--md OUT.md] [--csv OUT.csv] [--cli HABITAT] [--data-dir DIR]
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))
from benchmark import FAMILIES, families, mape, predict_each, write_outputs  # noqa: E402

MEASURED = HERE / "timm_infer"
# Target GPU -> the file of its measured steps on current software.
TARGETS = {
    "RTX4090": "infer-amp-nchw-pt291-cu128-rtx4090.csv",
    "RTX3090": "infer-amp-nchw-pt240-cu124-rtx3090.csv",
    "RTX5090": "infer-amp-nchw-pt291-cu130-rtx5090.csv",
}
# The same card on two stacks: (label, older file, newer file).
STACK_PAIRS = (
    ("RTX 3090, PyTorch 1.12 over 2.4", "infer-amp-nchw-pt112-cu113-rtx3090.csv",
     "infer-amp-nchw-pt240-cu124-rtx3090.csv"),
    ("RTX 4090, PyTorch 2.4 over 2.9.1", "infer-amp-nchw-pt240-cu124-rtx4090.csv",
     "infer-amp-nchw-pt291-cu128-rtx4090.csv"),
)


def measured(name: str) -> dict:
    with open(MEASURED / name, newline="") as f:
        return {r["model"]: r for r in csv.DictReader(f)}


def comparable(capture: dict, row: dict | None, params: set) -> bool:
    """A measured row compares with a capture only at the same batch and
    image size (timm halves the batch on out-of-memory, per card) and of the
    same definition: the capture's parameter count where it records one,
    else one count in every measured file (`params`; timm redefined
    repvgg_b1 and tnt_s_patch16_224 between the files' versions)."""
    if row is None or int(row["infer_batch_size"]) != capture["batch_size"] \
            or int(row["infer_img_size"]) != capture["img_size"]:
        return False
    if "param_count_m" in capture:
        return abs(float(row["param_count"]) - capture["param_count_m"]) < 0.01
    return len(params) == 1


def captures(results: Path) -> list:
    lines = (results / "infer_nchw.jsonl").read_text().splitlines()
    return [c for c in (json.loads(x) for x in lines if x.strip()) if c.get("status") == "ok"]


def rows_for(args) -> list:
    results = Path(args.results)
    caps = captures(results)
    truth = {t: measured(f) for t, f in TARGETS.items()}
    files = [measured(p.name) for p in sorted(MEASURED.glob("*.csv"))]
    fam = families()

    def one(c):
        trace = results / "infer_nchw" / f"{c['model']}.trace.gz"
        return c, predict_each(args.cli, trace, list(TARGETS), args.data_dir)

    with ThreadPoolExecutor(max_workers=2) as pool:
        done = list(pool.map(one, caps))
    rows = []
    for c, by_gpu in done:
        params = {f[c["model"]]["param_count"] for f in files if c["model"] in f}
        for target, row in ((t, truth[t].get(c["model"])) for t in TARGETS):
            if not comparable(c, row, params):
                continue
            p = by_gpu[target]
            meas = float(row["infer_step_time"])
            pred = p["wall_ns"] / 1e6
            rows.append({
                "model": c["model"], "family": fam.get(c["model"], "?"), "target": target,
                "batch": c["batch_size"], "origin_ms": c["origin_step_ns_host_mean"] / 1e6,
                "measured_ms": meas, "predicted_ms": pred, "err_pct": 100 * (pred - meas) / meas,
                "expected_err_pct": p["expected_error_percent"],
            })
    return rows


def summary(rows: list) -> list:
    lines = ["| target | set | N | MAPE | bias | median abs | worst | within ±err |",
             "|---|---|---|---|---|---|---|---|"]
    for target in TARGETS:
        rt = [r for r in rows if r["target"] == target]
        for name, rs in [("all", rt)] + [(f, [r for r in rt if r["family"] == f])
                                         for f in FAMILIES]:
            if not rs:
                continue
            errs = [r["err_pct"] for r in rs]
            worst = max(rs, key=lambda r: abs(r["err_pct"]))
            inside = sum(abs(r["err_pct"]) <= r["expected_err_pct"] for r in rs)
            lines.append(f"| {target} | {name} | {len(rs)} | {mape(errs):.1f} | "
                         f"{statistics.mean(errs):+.1f} | "
                         f"{statistics.median(abs(e) for e in errs):.1f} | "
                         f"{worst['err_pct']:+.1f} ({worst['model']}) | {inside}/{len(rs)} |")
    return lines


def stack_effect() -> list:
    """Median measured step ratio of one card on two stacks, per family."""
    fam = families()
    lines = ["| card and stacks | N | median ratio | "
             + " | ".join(FAMILIES) + " |", "|---|---|---|" + "---|" * len(FAMILIES)]
    for label, older, newer in STACK_PAIRS:
        a, b = measured(older), measured(newer)
        ratios = {m: float(a[m]["infer_step_time"]) / float(b[m]["infer_step_time"])
                  for m in a if m in b and a[m]["infer_batch_size"] == b[m]["infer_batch_size"]
                  and a[m]["infer_img_size"] == b[m]["infer_img_size"]}
        per = [[v for m, v in ratios.items() if fam.get(m) == f] for f in FAMILIES]
        lines.append(f"| {label} | {len(ratios)} | {statistics.median(ratios.values()):.3f} | "
                     + " | ".join(f"{statistics.median(v):.3f}" if v else "—" for v in per)
                     + " |")
    return lines


def pair_ratio(rows: list) -> list:
    """Per model in both targets of a pair: the predicted step ratio over
    the measured one (1 = the two targets' physics agree with each other),
    for the 3090 and the 5090 each against the 4090."""
    by = {}
    for r in rows:
        by.setdefault(r["model"], {})[r["target"]] = r
    lines = []
    for slow, fast in (("RTX3090", "RTX4090"), ("RTX5090", "RTX4090")):
        vals = [(d[slow]["predicted_ms"] / d[fast]["predicted_ms"])
                / (d[slow]["measured_ms"] / d[fast]["measured_ms"])
                for d in by.values() if slow in d and fast in d]
        if vals:
            lines.append(f"Predicted over measured RTX {slow[3:]} / RTX {fast[3:]} step ratio: "
                         f"median {statistics.median(vals):.2f} over {len(vals)} models "
                         f"(range {min(vals):.2f}–{max(vals):.2f}).")
    return lines


def table(rows: list) -> list:
    lines = ["| model | family | target | batch | origin ms | measured ms | predicted ms | "
             "error % | ±err % |", "|---|---|---|---|---|---|---|---|---|"]
    for r in sorted(rows, key=lambda r: (r["target"], r["family"], r["model"])):
        lines.append(f"| {r['model']} | {r['family']} | {r['target']} | {r['batch']} | "
                     f"{r['origin_ms']:.1f} | {r['measured_ms']:.1f} | {r['predicted_ms']:.1f} | "
                     f"{r['err_pct']:+.1f} | {r['expected_err_pct']:.1f} |")
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--results", required=True, help="a capture_timm.py --mode infer folder")
    ap.add_argument("--cli", default=str(ROOT / "build" / "client" / "habitat"))
    ap.add_argument("--data-dir", default="",
                    help="passed to `habitat predict --data-dir` (else the CLI's own)")
    ap.add_argument("--md", default="", help="write the tables here (else stdout)")
    ap.add_argument("--csv", default="", help="also write the rows as CSV")
    args = ap.parse_args()
    rows = rows_for(args)
    if not rows:
        sys.exit(f"no comparable captures under {args.results}")
    write_outputs(summary(rows) + [""] + pair_ratio(rows) + [""] + stack_effect() + [""]
                  + table(rows), rows, args.md, args.csv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
