#!/usr/bin/env python3
"""Measures kernel-varying operators on the GPU of this machine.

    collect_ops.py --out DIR [--budget-s 360] [--seed 1] [--ops conv2d,...]

Samples operator configurations with a fixed seed (so every GPU measures the
same list, in the same order), and for each configuration and precision
(fp32, bf16) measures the forward and the backward time with CUDA events:
R CUDA-graph replays back to back between two events, median over groups,
after warm-up. Graph replays make the number the GPU time of the op (what a
profiled trace records as the sum of its kernels) rather than the launch rate
of this machine's host, which differs between the machines we compare. Writes DIR/<gpu_tag>.csv.gz and DIR/<gpu_tag>.meta.json.

Configuration ranges follow the paper (Yu et al., ATC'21, §4.3.1) widened to
shapes of today's CNNs and transformers.
"""
import argparse
import csv
import gzip
import json
import math
import random
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

OPS = ("linear", "bmm", "conv2d", "conv_transpose2d", "lstm", "sdpa")
PRECISIONS = ("fp32", "bf16")
# On request (--precisions): fp32 tensors with TF32 matmuls
# (torch.set_float32_matmul_precision("high")).
EXTRA_PRECISIONS = ("tf32",)
# Columns of the configuration, shared by all ops; unused ones are 0.
CONFIG_COLUMNS = ("b", "m", "n", "k", "c_in", "c_out", "kernel", "stride",
                  "padding", "size", "heads", "seq", "head_dim", "layers",
                  "causal", "bias")
MAX_FLOP = 4e11          # skip configurations that would take > ~10 ms in fp32
MAX_BYTES = 6e9          # and those that need too much memory
TARGET_GROUP_S = 2e-3    # each timed group lasts about this long
GROUPS = 5


def log_uniform_int(rng, lo, hi):
    return int(round(math.exp(rng.uniform(math.log(lo), math.log(hi)))))


def maybe_round(rng, value, multiple=64):
    # Half the dimensions are multiples of 64, as in real models.
    if rng.random() < 0.5 and value >= multiple:
        return int(round(value / multiple)) * multiple
    return value


