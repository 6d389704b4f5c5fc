"""Loads operator measurements and pairs them across GPUs.

Sources:
- NeuSight's public cross-GPU measurements (../shared/data/neusight, MIT
  licence, github.com/sitar-lab/NeuSight): linear, bmm, conv forward in fp32
  (TF32 off: their A100 kernels are SIMT sgemm/scudnn) on P4, P100, T4, V100
  and A100. Read in place, never copied.
- The same configurations measured by us on an H100 SXM and an H200
  (models/data/neusight_configs, models/collect/collect_neusight.py): fp32
  forward for all of them, fp32 backward and bf16 for a prefix. They share
  the source key "neusight", so they pair with the older GPUs.
- Our own sampled configurations (models/data/*.csv.gz,
  models/collect/collect_ops.py) on the H100 SXM and H200: six families,
  fp32 and bf16 autocast, forward and backward.

A measurement is (source, family, config, mode, backward, device, ns), with
`mode` the math mode the op ran in (features.MODES).
"""
import csv
import gzip
import json
import statistics
from collections import defaultdict
from pathlib import Path

from .features import CONFIG_COLUMNS

# Measurements below this are dominated by launch latency and host timing,
# not by the kernels a profiled trace would show; they are neither trained
# on nor evaluated.
MIN_NS = 20_000

# NeuSight's latencies are host-timed: every (GPU, operator) has a floor, the
# 1st percentile of its rows (linear and bmm: 32-94 us, where the same
# configurations take 3-5 us on Hopper timed through CUDA graphs), that is
# the harness's dispatch time, not the kernel's (models/data_checks.py). With a factor f > 0, rows under f x their floor are
# neither trained on nor evaluated. Off (0) for the served model: dropping
# them (f = 1.5) moved held-out MAPE by less than changing the seed does
# (docs/kernel_varying_accuracy.md, "Stability").
DEFAULT_HARNESS_FLOOR_FACTOR = 0.0
HARNESS_FLOOR_PERCENTILE = 1

# Boards of one chip whose measurements stand for each other.
GPU_GROUPS = {"A100-PCIE-40GB": "A100", "A100-PCIE-80GB": "A100"}


def gpu_group(device_id):
    """The chip a device id stands for (itself unless in GPU_GROUPS)."""
    return GPU_GROUPS.get(device_id, device_id)


NEUSIGHT_OPS = {"linear": "linear", "bmm": "bmm", "conv": "conv2d"}
CUDNN_FAMILIES = ("conv2d", "conv_transpose2d", "lstm")


def _device_by_driver_name(devices):
    return {name: dev_id for dev_id, d in devices.items() for name in d["driver_names"]}


def neusight_config(family, row):
    """Our configuration columns from a NeuSight-style row (linear's batch is
    folded into the GEMM rows: the same GEMM)."""
    c = dict.fromkeys(CONFIG_COLUMNS, 0)
    if family == "linear":
        c.update(m=int(row["B"]) * int(row["M"]), n=int(row["N"]), k=int(row["K"]), bias=1)
    elif family == "bmm":
        c.update(b=int(row["B"]), m=int(row["M"]), n=int(row["N"]), k=int(row["K"]))
    else:
        c.update(b=int(row["B"]), c_in=int(row["Input_Channel"]),
                 c_out=int(row["Output_Channel"]), kernel=int(row["Kernel_Szie"]),
                 size=int(row["Input_Size"]), stride=int(row["Stride"]),
                 padding=int(row["Padding"]), bias=1)
    return c


def load_neusight(neusight_dir, devices):
    """Yields measurements of the public data set (median of repeats)."""
    by_name = _device_by_driver_name(devices)
    times = defaultdict(list)
    for op, family in NEUSIGHT_OPS.items():
        for path in sorted(Path(neusight_dir, "ops", op).glob("*.csv.gz")):
            with gzip.open(path, "rt") as f:
                for row in csv.DictReader(f):
                    device = by_name.get(row["Device"])
                    if device is None:
                        raise ValueError(f"{path}: GPU {row['Device']!r} is not in the device database")
                    config = neusight_config(family, row)
                    key = (family, tuple(config[c] for c in CONFIG_COLUMNS), device)
                    times[key].append(float(row["Latency"]) * 1e6)
    for (family, config, device), values in times.items():
        yield ("neusight", family, dict(zip(CONFIG_COLUMNS, config)), "fp32", False,
               device, statistics.median(values))


