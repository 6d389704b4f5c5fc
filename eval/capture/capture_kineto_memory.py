#!/usr/bin/env python3
"""Real torch.profiler traces with memory events, for the Kineto import's
memory check (core/kineto/kineto_import_test.cc, KinetoMemoryTest).

For each case, a few warm-up iterations, then torch.profiler with
profile_memory=True and record_shapes=True over wait 1 / warmup 1 / active 1
steps. Around the active step, torch's own allocator statistics are read:
memory_allocated() before it (after reset_peak_memory_stats()) and
max_memory_allocated() / max_memory_reserved() after it: what the import
must reproduce from the trace's [memory] events alone.

    python3 eval/capture/capture_kineto_memory.py --out DIR [--cases resnet50_b16_fp32,...]

Writes DIR/<case>.json.gz (the whole exported trace, gzip with a fixed
mtime) and DIR/measurements.json. Needs torch, torchvision, transformers
and a GPU; about 30 s on an H100.
"""
import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import capture_fixtures as cf  # noqa: E402

DEFAULT_CASES = ("resnet50_b16_fp32", "gpt2_b4_bf16")
WARMUP = 3


def parse_case(name):
    model, batch, precision = name.rsplit("_", 2)
    return model, int(batch[1:]), precision


def capture(name, out_dir):
    import torch
    from torch.profiler import ProfilerActivity, profile, schedule

    model, batch, precision = parse_case(name)
    step = cf.build_step(model, batch, precision)
    for _ in range(WARMUP):
        step()
    torch.cuda.synchronize()
    raw = out_dir / f"{name}.raw.json"
    measured = {}
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
                 schedule=schedule(wait=1, warmup=1, active=1, repeat=1),
                 record_shapes=True, profile_memory=True,
                 on_trace_ready=lambda p: p.export_chrome_trace(str(raw))) as prof:
        for i in range(3):
            if i == 2:  # the active step
                torch.cuda.reset_peak_memory_stats()
                measured["allocated_bytes_at_start"] = torch.cuda.memory_allocated()
            step()
            torch.cuda.synchronize()
            if i == 2:
                measured["peak_allocated_bytes"] = torch.cuda.max_memory_allocated()
                measured["peak_reserved_bytes"] = torch.cuda.max_memory_reserved()
            prof.step()
    trace = json.loads(raw.read_text())
    raw.unlink()
    measured["trace_bytes_gz"] = cf.write_json_gz(out_dir / f"{name}.json.gz", trace)
    measured["memory_events"] = sum(1 for e in trace.get("traceEvents", [])
                                    if e.get("name") == "[memory]")
    return measured


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--cases", default=",".join(DEFAULT_CASES))
    args = p.parse_args()
    import torch

    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    result = {"script": "eval/capture/capture_kineto_memory.py",
              "started_utc": cf.utc_now(), "gpu": torch.cuda.get_device_name(),
              "torch": torch.__version__, "cases": {}}
    for name in args.cases.split(","):
        started = time.time()
        result["cases"][name] = capture(name, out_dir)
        result["cases"][name]["seconds"] = round(time.time() - started, 1)
        cf.log(f"{name}: {result['cases'][name]}")
    (out_dir / "measurements.json").write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
