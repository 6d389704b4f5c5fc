#!/usr/bin/env python3
"""Facts about the training data that bound what any cross-GPU model can
learn from it, printed as Markdown for docs/kernel_varying_accuracy.md:

1. the harness floor of each (GPU, operator) in NeuSight's host-timed data;
2. the fp32 throughput each GPU reached on the data's large linear and bmm
   GEMMs against the spec database's `measured_fp32_gemm_tflops`;
3. which kernel families ran the fp32 convolutions (NeuSight's `Kernel Name`
   on the older GPUs, the profiled kernels of our H100 run) and which
   kernel sizes and strides NeuSight's convolutions have;
4. how far one GPU's efficiency on a configuration tells another's: the
   correlation of log(time / sustained roofline) across GPUs over the
   configurations every GPU measured above its harness floor;
5. the time over the sustained roofline of large compute-bound passes per GPU.

    /usr/bin/python3 models/data_checks.py [--neusight_dir ../shared/data/neusight]
"""
import argparse
import csv
import gzip
import math
import re
import statistics
import sys
from collections import Counter, defaultdict
from pathlib import Path

import numpy

sys.path.insert(0, str(Path(__file__).resolve().parent))
from habitat_models import data as data_lib  # noqa: E402
from habitat_models import features as feat  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
# GEMMs of at least this many FLOP are compute-bound on every GPU here.
LARGE_GEMM_FLOP = 2e10
# Table order: the origins, then the held-out GPUs of models/train.py.
GPUS = ("H100-SXM", "H200", "A100", "V100-PCIE-32GB", "T4", "P100", "P4")
# For the correlation: rows at least this multiple of their harness floor.
KERNEL_BOUND_FACTOR = 3
# A pass is large and compute-bound on a GPU with at least this many waves
# of 128x128 output tiles and compute time 4x its memory time.
LARGE_WAVES, LARGE_COMPUTE_OVER_MEMORY = 4, 4


