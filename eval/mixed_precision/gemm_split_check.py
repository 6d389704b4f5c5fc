#!/usr/bin/env python3
"""A held-out check of the rule that moves GEMM passes the kernel-varying
trees have no data for (core/predict/varying_predictor.cc, Apply): the
share of a pass its sustained roofline accounts for moves by the roofline
ratio, the rest (latency) by the ratio of SM count x clock.

The rule serves fp16/bf16 passes on GPUs without tensor-core measurements,
where nothing public measures single operators. Its physics is checked
where measurements exist: NeuSight's fp32 passes (A100, V100, T4, P100, P4)
against the same configurations measured on the H100 (models/data), in the
production direction (origin H100 SXM, target an older GPU). Beside it:
the trees' held-out MAPE on the same rows (models/kernel_varying/
eval_results.json, the target held out of training) and the roofline ratio
alone. Large fp32 GEMMs take the roofline ratio in every column but the
trees', as the served predictor does.

    /usr/bin/python3 eval/mixed_precision/gemm_split_check.py [--md FILE]

No fitted constant: the rule reads only the device database.
"""
import argparse
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "models"))
import train  # noqa: E402
from habitat_models import data as data_lib  # noqa: E402
from habitat_models import features as feat  # noqa: E402

ORIGIN = "H100-SXM"


def sustained_roofline(args, device):
    compute, memory = feat.sustained_ns(*feat.work(*args), args[2], device)
    return max(compute, memory, 1.0)


def predictions(p, origin, target):
    """(roofline ratio, split rule) for one pair row, each at least the floor."""
    args = (p["family"], p["config"], p["mode"], p["backward"])
    r_o, r_t = sustained_roofline(args, origin), sustained_roofline(args, target)
    floor = feat.floor_ns(*args, target)
    ratio = p["origin_ns"] * r_t / r_o
    if feat.large_gemm_roofline_ns(*args, target) > 0:
        split = ratio
    else:
        latency = (origin["sm_count"] * origin["boost_clock_mhz"] /
                   (target["sm_count"] * target["boost_clock_mhz"]))
        split = min(p["origin_ns"], r_o) * r_t / r_o + max(p["origin_ns"] - r_o, 0) * latency
    return max(ratio, floor), max(split, floor)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--md", help="write the table here too")
    args = ap.parse_args()
    devices = feat.load_devices(str(ROOT / "data" / "devices.textproto"))
    rows = data_lib.measurements(str(ROOT.parent / "shared" / "data" / "neusight"),
                                 str(ROOT / "models" / "data"), devices,
                                 data_lib.DEFAULT_HARNESS_FLOOR_FACTOR)
    errors = defaultdict(lambda: defaultdict(list))
    for p in data_lib.pairs(rows, train.group):
        held = train.group(p["target"])
        if p["origin"] != ORIGIN or held not in train.HELD_OUT:
            continue
        if p["family"] not in ("linear", "bmm", "conv2d"):
            continue
        ratio, split = predictions(p, devices[ORIGIN], devices[p["target"]])
        for method, value in (("roofline", ratio), ("split", split)):
            errors[(held, train.label(p))][method].append(abs(value - p["target_ns"]) /
                                                          p["target_ns"])
    trees = json.loads((ROOT / "models" / "kernel_varying" / "eval_results.json").read_text())
    lines = ["| target (held out) | pass | rows | trees MAPE | roofline ratio MAPE | "
             "split MAPE |", "|---|---|---|---|---|---|"]
    for (held, label), per in sorted(errors.items()):
        ours = trees["production_direction"][held]["by_origin"][ORIGIN][label]["ours"]["mape"]
        lines.append(f"| {held} | {label} | {len(per['split'])} | {ours:.1f} | "
                     f"{100 * statistics.fmean(per['roofline']):.1f} | "
                     f"{100 * statistics.fmean(per['split']):.1f} |")
    text = "\n".join(lines) + "\n"
    print(text, end="")
    if args.md:
        Path(args.md).write_text(text)


if __name__ == "__main__":
    main()
