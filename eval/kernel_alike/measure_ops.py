"""Measures NeuSight-style operator latencies and CUPTI kernel durations on
the local GPU, for the kernel-scaling constants of data/devices.textproto.

For each operator and each (B, H) configuration listed in --configs (one
"B,H" per line: the configurations of the NeuSight data set), it records
  * Latency: host-timed latency in ms, the mean of --reps back-to-back runs
    between two CUDA events after --warmup runs (as NeuSight timed its ops);
  * Kernel Duration: the operator kernel's own GPU time in ms (CUPTI, through
    torch.profiler), the mean of 3 profiled runs;
  * the kernel's name, grid and block.
Writes one NeuSight-format CSV per operator to OUT/ops/<op>/<device>.csv.gz,
so eval/kernel_alike can read it.

  python3 measure_ops.py --configs configs.txt --out DIR
"""
import argparse
import csv
import gzip
import json
import os
import tempfile

import torch
from torch.profiler import ProfilerActivity, profile

OPS = {
    "add": lambda x, y: x + y,
    "mulu": lambda x, y: x * 2.0,
    "relu": lambda x, y: torch.relu(x),
    "gelu": lambda x, y: torch.nn.functional.gelu(x),
    "ln": None,  # built per H
    "softmax": lambda x, y: torch.softmax(x, dim=-1),
}


def profile_configs(op, configs, make_fn, runs):
    """One profiler session over all configurations (a trace export per
    configuration would take longer than the measurements). Each kernel is
    attributed to the configuration whose record_function range contains the
    host call that launched it (matched by CUPTI correlation id)."""
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for i, (b, h) in enumerate(configs):
            fn = make_fn(b, h)
            torch.cuda.synchronize()
            with torch.profiler.record_function(f"cfg{i}"):
                for _ in range(runs):
                    fn()
                torch.cuda.synchronize()
            del fn
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        path = f.name
    prof.export_chrome_trace(path)
    with open(path) as f:
        events = json.load(f)["traceEvents"]
    os.unlink(path)
    ranges = sorted((e["ts"], e["ts"] + e["dur"], int(e["name"][3:]))
                    for e in events
                    if e.get("cat") == "user_annotation" and e.get("name", "").startswith("cfg"))
    launch_ts = {e["args"]["correlation"]: e["ts"] for e in events
                 if e.get("cat") == "cuda_runtime" and "correlation" in e.get("args", {})}
    per_cfg = [[] for _ in configs]
    for e in events:
        if e.get("cat") != "kernel":
            continue
        ts = launch_ts.get(e["args"].get("correlation"))
        if ts is None:
            continue
        for lo, hi, i in ranges:
            if lo <= ts <= hi:
                per_cfg[i].append(e)
                break
    return per_cfg


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--configs", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--ops", default=",".join(OPS))
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--reps", type=int, default=30)
    args = ap.parse_args()
    configs = [tuple(int(v) for v in l.split(",")) for l in open(args.configs) if l.strip()]
    device = torch.cuda.get_device_name(0)
    torch.backends.cudnn.benchmark = False
    norms = {}

    def make_fn(op, b, h):
        x = torch.randn(b, h, device="cuda")
        y = torch.randn(b, h, device="cuda")
        if op == "ln":
            if h not in norms:
                norms[h] = torch.nn.LayerNorm(h, device="cuda")
            norm = norms[h]
            return lambda: norm(x)
        f = OPS[op]
        return lambda: f(x, y)

    for op in args.ops.split(","):
        latencies = []
        with torch.no_grad():
            for b, h in configs:
                fn = make_fn(op, b, h)
                for _ in range(args.warmup):
                    fn()
                torch.cuda.synchronize()
                start = torch.cuda.Event(enable_timing=True)
                end = torch.cuda.Event(enable_timing=True)
                start.record()
                for _ in range(args.reps):
                    fn()
                end.record()
                torch.cuda.synchronize()
                latencies.append(start.elapsed_time(end) / args.reps)
                del fn
            per_cfg = profile_configs(op, configs, lambda b, h: make_fn(op, b, h), 3)
        rows = []
        for (b, h), latency_ms, ks in zip(configs, latencies, per_cfg):
            if not ks:
                raise SystemExit(f"{op} {b}x{h}: no kernel recorded")
            # The operator's kernel: the longest one.
            main_name = max(ks, key=lambda e: e["dur"])["name"]
            mine = [e for e in ks if e["name"] == main_name]
            dur_ms = sum(e["dur"] for e in mine) / len(mine) / 1e3
            grid = mine[0]["args"].get("grid", [0, 0, 0])
            block = mine[0]["args"].get("block", [0, 0, 0])
            rows.append([op, latency_ms, device, torch.__version__, main_name,
                         *grid, *block, dur_ms, len(ks) / 3, b, h])
        d = os.path.join(args.out, "ops", op)
        os.makedirs(d, exist_ok=True)
        with gzip.open(os.path.join(d, device.replace(" ", "_") + ".csv.gz"), "wt", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(["OPName", "Latency", "Device", "Torch Version", "Kernel Name",
                        "Grid x", "Grid y", "Grid z", "Block x", "Block y", "Block z",
                        "Kernel Duration", "Kernels per run", "B", "H"])
            w.writerows(rows)
        print(op, len(rows), "rows", flush=True)


if __name__ == "__main__":
    main()
