#!/usr/bin/env python3
"""FSDP2 (fully_shard) training steps on N real GPUs with NCCL: the ground
truth for the sharded-data-parallel step and memory predictions
(docs/multi_gpu.md, section 6).

One torchrun launch of N processes runs every case in turn (one process
group, so NCCL starts once). Per model and precision (the models of
measure_fsdp_one_gpu.py, plus one too large for one GPU):

- **plain** (models that fit one GPU): rank 0 alone runs the unsharded
  step (AdamW foreach, fp32 or bf16 autocast over fp32 parameters),
  3 warm-up steps, 5 timed with CUDA events, so this lease's single-GPU
  step sits beside the stored agent traces a prediction starts from;
- **fsdp**: every transformer block `fully_shard`-ed, then the root, on all
  N ranks: the same timing on rank 0 (median), the host's issue time of a
  step, and each rank's peak `max_memory_allocated` over the timed steps;
- **one-rank trace**: one more FSDP step with the agent tracking rank 0
  (its NCCL kernels included): `<model>_b<batch>_<precision>_fsdp<N>r0.trace.gz`,
  the input of a prediction from one FSDP rank.

    torchrun --nproc-per-node 2 eval/fsdp/measure_fsdp.py --out DIR [--budget-s 420]
    python3 eval/fsdp/measure_fsdp.py --plan
"""

from __future__ import annotations

import argparse
import datetime
import gc
import json
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))
import measure_fsdp_one_gpu as one_gpu  # noqa: E402

# The NVLink-multicast switches the lent machines need (KINDS.md), set before
# NCCL reads them, also when started by hand.
SAFETY_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
              "NVSHMEM_DISABLE_NVLS": "1"}
# A Llama-style 13B (Llama-2-13B's shape, 40 layers): 208 GB of fp32
# parameters, gradients and AdamW state, more than one 141 GB H200 holds.
LARGE = {"llama_13b": ("llama", dict(hidden_size=5120, intermediate_size=13824,
                                      num_hidden_layers=40, num_attention_heads=40,
                                      num_key_value_heads=40, vocab_size=32000,
                                      max_position_embeddings=one_gpu.SEQ), 1)}
MODELS = {**one_gpu.MODELS, **LARGE}


def plan(precisions=one_gpu.PRECISIONS, large: bool = True) -> list:
    """(model, precision, trace) in run order: smaller models first, the
    large one last, so a budget cut short still covers the range; then the
    first case again without a trace, to show whether the agent's earlier
    tracking (its disabled callbacks) slowed the later steps."""
    small = [(m, p, True) for m in one_gpu.MODELS for p in precisions]
    big = [(m, p, True) for m in LARGE for p in precisions] if large else []
    return small + big + [small[0][:2] + (False,)]


def fit_plan(spec: str) -> list:
    """(model, precision, batch) of --fit-batches "model/precision/b1+b2,...":
    FSDP steps at the batches a fit predicts and the next ones, to see
    which fit (the predicted fit exact when the first does and the next
    does not)."""
    out = []
    for item in filter(None, spec.split(",")):
        model, precision, batches = item.split("/")
        if model not in MODELS or precision not in one_gpu.PRECISIONS:
            raise ValueError(f"unknown case {item!r}")
        out += [(model, precision, int(b)) for b in batches.split("+")]
    return out


def host_issue_ns(step) -> int:
    """Host time to issue one step, the GPU drained before it: a step
    whose issue time is near its GPU time is host-bound."""
    import torch
    torch.cuda.synchronize()
    t = time.perf_counter_ns()
    step()
    issued = time.perf_counter_ns() - t
    torch.cuda.synchronize()
    return issued


def release() -> None:
    """FSDP's modules and hooks hold reference cycles: without a collection
    a case's parameters and optimizer state outlive it (GiBs), inflating the
    next case's peak and slowing its host."""
    import torch
    gc.collect()
    torch.cuda.empty_cache()