def percentile(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, len(values) * q // 100)]


def floors_table(rows):
    floors = data_lib.harness_floors(rows)
    print("| GPU | linear | bmm | conv2d |", "|---|---:|---:|---:|", sep="\n")
    for device in sorted({k[4] for k in floors}):
        cells = [floors.get(("neusight", f, "fp32", False, device)) for f in
                 ("linear", "bmm", "conv2d")]
        print(f"| {device} | " + " | ".join(f"{c / 1e3:.0f} µs" if c else "" for c in cells) + " |")


def throughput_table(rows, devices):
    achieved = defaultdict(list)
    for source, family, config, mode, backward, device, ns in rows:
        if source != "neusight" or mode != "fp32" or backward or family not in ("linear", "bmm"):
            continue
        flop, _ = feat.work(family, config, mode, backward)
        if flop >= LARGE_GEMM_FLOP:
            achieved[(device, family)].append(flop / ns / 1e3)
    print("| GPU | family | rows | median TFLOP/s | 90th percentile | 99th percentile | "
          "spec database |", "|---|---|---:|---:|---:|---:|---:|", sep="\n")
    for (device, family), values in sorted(achieved.items()):
        print(f"| {device} | {family} | {len(values)} | {statistics.median(values):.2f} | "
              f"{percentile(values, 90):.2f} | {percentile(values, 99):.2f} | "
              f"{devices[device]['measured_fp32_gemm_tflops']:.2f} |")


def kernel_family(name):
    name = re.sub(r"<.*", "", name)
    for key in ("winograd", "implicit_gemm", "scudnn", "sgemm", "gcgemm", "fft"):
        if key in name:
            return key
    return "other"


def conv_kernels(neusight_dir):
    print("| GPU | kernels (rows) |", "|---|---|", sep="\n")
    for path in sorted(Path(neusight_dir, "ops", "conv").glob("*.csv.gz")):
        with gzip.open(path, "rt") as f:
            counts = Counter(kernel_family(r["Kernel Name"]) for r in csv.DictReader(f))
        print(f"| {path.name[:-len('.csv.gz')]} (NeuSight, cuDNN 8.9) | " +
              ", ".join(f"{k} {n}" for k, n in counts.most_common()) + " |")
    ours = ROOT / "models" / "data" / "neusight_configs" / "H100-SXM.csv.gz"
    with gzip.open(ours, "rt") as f:
        counts = Counter(kernel_family(r["kernel"]) for r in csv.DictReader(f)
                         if r["op"] == "conv" and r.get("kernel") and r["precision"] != "bf16")
    print("| H100-SXM (ours, profiled subset) | " +
          ", ".join(f"{k} {n}" for k, n in counts.most_common()) + " |")


def conv_shapes(neusight_dir):
    """NeuSight's convolutions by (kernel size, stride), over all its GPUs:
    whether shape features could tell Winograd-eligible ones apart."""
    counts = Counter()
    for path in sorted(Path(neusight_dir, "ops", "conv").glob("*.csv.gz")):
        with gzip.open(path, "rt") as f:
            counts.update((r["Kernel_Szie"], r["Stride"]) for r in csv.DictReader(f))
    print("\nNeuSight convolutions by kernel size x stride (rows, all GPUs): " +
          ", ".join(f"{k}x{k} stride {s} {n}" for (k, s), n in counts.most_common()))


def log_efficiency(family, config, device, ns):
    roofline, _ = feat.sides(family, config, "fp32", False, device)
    return math.log(ns / roofline)


def correlation_tables(rows, devices):
    per_config = defaultdict(dict)
    for _, family, config, mode, backward, device, ns in data_lib.kernel_bound(
            rows, KERNEL_BOUND_FACTOR):
        if mode != "fp32" or backward or ns < data_lib.MIN_NS:
            continue
        per_config[(family, tuple(config.items()))][data_lib.gpu_group(device)] = \
            log_efficiency(family, config, devices[device], ns)
    for family in ("linear", "bmm", "conv2d"):
        table = [[per[g] for g in GPUS] for (f, _), per in per_config.items()
                 if f == family and all(g in per for g in GPUS)]
        corr = numpy.corrcoef(numpy.array(table).T)
        print(f"\n{family} ({len(table)} configurations):\n")
        print("| | " + " | ".join(GPUS) + " |", "|---|" + "---:|" * len(GPUS), sep="\n")
        for g, row in zip(GPUS, corr):
            print(f"| {g} | " + " | ".join(f"{v:.2f}" for v in row) + " |")


def large_pass_table(rows, devices):
    times = defaultdict(list)
    for _, family, config, mode, backward, device, ns in rows:
        if mode != "fp32" or backward or ns < data_lib.MIN_NS:
            continue
        roofline, per_gpu = feat.sides(family, config, mode, backward, devices[device])
        log2_compute_over_memory, log2_waves_128 = per_gpu[0], per_gpu[1]
        if 2 ** log2_waves_128 >= LARGE_WAVES and \
                2 ** log2_compute_over_memory >= LARGE_COMPUTE_OVER_MEMORY:
            times[(data_lib.gpu_group(device), family)].append(ns / roofline)
    print("| GPU | " + " | ".join(f"{f} (rows, median, 10th-90th)" for f in
                                  ("linear", "bmm", "conv2d")) + " |", "|---|---|---|---|", sep="\n")
    for g in GPUS:
        cells = []
        for f in ("linear", "bmm", "conv2d"):
            v = sorted(times[(g, f)])
            cells.append(f"{len(v)}, {statistics.median(v):.2f}, "
                         f"{percentile(v, 10):.2f}-{percentile(v, 90):.2f}" if v else "")
        print(f"| {g} | " + " | ".join(cells) + " |")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--neusight_dir", default=str(ROOT.parent / "shared" / "data" / "neusight"))
    args = p.parse_args()
    devices = feat.load_devices(ROOT / "data" / "devices.textproto")
    rows = list(data_lib.load_neusight(args.neusight_dir, devices))
    rows += list(data_lib.load_neusight_configs(ROOT / "models" / "data" / "neusight_configs"))
    print("Harness floor (1st percentile of each GPU's fp32 forward times):\n")
    floors_table(rows)
    print("\nfp32 linear and bmm GEMMs of at least 2e10 FLOP: throughput reached:\n")
    throughput_table(rows, devices)
    print("\nfp32 convolution kernels:\n")
    conv_kernels(args.neusight_dir)
    conv_shapes(args.neusight_dir)
    print("\nCorrelation of log(time / sustained roofline), fp32 forward, rows at least "
          f"{KERNEL_BOUND_FACTOR}x their harness floor:")
    correlation_tables(rows, devices)
    print("\nLarge compute-bound fp32 forward passes: time / sustained roofline:\n")
    large_pass_table(rows, devices)
    return 0


if __name__ == "__main__":
    sys.exit(main())