def sample_config(rng, op):
    c = dict.fromkeys(CONFIG_COLUMNS, 0)
    if op == "linear":
        c["m"] = maybe_round(rng, log_uniform_int(rng, 1, 32768))
        c["k"] = maybe_round(rng, log_uniform_int(rng, 16, 12288))
        c["n"] = maybe_round(rng, log_uniform_int(rng, 16, 12288))
        c["bias"] = int(rng.random() < 0.8)
    elif op == "bmm":
        c["b"] = log_uniform_int(rng, 1, 512)
        c["m"] = maybe_round(rng, log_uniform_int(rng, 16, 4096))
        c["n"] = maybe_round(rng, log_uniform_int(rng, 16, 4096))
        c["k"] = maybe_round(rng, log_uniform_int(rng, 16, 4096))
    elif op in ("conv2d", "conv_transpose2d"):
        c["b"] = log_uniform_int(rng, 1, 128)
        c["c_in"] = maybe_round(rng, log_uniform_int(rng, 3, 1024), 32)
        c["c_out"] = maybe_round(rng, log_uniform_int(rng, 8, 1024), 32)
        if op == "conv2d":
            c["kernel"] = rng.choice((1, 1, 3, 3, 3, 5, 7))
            c["stride"] = rng.choice((1, 1, 1, 2))
            c["padding"] = rng.choice((0, c["kernel"] // 2, c["kernel"] // 2))
            c["size"] = log_uniform_int(rng, 7, 256)
            c["size"] = max(c["size"], c["kernel"])
        else:
            c["kernel"] = rng.choice((2, 3, 4, 4, 4))
            c["stride"] = rng.choice((1, 2, 2, 2))
            c["padding"] = rng.choice((0, 1))
            c["size"] = log_uniform_int(rng, 1, 128)
        c["bias"] = int(rng.random() < 0.5)
    elif op == "lstm":
        c["b"] = log_uniform_int(rng, 1, 256)
        c["seq"] = log_uniform_int(rng, 4, 256)
        c["k"] = maybe_round(rng, log_uniform_int(rng, 32, 2048))   # input size
        c["n"] = maybe_round(rng, log_uniform_int(rng, 32, 2048))   # hidden size
        c["layers"] = rng.choice((1, 1, 2, 4))
        c["bias"] = 1
    elif op == "sdpa":
        c["b"] = log_uniform_int(rng, 1, 64)
        c["heads"] = rng.choice((1, 4, 8, 12, 16, 32))
        c["seq"] = maybe_round(rng, log_uniform_int(rng, 16, 8192))
        c["head_dim"] = rng.choice((32, 64, 64, 80, 96, 128, 128))
        c["causal"] = int(rng.random() < 0.5)
    return c


def conv_out(size, kernel, stride, padding):
    return (size + 2 * padding - kernel) // stride + 1


def cost(op, c):
    """(FLOP of the forward, bytes of its inputs+outputs in fp32)."""
    if op == "linear":
        return 2 * c["m"] * c["n"] * c["k"], 4 * (c["m"] * c["k"] + c["k"] * c["n"] + c["m"] * c["n"])
    if op == "bmm":
        return (2 * c["b"] * c["m"] * c["n"] * c["k"],
                4 * c["b"] * (c["m"] * c["k"] + c["k"] * c["n"] + c["m"] * c["n"]))
    if op == "conv2d":
        o = conv_out(c["size"], c["kernel"], c["stride"], c["padding"])
        if o < 1:
            return None
        return (2 * c["b"] * c["c_out"] * o * o * c["c_in"] * c["kernel"] ** 2,
                4 * (c["b"] * c["c_in"] * c["size"] ** 2 + c["b"] * c["c_out"] * o * o))
    if op == "conv_transpose2d":
        if c["padding"] >= c["kernel"]:
            return None
        o = (c["size"] - 1) * c["stride"] - 2 * c["padding"] + c["kernel"]
        return (2 * c["b"] * c["c_in"] * c["size"] ** 2 * c["c_out"] * c["kernel"] ** 2,
                4 * (c["b"] * c["c_in"] * c["size"] ** 2 + c["b"] * c["c_out"] * o * o))
    if op == "lstm":
        per_step = 8 * c["b"] * c["n"] * (c["k"] + c["n"])
        deeper = 8 * c["b"] * c["n"] * (2 * c["n"]) * (c["layers"] - 1)
        return (c["seq"] * (per_step + deeper),
                4 * c["seq"] * c["b"] * (c["k"] + c["n"]) * 4 * c["layers"])
    if op == "sdpa":
        frac = 0.5 if c["causal"] else 1.0
        flop = 4 * c["b"] * c["heads"] * c["seq"] ** 2 * c["head_dim"] * frac
        return flop, 4 * 4 * c["b"] * c["heads"] * c["seq"] * c["head_dim"]
    raise ValueError(op)


def build(op, c, dtype):
    """Returns (forward closure, tensors needing grad). Modules are created in
    fp32 and run under autocast for bf16, as users' training loops do."""
    dev = "cuda"
    if op == "linear":
        mod = torch.nn.Linear(c["k"], c["n"], bias=bool(c["bias"]), device=dev)
        x = torch.randn(c["m"], c["k"], device=dev, requires_grad=True)
        return (lambda: mod(x)), [x] + list(mod.parameters())
    if op == "bmm":
        a = torch.randn(c["b"], c["m"], c["k"], device=dev, requires_grad=True)
        b = torch.randn(c["b"], c["k"], c["n"], device=dev, requires_grad=True)
        return (lambda: torch.bmm(a, b)), [a, b]
    if op == "conv2d":
        mod = torch.nn.Conv2d(c["c_in"], c["c_out"], c["kernel"], c["stride"],
                              c["padding"], bias=bool(c["bias"]), device=dev)
        x = torch.randn(c["b"], c["c_in"], c["size"], c["size"], device=dev, requires_grad=True)
        return (lambda: mod(x)), [x] + list(mod.parameters())
    if op == "conv_transpose2d":
        mod = torch.nn.ConvTranspose2d(c["c_in"], c["c_out"], c["kernel"], c["stride"],
                                       c["padding"], bias=bool(c["bias"]), device=dev)
        x = torch.randn(c["b"], c["c_in"], c["size"], c["size"], device=dev, requires_grad=True)
        return (lambda: mod(x)), [x] + list(mod.parameters())
    if op == "lstm":
        mod = torch.nn.LSTM(c["k"], c["n"], num_layers=c["layers"], device=dev)
        x = torch.randn(c["seq"], c["b"], c["k"], device=dev, requires_grad=True)
        return (lambda: mod(x)[0]), [x] + list(mod.parameters())
    if op == "sdpa":
        shape = (c["b"], c["heads"], c["seq"], c["head_dim"])
        # Attention inputs are already in the compute dtype in real models.
        q, k, v = (torch.randn(shape, device=dev, dtype=dtype, requires_grad=True)
                   for _ in range(3))
        causal = bool(c["causal"])
        return (lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal)), [q, k, v]
    raise ValueError(op)


def time_groups(fn, reps):
    times = []
    for _ in range(GROUPS):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(reps):
            fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e6 / reps)  # ns per launch
    return statistics.median(times)


def calibrate(fn):
    fn()
    torch.cuda.synchronize()
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    end.synchronize()
    one = max(start.elapsed_time(end) * 1e-3, 1e-6)
    return max(1, min(200, int(TARGET_GROUP_S / one)))