def load_neusight_configs(data_dir):
    """Our H100/H200 measurements of NeuSight's configurations. fp32 rows ran
    with TF32 off for cuBLAS and cuDNN (see each meta.json)."""
    for path in sorted(Path(data_dir).glob("*.csv.gz")):
        if path.name == "configs.csv.gz":
            continue
        device = path.name[: -len(".csv.gz")]
        meta = json.loads(path.with_name(f"{device}.meta.json").read_text())
        math = meta.get("math_settings", {})
        if math.get("torch.backends.cuda.matmul.allow_tf32") is not False or \
                math.get("torch.backends.cudnn.allow_tf32") is not False:
            raise ValueError(f"{path}: fp32 rows must be measured with TF32 off")
        with gzip.open(path, "rt") as f:
            for row in csv.DictReader(f):
                family = NEUSIGHT_OPS[row["op"]]
                config = neusight_config(family, row)
                mode = "bf16" if row["precision"] == "bf16" else "fp32"
                for backward, column in ((False, "forward_ns"), (True, "backward_ns")):
                    if row.get(column):
                        yield ("neusight", family, config, mode, backward, device, float(row[column]))


def own_mode(family, precision):
    """collect_ops.py ran PyTorch's defaults: cuDNN fp32 on TF32 tensor
    cores, cuBLAS fp32 on CUDA cores; bf16 autocast on bf16 tensor cores;
    tf32 (on request) lets cuBLAS use TF32 too."""
    if precision in ("bf16", "tf32"):
        return precision
    return "tf32" if family in CUDNN_FAMILIES else "fp32"


def load_own(data_dir):
    for path in sorted(Path(data_dir).glob("*.csv.gz")):
        device = path.name[: -len(".csv.gz")]
        with gzip.open(path, "rt") as f:
            for row in csv.DictReader(f):
                config = {c: int(row[c]) for c in CONFIG_COLUMNS}
                mode = own_mode(row["op"], row["precision"])
                for backward, column in ((False, "forward_ns"), (True, "backward_ns")):
                    yield ("habitat", row["op"], config, mode, backward, device, float(row[column]))


def harness_floors(rows):
    """{(source, family, mode, backward, device): the HARNESS_FLOOR_PERCENTILE
    percentile of its times}, for groups of at least 100 rows."""
    times = defaultdict(list)
    for source, family, _, mode, backward, device, ns in rows:
        times[(source, family, mode, backward, device)].append(ns)
    floors = {}
    for key, values in times.items():
        if len(values) >= 100:
            values.sort()
            floors[key] = values[len(values) * HARNESS_FLOOR_PERCENTILE // 100]
    return floors


def kernel_bound(rows, factor):
    """The rows at or above `factor` x their harness floor (all for 0)."""
    if factor <= 0:
        return rows
    floors = harness_floors(rows)
    return [r for r in rows if r[6] >= factor * floors.get((r[0], r[1], r[3], r[4], r[5]), 0.0)]


def measurements(neusight_dir, own_dir, devices,
                 harness_floor_factor=DEFAULT_HARNESS_FLOOR_FACTOR):
    rows = []
    if neusight_dir:
        rows += kernel_bound(list(load_neusight(neusight_dir, devices)), harness_floor_factor)
    rows += list(load_neusight_configs(Path(own_dir) / "neusight_configs"))
    rows += list(load_own(own_dir))
    return rows


def pairs(rows, gpu_group=lambda d: d):
    """Every ordered (origin, target) pair of GPUs that measured the same
    configuration, mode and pass. Both times must be >= MIN_NS."""
    by_key = defaultdict(dict)
    for source, family, config, mode, backward, device, ns in rows:
        key = (source, family, tuple(config[c] for c in CONFIG_COLUMNS), mode, backward)
        by_key[key][device] = ns
    out = []
    for (source, family, config, mode, backward), per_device in by_key.items():
        kept = {d: ns for d, ns in per_device.items() if ns >= MIN_NS}
        for origin, origin_ns in kept.items():
            for target, target_ns in kept.items():
                if gpu_group(origin) == gpu_group(target):
                    continue
                out.append({"source": source, "family": family,
                            "config": dict(zip(CONFIG_COLUMNS, config)),
                            "mode": mode, "backward": backward,
                            "origin": origin, "target": target,
                            "origin_ns": origin_ns, "target_ns": target_ns})
    return out
