#!/usr/bin/env python3
"""The host work DistributedDataParallel adds to a step, on one GPU.

DDP over a one-rank NCCL group runs all of its per-step machinery (the
buffer broadcast before the forward, an autograd hook per parameter that
copies its gradient into a bucket, a launch per bucket, the copy of each
reduced bucket back into .grad) with no second GPU to wait for. For each
of the project's workloads (eval/capture/capture_fixtures.build_step) this
times, in one process, the plain step and four DDP variants that switch
parts of that machinery off:

    plain      no DDP
    ddp        DDP defaults (bucket 25 MB, broadcast_buffers, copies)
    view       gradient_as_bucket_view=True: no gradient copies
    nobuf      broadcast_buffers=False: no buffer broadcast
    bare       both

Per variant: the host time to issue a step (perf_counter from the call to
its return; where a step waits for the GPU inside, as the Transformer's,
GNMT's and ViT's do, that wait counts too), the CUDA-event step time, and
from one profiled step the kernels it ran. The differences
between variants give the host cost per gradient copy, per buffer and per
step that core/predict/ddp_prediction.h uses.

    python3 eval/multi_gpu/ddp_host_cost.py --out /tmp/ddp_host.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "eval" / "capture"))
sys.path.insert(0, str(HERE))

import capture_fixtures as cf  # noqa: E402
import measure_ddp as md  # noqa: E402

VARIANTS = {"plain": None,
            "ddp": {},
            "view": {"gradient_as_bucket_view": True},
            "nobuf": {"broadcast_buffers": False},
            "bare": {"gradient_as_bucket_view": True, "broadcast_buffers": False}}


def count_kernels(step) -> int:
    import torch
    from torch.profiler import ProfilerActivity, profile
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        step()
        torch.cuda.synchronize()
    return sum(1 for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA)


def time_variant(step, warmup: int, iters: int) -> dict:
    import torch
    for _ in range(warmup):
        step()
    torch.cuda.synchronize()
    host, gpu = [], []
    for _ in range(iters):
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        h0 = time.perf_counter_ns()
        start.record()
        step()
        h1 = time.perf_counter_ns()
        end.record()
        end.synchronize()
        host.append(h1 - h0)
        gpu.append(start.elapsed_time(end) * 1e6)
    return {"host_issue_ns": int(statistics.median(host)),
            "step_ns": int(statistics.median(gpu)),
            "host_issue_p10_ns": int(sorted(host)[len(host) // 10]),
            "host_issue_p90_ns": int(sorted(host)[len(host) * 9 // 10])}


def run_case(model: str, precision: str, sequence, warmup: int, iters: int) -> dict:
    from torch.nn.parallel import DistributedDataParallel as DDP
    out = {"model": model, "batch": md.BATCH[model], "precision": precision, "variants": {}}
    for position, name in enumerate(sequence):
        kwargs = VARIANTS[name]
        step = cf.build_step(model, md.BATCH[model], precision, device="cuda:0")
        cells = md.module_cells(step)
        modules = [c.cell_contents for c in cells]
        if kwargs is not None:
            for cell in cells:
                cell.cell_contents = DDP(cell.cell_contents, device_ids=[0], **kwargs)
        rec = time_variant(step, warmup, iters)
        rec["kernels"] = count_kernels(step)
        out["variants"][f"{position}:{name}"] = rec
        out["params"] = md.parameter_stats(modules)
        out["buffers"] = sum(1 for m in modules for _ in m.buffers())
        out["ddp_modules"] = len(cells)
        del step, cells, modules
        md._free_cuda()
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True)
    p.add_argument("--gpu", default="h100", help="the GPU's tag in the output")
    p.add_argument("--models", default=",".join(md.MODELS))
    p.add_argument("--precisions", default="fp32,bf16")
    p.add_argument("--sequence", default=",".join(VARIANTS),
                   help="variants in the order run, repeats allowed (plain again after "
                        "DDP tells whether NCCL's threads slow the host by themselves)")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--iters", type=int, default=30)
    args = p.parse_args()
    import torch
    import torch.distributed as dist
    os.environ.update(md.SAFETY_ENV)
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29533")
    dist.init_process_group("nccl", rank=0, world_size=1, device_id=torch.device("cuda:0"))
    torch.cuda.set_device(0)
    doc = {"schema": "habitat.eval.multi_gpu.ddp_host_cost/1", "started_utc": md.utc_now(),
           "command": " ".join(sys.argv), "environment": cf.environment(args.gpu),
           "variants": {k: v for k, v in VARIANTS.items()}, "cases": []}
    for model in args.models.split(","):
        for precision in args.precisions.split(","):
            try:
                rec = run_case(model, precision, args.sequence.split(","), args.warmup,
                               args.iters)
            except Exception as exc:  # record and go on
                rec = {"model": model, "precision": precision, "error": repr(exc)[:500]}
            doc["cases"].append(rec)
            v = rec.get("variants", {})
            print(model, precision, {k: (x["host_issue_ns"] // 1000, x["step_ns"] // 1000,
                                         x["kernels"]) for k, x in v.items()},
                  rec.get("params", {}).get("tensors"), rec.get("buffers"), rec.get("error", ""),
                  flush=True)
            Path(args.out).write_text(json.dumps(doc, indent=1))
    doc["finished_utc"] = md.utc_now()
    Path(args.out).write_text(json.dumps(doc, indent=1))
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