def capture(fn):
    """A CUDA graph of fn (warmed up on a side stream, as capture requires)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return graph


def measure(op, c, precision):
    """Forward and backward GPU time of one configuration.

    Both are timed as CUDA-graph replays, so the number is what the kernels
    take (a profiled trace's pass time), not how fast this host launches
    them: graph A runs the forward, graph B forward + backward, and the
    backward is B - A. Falls back to eager launches when capture fails."""
    torch.set_float32_matmul_precision("high" if precision == "tf32" else "highest")
    dtype = torch.bfloat16 if precision == "bf16" else torch.float32
    fwd, needs_grad = build(op, c, dtype)
    out = fwd()
    grad = torch.randn_like(out if dtype == torch.float32 else out.float()).to(out.dtype)
    del out

    # cache_enabled=False: casts happen on every call, as in a training step.
    def forward():
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=precision == "bf16",
                            cache_enabled=False):
            return fwd()

    def forward_backward():
        out = forward()
        torch.autograd.grad(out, needs_grad, grad.to(out.dtype))

    try:
        graphs = (capture(forward), capture(forward_backward))
        runs = (graphs[0].replay, graphs[1].replay)
        graphed = 1
    except RuntimeError:
        torch.cuda.synchronize()
        runs = (forward, forward_backward)
        graphed = 0
    times = []
    for run in runs:
        reps = calibrate(run)
        times.append(time_groups(run, reps))
    return times[0], max(times[1] - times[0], 0.0), graphed


def gpu_tag():
    name = torch.cuda.get_device_name(0)
    if "H200" in name:
        return "H200"
    if "H100" in name:
        return "H100-SXM" if "HBM3" in name else "H100"
    return name.replace(" ", "_")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--budget-s", type=float, default=360)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--per-op", type=int, default=4000)
    p.add_argument("--ops", default=",".join(OPS))
    p.add_argument("--precisions", default=",".join(PRECISIONS),
                   help=f"of {', '.join(PRECISIONS + EXTRA_PRECISIONS)}")
    args = p.parse_args()
    precisions = args.precisions.split(",")
    unknown = set(precisions) - set(PRECISIONS + EXTRA_PRECISIONS)
    if unknown:
        p.error(f"unknown precision(s) {', '.join(sorted(unknown))}: "
                f"choose from {', '.join(PRECISIONS + EXTRA_PRECISIONS)}")
    ops = args.ops.split(",")
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    tag = gpu_tag()
    # One list per op, fixed by the seed; measured round-robin so a budget
    # cut leaves every op with a prefix of its list (identical across GPUs).
    lists = {}
    for op in ops:
        rng = random.Random(f"{args.seed}-{op}")
        configs = []
        while len(configs) < args.per_op:
            c = sample_config(rng, op)
            fc = cost(op, c)
            if fc is None or fc[0] > MAX_FLOP or fc[1] > MAX_BYTES:
                continue
            configs.append(c)
        lists[op] = configs
    torch.backends.cudnn.benchmark = False
    deadline = time.monotonic() + args.budget_s
    rows, failures = [], 0
    path = out_dir / f"{tag}.csv.gz"
    index = 0
    while time.monotonic() < deadline and index < args.per_op:
        for op in ops:
            c = lists[op][index]
            for precision in precisions:
                if time.monotonic() >= deadline:
                    break
                try:
                    fwd_ns, bwd_ns, graphed = measure(op, c, precision)
                except (RuntimeError, torch.cuda.OutOfMemoryError) as error:
                    failures += 1
                    if failures <= 20:
                        print(f"skip {op} {c} {precision}: {str(error)[:120]}", file=sys.stderr)
                    torch.cuda.empty_cache()
                    continue
                rows.append([op, index, precision] + [c[k] for k in CONFIG_COLUMNS] +
                            [int(round(fwd_ns)), int(round(bwd_ns)), graphed])
        index += 1
        if index % 100 == 0:
            print(f"{time.monotonic() - deadline + args.budget_s:.0f}s index {index} rows {len(rows)}",
                  flush=True)
            torch.cuda.empty_cache()
    with gzip.open(path, "wt", newline="") as f:
        w = csv.writer(f)
        w.writerow(["op", "config_index", "precision", *CONFIG_COLUMNS, "forward_ns", "backward_ns", "graphed"])
        w.writerows(rows)
    props = torch.cuda.get_device_properties(0)
    meta = {
        "gpu": tag, "device_name": torch.cuda.get_device_name(0),
        "sm_count": props.multi_processor_count,
        "torch": torch.__version__, "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version(),
        "precisions": precisions,
        "allow_tf32_matmul": torch.backends.cuda.matmul.allow_tf32,
        "allow_tf32_cudnn": torch.backends.cudnn.allow_tf32,
        "seed": args.seed, "configs_per_op_measured": index, "rows": len(rows),
        "failures": failures, "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "method": f"median of {GROUPS} groups of back-to-back CUDA-graph replays (~"
                  f"{TARGET_GROUP_S*1e3:.0f} ms each) between CUDA events, after warm-up; "
                  "forward = graph of the op; backward = graph of op + torch.autograd.grad of "
                  "its output w.r.t. inputs and parameters, minus the forward; graphed=0 rows "
                  "fell back to eager launches (capture failed)",
    }
    (out_dir / f"{tag}.meta.json").write_text(json.dumps(meta, indent=1))
    print(json.dumps(meta))
    return 0


if __name__ == "__main__":
    sys.exit(main())
