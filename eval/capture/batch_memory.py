#!/usr/bin/env python3
"""Ground truth for batch-size and memory predictions, on the GPU at hand.

For each model of capture_fixtures.py, at the first of its fixture batches b
and at b/2, 2b and 4b, fp32 and bf16 autocast, one training iteration as the
fixtures run it (build_step):
  * memory allocated after the warm-up, between iterations (weights,
    gradients, optimizer state: what stays), and the peak allocated and
    reserved during one timed iteration (torch.cuda.max_memory_*);
  * the iteration's time with CUDA events (median of REPETITIONS) and its
    summed kernel time from torch.profiler (GPU time, as habitat sums it);
  * "oom" when the case does not fit, with the allocator's message.
Then, per model and precision, the largest power-of-two batch that runs,
doubling from b until one runs out of memory (or MAX_BATCH_FACTOR x b).

usage: batch_memory.py OUT.json [--models m1,m2] [--repetitions N]
                       [--no-largest | --largest-only [--largest-from F]]
--largest-only skips the cases at b/2 .. 4b; --largest-from F starts the
doubling at F x b (F a power of two) instead of b, when smaller batches are
known to fit (a larger GPU than one already measured).
Writes the JSON as it goes (one record per case), so a time-limited run
keeps what it measured.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import capture_fixtures as cf  # noqa: E402

FACTORS = (0.5, 1, 2, 4)
MAX_BATCH_FACTOR = 256
WARMUP = 3
PROFILED = 3


def is_oom(error: BaseException) -> bool:
    import torch
    return isinstance(error, torch.cuda.OutOfMemoryError) or "out of memory" in str(error)


def measure(model: str, batch: int, precision: str, repetitions: int) -> dict:
    import torch
    record = {"model": model, "batch": batch, "precision": precision}
    step = None
    try:
        torch.cuda.reset_peak_memory_stats()
        step = cf.build_step(model, batch, precision)
        for _ in range(WARMUP):
            step()
        torch.cuda.synchronize()
        record["allocated_between_iterations_bytes"] = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        step()
        torch.cuda.synchronize()
        record["peak_allocated_bytes"] = torch.cuda.max_memory_allocated()
        record["peak_reserved_bytes"] = torch.cuda.max_memory_reserved()
        wall, _ = cf.time_iterations(step, repetitions)
        record["wall_ns_median"] = int(statistics.median(wall))
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(PROFILED):
                step()
            torch.cuda.synchronize()
        kernel_us = sum(e.self_device_time_total for e in prof.key_averages())
        record["gpu_time_ns_mean"] = int(round(kernel_us * 1000 / PROFILED))
        record["status"] = "ok"
    except Exception as error:  # noqa: BLE001 - an OOM is a result here
        if not is_oom(error):
            raise
        record["status"] = "oom"
        record["message"] = str(error).splitlines()[0][:300]
    finally:
        del step
        cf._free_cuda()
    return record


def largest_fitting(model: str, batch: int, precision: str, start_factor: int = 1) -> dict:
    fits, tried = None, batch * start_factor
    while tried <= batch * MAX_BATCH_FACTOR:
        record = measure(model, tried, precision, repetitions=3)
        if record["status"] != "ok":
            return {"model": model, "precision": precision, "largest_fitting_batch": fits,
                    "first_oom_batch": tried, "oom_message": record.get("message", "")}
        fits, tried = tried, tried * 2
    return {"model": model, "precision": precision, "largest_fitting_batch": fits,
            "first_oom_batch": None}


def main() -> int:
    import torch
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--models", default=",".join(cf.BATCHES))
    parser.add_argument("--repetitions", type=int, default=20)
    parser.add_argument("--no-largest", action="store_true")
    parser.add_argument("--largest-only", action="store_true")
    parser.add_argument("--largest-from", type=int, default=1)
    args = parser.parse_args()
    if args.largest_from < 1 or args.largest_from & (args.largest_from - 1):
        parser.error(f"--largest-from must be a power of two, got {args.largest_from}")
    result = {
        "gpu": torch.cuda.get_device_name(),
        "total_memory_bytes": torch.cuda.get_device_properties(0).total_memory,
        "torch": torch.__version__,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": " ".join(sys.argv),
        "cases": [],
        "largest": [],
    }

    def save():
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)

    for model in [] if args.largest_only else args.models.split(","):
        base = cf.BATCHES[model][0]
        for precision in cf.PRECISIONS:
            for factor in FACTORS:
                t0 = time.time()
                record = measure(model, max(1, int(base * factor)), precision, args.repetitions)
                record["seconds"] = round(time.time() - t0, 1)
                result["cases"].append(record)
                print(json.dumps(record), flush=True)
                save()
    if not args.no_largest:
        for model in args.models.split(","):
            for precision in cf.PRECISIONS:
                t0 = time.time()
                record = largest_fitting(model, cf.BATCHES[model][0], precision,
                                         args.largest_from)
                record["seconds"] = round(time.time() - t0, 1)
                result["largest"].append(record)
                print(json.dumps(record), flush=True)
                save()
    return 0


if __name__ == "__main__":
    sys.exit(main())
