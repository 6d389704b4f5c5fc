"""Loads operator measurements and pairs them across GPUs.

Sources:
- NeuSight's public cross-GPU measurements (../shared/data/neusight, MIT
  licence, github.com/sitar-lab/NeuSight): linear, bmm, conv forward in fp32
  on P4, P100, T4, V100 and A100. Read in place, never copied.
- Our own measurements (models/data/*.csv.gz, written by
  models/collect/collect_ops.py on an H100 SXM and an H200): six families,
  fp32 and bf16, forward and backward.
"""
import csv
import gzip
import statistics
from collections import defaultdict
from pathlib import Path

from .features import CONFIG_COLUMNS

# Measurements below this are dominated by launch latency and host timing
# (both sources time with CUDA events around launches), not by the kernels a
# profiled trace would show; they are neither trained on nor evaluated.
MIN_NS = 20_000

NEUSIGHT_OPS = {"linear": "linear", "bmm": "bmm", "conv": "conv2d"}


def _device_by_driver_name(devices):
    return {name: dev_id for dev_id, d in devices.items() for name in d["driver_names"]}


def _neusight_config(family, row):
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
    """Yields (source, family, config, precision, backward, device_id, ns)."""
    by_name = _device_by_driver_name(devices)
    times = defaultdict(list)
    for op, family in NEUSIGHT_OPS.items():
        for path in sorted(Path(neusight_dir, "ops", op).glob("*.csv.gz")):
            with gzip.open(path, "rt") as f:
                for row in csv.DictReader(f):
                    device = by_name.get(row["Device"])
                    if device is None:
                        raise ValueError(f"{path}: GPU {row['Device']!r} is not in the device database")
                    config = _neusight_config(family, row)
                    key = (family, tuple(config[c] for c in CONFIG_COLUMNS), device)
                    times[key].append(float(row["Latency"]) * 1e6)
    for (family, config, device), values in times.items():
        yield ("neusight", family, dict(zip(CONFIG_COLUMNS, config)), "fp32", False,
               device, statistics.median(values))


def load_own(data_dir):
    for path in sorted(Path(data_dir).glob("*.csv.gz")):
        device = path.name[: -len(".csv.gz")]
        with gzip.open(path, "rt") as f:
            for row in csv.DictReader(f):
                config = {c: int(row[c]) for c in CONFIG_COLUMNS}
                for backward, column in ((False, "forward_ns"), (True, "backward_ns")):
                    yield ("habitat", row["op"], config, row["precision"], backward,
                           device, float(row[column]))


def measurements(neusight_dir, own_dir, devices):
    rows = []
    if neusight_dir:
        rows += list(load_neusight(neusight_dir, devices))
    rows += list(load_own(own_dir))
    return rows


def pairs(rows, gpu_group=lambda d: d):
    """Every ordered (origin, target) pair of GPUs that measured the same
    configuration, precision and pass. Both times must be >= MIN_NS."""
    by_key = defaultdict(dict)
    for source, family, config, precision, backward, device, ns in rows:
        key = (source, family, tuple(config[c] for c in CONFIG_COLUMNS), precision, backward)
        by_key[key][device] = ns
    out = []
    for (source, family, config, precision, backward), per_device in by_key.items():
        kept = {d: ns for d, ns in per_device.items() if ns >= MIN_NS}
        for origin, origin_ns in kept.items():
            for target, target_ns in kept.items():
                if gpu_group(origin) == gpu_group(target):
                    continue
                out.append({"source": source, "family": family,
                            "config": dict(zip(CONFIG_COLUMNS, config)),
                            "precision": precision, "backward": backward,
                            "origin": origin, "target": target,
                            "origin_ns": origin_ns, "target_ns": target_ns})
    return out
