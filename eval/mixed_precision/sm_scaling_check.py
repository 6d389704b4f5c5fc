#!/usr/bin/env python3
"""Checks the predictor's compute term against the H200 run on fewer SMs.

sm_scaling.py measured timm inference steps on an H200 whose kernels were
given only N SMs (CUDA green contexts): same memory, clocks and software,
fewer SMs. This predicts the same models' H200 inference traces
(results/h200_2026-11-29_infer, batch 1024, the measured run's) for "an H200 with N SMs": the
H200's entry of data/devices.textproto with sm_count N and its peak and
measured GEMM throughputs times N/132 (the SMs do the arithmetic; the
memory figures stay). The step-time ratio to the whole H200, predicted
against measured, isolates how wave scaling
and the kernel-varying rules move work with the SM count alone.

    /usr/bin/python3 eval/mixed_precision/sm_scaling_check.py [--md OUT.md]
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
# The run at the traces' batch (1024); sm_scaling.json.gz beside it is the
# same at 128-256.
MEASURED = HERE / "results" / "h200_2026-11-29_sm_scaling" / "sm_scaling_b1024.json.gz"
TRACES = HERE / "results" / "h200_2026-11-29_infer" / "infer_nchw"
sys.path.insert(0, str(HERE))
from benchmark import predict_each  # noqa: E402

COMPUTE_FIELDS = re.compile(r"^(\s*(?:peak|measured)_(?:fp32|tf32|fp16|bf16|fp64)\w*): ([0-9.]+)$",
                            re.M)


def device_block(text: str, device_id: str) -> str:
    """The `devices { ... }` block of `device_id`."""
    at = text.find(f'id: "{device_id}"')
    start = text.rfind("devices {", 0, at)
    depth = 0
    for end in range(start, len(text)):
        depth += {"{": 1, "}": -1}.get(text[end], 0)
        if depth == 0 and text[end] == "}":
            return text[start:end + 1]
    raise ValueError(f"no block for {device_id}")


def fewer_sms(block: str, sms: int, full: int) -> str:
    """The H200's block as a GPU of `sms` SMs with the same memory."""
    out = block.replace('id: "H200"', f'id: "H200-SM{sms}"')
    out = re.sub(r'driver_names: "[^"]*"', f'driver_names: "H200 on {sms} SMs"', out)
    out = re.sub(r"sm_count: \d+", f"sm_count: {sms}", out)
    return COMPUTE_FIELDS.sub(
        lambda m: f"{m.group(1)}: {float(m.group(2)) * sms / full:.4f}", out)


def predicted_ratios(cli: str, data_dir: Path, trace: Path, sms_list: list) -> dict:
    ids = ["H200"] + [f"H200-SM{s}" for s in sms_list]
    got = predict_each(cli, trace, ids, str(data_dir))
    gpu = {i: int(p["gpu_time_ns"]) for i, p in got.items()}
    return {s: gpu[f"H200-SM{s}"] / gpu["H200"] for s in sms_list}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", default=str(ROOT / "build" / "client" / "habitat"))
    ap.add_argument("--md")
    ap.add_argument("--measured", default=str(MEASURED))
    args = ap.parse_args()
    measured = json.load(gzip.open(args.measured))
    full = measured["sm_count"]
    sms_list = sorted({r["sms"] for m in measured["models"] for r in m["runs"]
                       if r.get("sms") and "error" not in r})
    with tempfile.TemporaryDirectory() as tmp:
        data_dir = Path(tmp) / "data"
        shutil.copytree(ROOT / "data", data_dir)
        text = (ROOT / "data" / "devices.textproto").read_text()
        h200 = device_block(text, "H200")
        extra = "\n".join(fewer_sms(h200, s, full) for s in sms_list)
        (data_dir / "devices.textproto").write_text(text + "\n" + extra + "\n")
        rows = []
        for m in measured["models"]:
            runs = {r["sms"] or full: r for r in m["runs"] if "error" not in r}
            trace = TRACES / f"{m['model']}.trace.gz"
            if not trace.exists():
                continue
            pred = predicted_ratios(args.cli, data_dir, trace, sms_list)
            meas = {s: runs[s]["step_ns_median"] / runs[full]["step_ns_median"] for s in sms_list}
            rows.append((m["model"], m["batch"], meas, pred))
    head = "| model | measured at batch | " + " | ".join(
        f"{s} SMs: measured / predicted" for s in reversed(sms_list)) + " |"
    lines = [head, "|" + "---|" * (2 + len(sms_list))]
    errs = {s: [] for s in sms_list}
    for name, batch, meas, pred in rows:
        cells = []
        for s in reversed(sms_list):
            errs[s].append(100 * (pred[s] / meas[s] - 1))
            cells.append(f"{meas[s]:.2f} / {pred[s]:.2f}")
        lines.append(f"| {name} | {batch} | " + " | ".join(cells) + " |")
    lines.append("| error of the prediction, mean (worst) % | | " + " | ".join(
        f"{sum(errs[s]) / len(errs[s]):+.1f} ({max(errs[s], key=abs):+.1f})"
        for s in reversed(sms_list)) + " |")
    text = "\n".join(lines) + "\n"
    print(text, end="")
    if args.md:
        Path(args.md).write_text(text)


if __name__ == "__main__":
    main()
