#!/usr/bin/env python3
"""What one GPU can measure of sharded data parallel (FSDP2, fully_shard):
the peak memory per rank and rank 0's compute time at N = 2 and 4, through
torch.distributed's fake process group (its collectives return at once, so
every allocation FSDP makes is real while no data moves), beside the plain
single-GPU step of the same model and its agent trace (a prediction's
input).

What it cannot measure: communication time. The step of a real N-GPU run
adds the exposed all-gathers and reduce-scatters; that needs a multi-GPU
machine.

Per model (transformers built from a config, random weights) and precision
(fp32; bf16 autocast over fp32 parameters): one child process runs N = 1
(plain, no FSDP: 3 warm-up steps, 5 steps timed with CUDA events, peak
memory, then one step tracked by the agent), then N = 2 and N = 4 (each
transformer block fully_shard-ed, then the root, as FSDP2's documentation
wraps a transformer; AdamW; same timing). One JSON line per case.

    python3 eval/fsdp/measure_fsdp_one_gpu.py run --out OUT [--budget-s 450]
    python3 eval/fsdp/measure_fsdp_one_gpu.py plan
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
WARMUP = 3
TIMED = 5
SEQ = 1024
WORLD_SIZES = (1, 2, 4)
PRECISIONS = ("bf16", "fp32")
# name -> (family, config keywords, batch): 0.35 to 2.8 billion parameters.
MODELS = {
    "gpt2_355m": ("gpt2", dict(n_embd=1024, n_layer=24, n_head=16, n_positions=SEQ), 4),
    "gpt2_774m": ("gpt2", dict(n_embd=1280, n_layer=36, n_head=20, n_positions=SEQ), 4),
    "gpt2_1558m": ("gpt2", dict(n_embd=1600, n_layer=48, n_head=25, n_positions=SEQ), 2),
    "llama_2p8b": ("llama", dict(hidden_size=3072, intermediate_size=8192,
                                 num_hidden_layers=26, num_attention_heads=24,
                                 num_key_value_heads=8, vocab_size=32000,
                                 max_position_embeddings=SEQ), 2),
}
TRACKER_PRECISION = {"fp32": "fp32", "bf16": "amp_bf16"}


def plan() -> list:
    """The (model, precision) children in run order: smaller models first,
    so a budget cut short still covers the range."""
    return [(m, p) for m in MODELS for p in PRECISIONS]


def build(name: str, models: dict = MODELS):
    import torch
    import transformers
    family, kw, _ = models[name]
    if family == "gpt2":
        cfg = transformers.GPT2Config(**kw)
    else:
        cfg = transformers.LlamaConfig(**kw)
    with torch.device("cuda"):
        model = transformers.AutoModelForCausalLM.from_config(cfg)
    blocks = model.transformer.h if family == "gpt2" else model.model.layers
    return model, list(blocks), cfg.vocab_size


def step_fn(model, opt, ids, precision):
    """One training step: zero the gradients, the causal-LM loss (bf16
    autocast over fp32 parameters, or fp32), backward, AdamW."""
    import torch

    def step():
        opt.zero_grad(set_to_none=True)
        ctx = (torch.autocast("cuda", dtype=torch.bfloat16) if precision == "bf16"
               else contextlib.nullcontext())
        with ctx:
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
    return step


def time_steps(step) -> list:
    import torch
    for _ in range(WARMUP):
        step()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    out = []
    for _ in range(TIMED):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        step()
        end.record()
        end.synchronize()
        out.append(int(start.elapsed_time(end) * 1e6))
    return sorted(out)


def one_case(name: str, precision: str, world: int, out_dir: Path) -> dict:
    import torch
    import torch.distributed as dist
    torch.manual_seed(0)
    if world > 1:
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard
        from torch.testing._internal.distributed.fake_pg import FakeStore
        dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=world)
        mesh = init_device_mesh("cuda", (world,))
    model, blocks, vocab = build(name)
    params = sum(p.numel() for p in model.parameters())
    block_params = sum(p.numel() for p in blocks[0].parameters())
    if world > 1:
        for block in blocks:
            fully_shard(block, mesh=mesh)
        fully_shard(model, mesh=mesh)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=True)
    batch = MODELS[name][2]
    ids = torch.randint(0, vocab, (batch, SEQ), device="cuda")

    step = step_fn(model, opt, ids, precision)
    times = time_steps(step)
    r = {
        "model": name, "precision": precision, "world_size": world, "batch": batch,
        "seq": SEQ, "params": params, "blocks": len(blocks), "block_params": block_params,
        "step_ns_median": times[len(times) // 2], "step_ns_samples": times,
        "peak_allocated_bytes": torch.cuda.max_memory_allocated(),
        "peak_reserved_bytes": torch.cuda.max_memory_reserved(),
        "status": "ok",
    }
    if world == 1:
        sys.path.insert(0, str(ROOT / "agent" / "python"))
        import habitat_agent
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        tracker = habitat_agent.OperationTracker(model_name=name, batch_size=batch,
                                                 precision=TRACKER_PRECISION[precision],
                                                 verbose=False, model=model)
        with tracker.track():
            step()
        path = out_dir / f"{name}_b{batch}_{precision}.trace.gz"
        tracker.get_tracked_trace(iteration_wall_ns=r["step_ns_median"]).save(str(path))
        r["trace"] = path.name
    del opt, model, blocks
    if world > 1:
        dist.destroy_process_group()
    torch.cuda.empty_cache()
    return r


def cmd_child(args) -> int:
    import torch
    out = Path(args.out)
    for world in args.worlds:
        t = time.time()
        try:
            r = one_case(args.model, args.precision, world, out)
        except Exception as exc:  # the next world size may still run
            r = {"model": args.model, "precision": args.precision, "world_size": world,
                 "status": "failed", "error": f"{type(exc).__name__}: {exc}"[-800:]}
            torch.cuda.empty_cache()
        r["seconds"] = round(time.time() - t, 1)
        r["device"] = torch.cuda.get_device_name(0)
        r["torch"] = torch.__version__
        print("RESULT " + json.dumps(r), flush=True)
    return 0


def cmd_run(args) -> int:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    deadline = time.time() + args.budget_s
    with open(out / "fsdp_one_gpu.jsonl", "a") as log:
        for name, precision in plan():
            left = deadline - time.time()
            if left < 20:
                log.write(json.dumps({"model": name, "precision": precision,
                                      "status": "skipped", "left_s": round(left)}) + "\n")
                continue
            cmd = [sys.executable, __file__, "child", "--model", name, "--precision", precision,
                   "--out", str(out), "--worlds", ",".join(map(str, args.worlds))]
            env = dict(os.environ, PYTHONUNBUFFERED="1")
            try:
                p = subprocess.run(cmd, capture_output=True, text=True, timeout=left, env=env)
                stdout, stderr, rc = p.stdout, p.stderr, p.returncode
            except subprocess.TimeoutExpired as exc:
                stdout, stderr, rc = (exc.stdout or b"").decode(), "budget", -9
            got = [x[len("RESULT "):] for x in stdout.splitlines() if x.startswith("RESULT ")]
            for line in got:
                log.write(line + "\n")
                r = json.loads(line)
                print(f"{r['status']:6s} {name} {precision} N={r['world_size']}: "
                      f"{r.get('step_ns_median', 0) / 1e6:.1f} ms, "
                      f"peak {r.get('peak_allocated_bytes', 0) / 2**30:.2f} GiB "
                      f"{r.get('error', '')[-300:]}", flush=True)
            if rc != 0:
                print(f"child {name} {precision} exited {rc}: {stderr[-1500:]}", flush=True)
            log.flush()
    return 0


def worlds(text: str) -> tuple:
    """"1,2,4" -> (1, 2, 4); each of WORLD_SIZES."""
    got = tuple(int(x) for x in text.split(","))
    if not got or any(n not in WORLD_SIZES for n in got):
        raise argparse.ArgumentTypeError(f"world sizes must be among {WORLD_SIZES}, got {text}")
    return got


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("run")
    p.add_argument("--out", required=True)
    p.add_argument("--budget-s", type=float, default=450)
    p.add_argument("--worlds", type=worlds, default=WORLD_SIZES,
                   help="the N to run, e.g. 1 (the traces alone); default 1,2,4")
    p = sub.add_parser("child")
    p.add_argument("--model", required=True, choices=list(MODELS))
    p.add_argument("--precision", required=True, choices=PRECISIONS)
    p.add_argument("--out", required=True)
    p.add_argument("--worlds", type=worlds, default=WORLD_SIZES)
    sub.add_parser("plan")
    args = ap.parse_args()
    if args.cmd == "plan":
        for name, precision in plan():
            print(name, precision, MODELS[name][2], WORLD_SIZES)
        return 0
    return {"run": cmd_run, "child": cmd_child}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
