#!/usr/bin/env python3
"""Sustained dense GEMM throughput of the GPU this runs on, per math mode,
as the spec database's measured_*_gemm_tflops fields mean it: square
torch.mm on tensors already in the compute dtype, timed with CUDA events
after warm-up, the median of several groups of back-to-back calls.

    python3 models/collect/measure_gemm_throughput.py --out RESULT.json

Also times the large 8-aligned bf16 linear configurations of our own
collection (models/data/<gpu>.csv.gz) twice: as collect_ops.py does (fp32
module and input under autocast, cast cache off) and on bf16 tensors
without casts, to show how much of those rows is the casts.

Reads the clocks and power limit with nvidia-smi; changes nothing.
"""
import argparse
import json
import statistics
import subprocess
import time

import torch

SIZES = (4096, 8192, 16384)
MODES = ("fp32", "tf32", "fp16", "bf16")
GROUPS = 7
WARMUP_S = 2.0
GROUP_S = 0.5
# The 8-aligned bf16 forward linears of models/data/H100-SXM.csv.gz whose
# sustained roofline is at least 100 us (m, n, k; all with bias).
ALIGNED_BF16_LINEARS = ((9344, 1408, 4160), (2616, 3520, 8128), (21888, 256, 11520),
                        (10560, 11136, 1408), (17024, 192, 10880))


def timed(fn):
    """Median ns per call over GROUPS groups, after WARMUP_S of calls."""
    fn()
    torch.cuda.synchronize()
    start = time.time()
    calls = 0
    while time.time() - start < WARMUP_S:
        fn()
        calls += 1
        if calls % 8 == 0:
            torch.cuda.synchronize()
    torch.cuda.synchronize()
    per_call = (time.time() - start) / max(calls, 1)
    reps = max(1, min(500, int(GROUP_S / max(per_call, 1e-7))))
    times = []
    for _ in range(GROUPS):
        begin = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        begin.record()
        for _ in range(reps):
            fn()
        end.record()
        end.synchronize()
        times.append(begin.elapsed_time(end) * 1e6 / reps)
    return statistics.median(times), min(times), max(times), reps


def set_mode(mode):
    torch.backends.cuda.matmul.allow_tf32 = mode == "tf32"
    torch.backends.cudnn.allow_tf32 = mode == "tf32"


def square(mode, n):
    set_mode(mode)
    dtype = {"fp32": torch.float32, "tf32": torch.float32, "fp16": torch.float16,
             "bf16": torch.bfloat16}[mode]
    a = torch.randn(n, n, device="cuda", dtype=dtype)
    b = torch.randn(n, n, device="cuda", dtype=dtype)
    out = torch.empty(n, n, device="cuda", dtype=dtype)
    median, low, high, reps = timed(lambda: torch.mm(a, b, out=out))
    flop = 2.0 * n ** 3
    return {"mode": mode, "n": n, "median_ns": median, "min_ns": low, "max_ns": high,
            "reps": reps, "tflops": flop / median / 1e3}


def aligned_linear(m, n, k):
    set_mode("fp32")
    flop = 2.0 * m * n * k
    linear = torch.nn.Linear(k, n, device="cuda")
    x = torch.randn(m, k, device="cuda")

    def with_casts():
        with torch.autocast("cuda", dtype=torch.bfloat16, cache_enabled=False):
            return linear(x)

    with_casts_ns = timed(with_casts)[0]
    weight, bias, xb = (t.detach().to(torch.bfloat16) for t in (linear.weight, linear.bias, x))
    no_casts_ns = timed(lambda: torch.nn.functional.linear(xb, weight, bias))[0]
    return {"m": m, "n": n, "k": k, "autocast_from_fp32_ns": with_casts_ns,
            "bf16_tensors_ns": no_casts_ns,
            "autocast_tflops": flop / with_casts_ns / 1e3,
            "bf16_tflops": flop / no_casts_ns / 1e3}


def smi(query):
    try:
        return subprocess.run(["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError) as error:
        return f"unavailable: {error}"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    args = p.parse_args()
    fields = "name,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu"
    result = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__,
              "cuda": torch.version.cuda, "smi_before": smi(fields),
              "started_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
              "square": [], "aligned_bf16_linears": []}
    for mode in MODES:
        for n in SIZES:
            row = square(mode, n)
            result["square"].append(row)
            print(json.dumps(row), flush=True)
    for m, n, k in ALIGNED_BF16_LINEARS:
        row = aligned_linear(m, n, k)
        result["aligned_bf16_linears"].append(row)
        print(json.dumps(row), flush=True)
    result["smi_after"] = smi(fields)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