def plain_case(name, precision, rank, batch, out_dir: Path, trace: bool) -> dict | None:
    """Rank 0's unsharded step (with `trace`, one more step tracked by the
    agent: a single-GPU trace to predict from); the other ranks wait at the
    barrier."""
    import torch
    import torch.distributed as dist
    r = None
    if rank == 0:
        torch.manual_seed(0)
        model, blocks, vocab = one_gpu.build(name, MODELS)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=True)
        ids = torch.randint(0, vocab, (batch, one_gpu.SEQ), device="cuda")
        step = one_gpu.step_fn(model, opt, ids, precision)
        times = one_gpu.time_steps(step)
        r = {"mode": "plain", "world_size": 1, "batch": batch,
             "step_ns_median": times[len(times) // 2], "step_ns_samples": times,
             "host_issue_ns": host_issue_ns(step),
             "peak_allocated_bytes": torch.cuda.max_memory_allocated()}
        if trace:
            r["trace"] = track(step, name, batch, precision, out_dir / f"{name}_b{batch}_{precision}.trace.gz",
                               r["step_ns_median"], model)
        del opt, model, blocks, step
        release()
    dist.barrier()
    return r


def track(step, name, batch, precision, path: Path, wall_ns, model=None) -> str:
    """One step tracked by the agent, saved to `path`; its file name. With
    `model`, its modules go into the trace."""
    import torch
    sys.path.insert(0, str(ROOT / "agent" / "python"))
    import habitat_agent
    torch.cuda.synchronize()
    tracker = habitat_agent.OperationTracker(
        model_name=name, batch_size=batch, precision=one_gpu.TRACKER_PRECISION[precision],
        verbose=False, model=model)
    with tracker.track():
        step()
    tracker.get_tracked_trace(iteration_wall_ns=wall_ns).save(str(path))
    return path.name


def fsdp_case(name, precision, rank, world, mesh, batch, out_dir: Path, trace: bool) -> dict:
    import torch
    import torch.distributed as dist
    from torch.distributed.fsdp import fully_shard
    torch.manual_seed(0)
    model, blocks, vocab = one_gpu.build(name, MODELS)
    params = sum(p.numel() for p in model.parameters())
    block_params = sum(p.numel() for p in blocks[0].parameters())
    for block in blocks:
        fully_shard(block, mesh=mesh)
    fully_shard(model, mesh=mesh)
    torch.cuda.empty_cache()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=True)
    torch.manual_seed(rank)  # each rank its own batch, as data parallel
    ids = torch.randint(0, vocab, (batch, one_gpu.SEQ), device="cuda")
    step = one_gpu.step_fn(model, opt, ids, precision)
    dist.barrier()
    times = one_gpu.time_steps(step)
    peaks = [None] * world
    dist.all_gather_object(peaks, torch.cuda.max_memory_allocated())
    r = {"mode": "fsdp", "world_size": world, "batch": batch, "seq": one_gpu.SEQ,
         "params": params, "blocks": len(blocks),
         "block_params": block_params,
         "step_ns_median": times[len(times) // 2], "step_ns_samples": times,
         "host_issue_ns": host_issue_ns(step),
         "peak_allocated_bytes": max(peaks), "peak_allocated_bytes_per_rank": peaks}
    if trace:
        r["trace"] = trace_rank0(step, name, batch, precision, world, rank, out_dir,
                                 r["step_ns_median"])
    del opt, model, blocks, step
    release()
    return r


def trace_rank0(step, name, batch, precision, world, rank, out_dir, wall_ns) -> str:
    """One more step, the agent tracking rank 0; the file name."""
    import torch
    import torch.distributed as dist
    path = out_dir / f"{name}_b{batch}_{precision}_fsdp{world}r0.trace.gz"
    torch.cuda.synchronize()
    dist.barrier()
    if rank != 0:
        step()
        torch.cuda.synchronize()
        return path.name
    return track(step, f"{name}_fsdp{world}_rank0", batch, precision, path, wall_ns)


def run_cases(args) -> int:
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    # A rank that fails alone leaves the other in a collective: end the run
    # in minutes, not NCCL's default ten.
    dist.init_process_group("nccl", timeout=datetime.timedelta(seconds=180))
    mesh = init_device_mesh("cuda", (world,))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    deadline = time.time() + args.budget_s
    log = open(out / f"fsdp_n{world}.jsonl", "a") if rank == 0 else None
    if args.fit_batches:
        cases = [(m, p, False, b) for m, p, b in fit_plan(args.fit_batches)]
    else:
        cases = [(m, p, t, MODELS[m][2] * args.batch_multiplier)
                 for m, p, t in plan(args.precisions.split(","), not args.no_large)]
    for name, precision, trace, batch in cases:
        go = torch.tensor([1 if deadline - time.time() > 45 else 0], device="cuda")
        dist.broadcast(go, 0)  # every rank takes rank 0's word
        base = {"model": name, "precision": precision, "traced": trace, "batch": batch,
                "device": torch.cuda.get_device_name(0),
                "torch": torch.__version__}
        if not go.item():
            if log:
                log.write(json.dumps(dict(base, status="skipped")) + "\n")
            continue
        for mode in ("plain", "fsdp"):
            if mode == "plain" and (name in LARGE or args.fit_batches):
                continue
            t = time.time()
            release()
            held = torch.cuda.memory_allocated()
            try:
                r = (plain_case(name, precision, rank, batch, out, trace and args.trace_plain)
                     if mode == "plain"
                     else fsdp_case(name, precision, rank, world, mesh, batch, out, trace))
                status = "ok"
            except Exception as exc:  # the next case may still run
                r = {"mode": mode, "world_size": world,
                     "error": f"{type(exc).__name__}: {exc}"[-800:]}
                status = "oom" if isinstance(exc, torch.OutOfMemoryError) else "failed"
                print(f"rank {rank} failed {name} {precision} {mode}: {r['error']}", flush=True)
                release()
            if log and r is not None:
                line = dict(base, status=status, seconds=round(time.time() - t, 1),
                            allocated_at_start_bytes=held, **r)
                log.write(json.dumps(line) + "\n")
                log.flush()
                print(f"{status} {name} {precision} {mode} N={r.get('world_size')}: "
                      f"{r.get('step_ns_median', 0) / 1e6:.1f} ms, peak "
                      f"{r.get('peak_allocated_bytes', 0) / 2**30:.2f} GiB "
                      f"{r.get('error', '')}", flush=True)
            if status == "failed":
                break  # ranks may disagree on where they stopped: leave the model
    dist.barrier()
    dist.destroy_process_group()
    return 0


def main() -> int:
    os.environ.update(SAFETY_ENV)
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="")
    ap.add_argument("--budget-s", type=float, default=420)
    ap.add_argument("--plan", action="store_true")
    ap.add_argument("--batch-multiplier", type=int, default=1,
                    help="each model's batch times this (bf16 at 4x: GPU-bound steps)")
    ap.add_argument("--precisions", default=",".join(one_gpu.PRECISIONS))
    ap.add_argument("--no-large", action="store_true", help="leave out the 13B")
    ap.add_argument("--trace-plain", action="store_true",
                    help="also trace each plain step (a single-GPU trace of this lease)")
    ap.add_argument("--fit-batches", default="",
                    help='instead: FSDP steps at "model/precision/b1+b2,..." (fit check)')
    args = ap.parse_args()
    if args.plan:
        for name, precision, trace in plan(args.precisions.split(","), not args.no_large):
            print(name, precision, MODELS[name][2] * args.batch_multiplier,
                  "traced" if trace else "untraced")
        return 0
    if not args.out:
        ap.error("--out is required")
    return run_cases(args)


if __name__ == "__main__":
    sys.exit(main())
