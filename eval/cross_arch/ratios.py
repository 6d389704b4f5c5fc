"""Whole iterations moved across architectures: each H100 agent capture
(tests/testdata/agent_suite/h100, the largest batch of each model, fp32 and
bf16) predicted on other GPUs through the product (`habitat predict`), as
the predicted GPU time over the H100's measured GPU time.

No GPU here measures the targets, so this is not an accuracy table: it shows
what a change to the predictor does to whole iterations, and where a
prediction leaves what the target's sustained GEMM throughput and bandwidth
allow (the columns "GEMM-bound" and "memory-bound": the ratio a model would
have if all its time scaled like large fp32 GEMMs at the sustained
throughputs, resp. like streaming memory traffic, both as the predictor
takes them).

Run from the repository root after building:
    /usr/bin/python3 eval/cross_arch/ratios.py [--cli build/client/habitat]
        [--devices A100-PCIE-40GB,V100-SXM2,...] [--models-dir DIR]
"""
import argparse
import json
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "models"))
from habitat_models.features import load_devices, streaming_gbps, sustained_tflops  # noqa: E402,E501
SUITE = os.path.join(ROOT, "tests", "testdata", "agent_suite", "h100")
DEVICES_FILE = os.path.join(ROOT, "data", "devices.textproto")
ORIGIN = "H100-SXM"
DEFAULT_DEVICES = ("A100-PCIE-40GB", "A100-SXM-80GB", "V100-SXM2", "V100-PCIE-32GB", "L4",
                   "T4", "RTX4090", "RTX3090", "A10G", "P100")
TRACE = re.compile(
    r"^(?P<model>[a-z0-9_]+?)_b(?P<batch>\d+)_(?P<precision>fp32|tf32|bf16|fp16)\.trace\.gz$")


def largest_batch_traces(suite):
    """{(model, precision): file name} of the largest batch per model."""
    best = {}
    for name in sorted(os.listdir(suite)):
        m = TRACE.match(name)
        if not m:
            continue
        key = (m["model"], m["precision"])
        if key not in best or int(m["batch"]) > best[key][0]:
            best[key] = (int(m["batch"]), name)
    return {k: v[1] for k, v in sorted(best.items())}


def bound_ratios(specs, device):
    """(GEMM-bound, memory-bound) ratio of `device` to the origin, from the
    sustained fp32 GEMM throughput and the streaming bandwidth as the
    predictor takes them (features.sustained_tflops, streaming_gbps: the
    measured figure, else the default fraction of the datasheet)."""
    o, t = specs[ORIGIN], specs[device]
    return (sustained_tflops(o, "fp32") / sustained_tflops(t, "fp32"),
            streaming_gbps(o) / streaming_gbps(t))


def predict(cli, trace, devices, models_dir):
    cmd = [cli, "predict", trace, "--format", "json", "--catalog", "none",
           "--devices", ",".join((ORIGIN,) + tuple(devices))]
    if models_dir:
        cmd += ["--models-dir", models_dir]
    out = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
    return {p["device_id"]: p["gpu_time_ns"] for p in out["predictions"]}


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--cli", default=os.path.join(ROOT, "build", "client", "habitat"))
    p.add_argument("--devices", default=",".join(DEFAULT_DEVICES))
    p.add_argument("--models-dir", default="")
    p.add_argument("--suite", default=SUITE, help="folder of H100 agent captures")
    args = p.parse_args(argv)
    devices = tuple(d for d in args.devices.split(",") if d)
    specs = load_devices(DEVICES_FILE)
    print("| trace (H100 SXM) | H100 GPU ms | " + " | ".join(devices) + " |")
    print("|---|---:|" + "---:|" * len(devices))
    for (model, precision), name in largest_batch_traces(args.suite).items():
        times = predict(args.cli, os.path.join(args.suite, name), devices, args.models_dir)
        origin = times[ORIGIN]
        print(f"| {name.removesuffix('.trace.gz')} | {origin / 1e6:.1f} | "
              + " | ".join(f"{times[d] / origin:.2f}" for d in devices) + " |")
    bounds = [bound_ratios(specs, d) for d in devices]
    for label, k in (("GEMM-bound (sustained fp32 GEMM)", 0), ("memory-bound (bandwidth)", 1)):
        print(f"| *{label}* | | " + " | ".join(
            f"*{b[k]:.2f}*" for b in bounds) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
