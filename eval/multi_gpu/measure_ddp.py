#!/usr/bin/env python3
"""Ground truth for multi-GPU data-parallel prediction, in one GPU-machine call.

On the machine at hand, for N in {1, 2, 4} GPUs (those present):
  * an NCCL all-reduce sweep (1 KiB .. 1 GiB, fp32 and bf16), CUDA-event
    timed, giving algorithm and bus bandwidth per size and a fitted latency
    and bandwidth per N: the link constants of the cost model;
  * a probe of how much a concurrent all-reduce slows a compute-bound (GEMM)
    and a memory-bound (copy) kernel stream, and vice versa;
  * the training step time of the project's workloads
    (eval/capture/capture_fixtures.build_step), fp32 and bf16
    autocast, per-GPU batch fixed: N=1 without DDP (the single-GPU baseline
    the predictor starts from) and N>1 under DistributedDataParallel with
    NCCL, for each bucket size asked for; rank 0's GPU-busy time split into
    compute and communication from a few torch.profiler steps;
  * optionally (--agent-traces DIR) the project's own agent trace of each
    model at N=1 (capture_agent.py), in a process of its own.
Everything lands in one JSON (gzip when --out ends in .gz).

    python3 eval/multi_gpu/measure_ddp.py run --out /tmp/ddp.json.gz --budget-s 420

`run` is the driver: it needs no torch itself, starts ONE torchrun launch
with as many processes as the largest N, and that launch measures every N
through sub-groups of ranks 0..N-1 (see launch_command for why). `worker` is
what torchrun runs; `plan` prints the cases and exits.
"""

from __future__ import annotations

import argparse
import datetime
import gzip
import json
import math
import os
import platform
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
CAPTURE_DIR = ROOT / "eval" / "capture"
sys.path.insert(0, str(CAPTURE_DIR))

import capture_fixtures as cf  # noqa: E402  (no torch at import)

SCHEMA = "habitat.eval.multi_gpu.measure_ddp/1"
# The paper's five first: when the budget runs out the extras go first.
MODELS = ("resnet50", "inception_v3", "transformer", "gnmt", "dcgan", "gpt2", "vit")
# The larger fixture batch of each model: it is in both capture_fixtures'
# and capture_agent's batch lists, so committed single-GPU traces and a
# fresh agent trace exist for exactly this workload.
BATCH = {"resnet50": 64, "inception_v3": 64, "transformer": 64, "gnmt": 64,
         "dcgan": 128, "gpt2": 16, "vit": 64}
PRECISIONS = ("fp32", "bf16")
# torch DDP's default bucket_cap_mb is 25.
BUCKETS_MB = (25, 100)
WORLD_SIZES = (1, 2, 4)

# Never let a measurement turn NVLink multicast (NVLS) on: on shared hosts
# a program using it can take the host's GPUs out of service. The cost
# model must then know the measured numbers are ring/tree, not NVLS.
SAFETY_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
              "NVSHMEM_DISABLE_NVLS": "1"}

# Seconds assumed for a case of a kind never run yet in this launch.
DEFAULT_CASE_S = {"sweep": 25.0, "interference": 12.0, "train": 10.0}
# A case starts only if this many seconds (at least) are left.
MIN_CASE_S = 5.0
# Worst expected time of a case, times this, must fit in what is left.
CASE_MARGIN = 1.15


# ---------------------------------------------------------------------------
# Pure functions (no torch): statistics, bandwidths, planning, budget.
# ---------------------------------------------------------------------------

def allreduce_bus_factor(n: int) -> float:
    """nccl-tests' all-reduce bus-bandwidth factor 2(n-1)/n.

    https://github.com/NVIDIA/nccl-tests/blob/master/doc/PERFORMANCE.md:
    each rank sends and receives 2(n-1)/n of the buffer whatever the
    algorithm, so algbw * 2(n-1)/n is comparable with a link's speed."""
    if n < 1:
        raise ValueError(f"world size {n} < 1")
    return 2.0 * (n - 1) / n


def algbw_gbps(nbytes: int, time_ns: float) -> float:
    """Bytes / time in GB/s (1e9 bytes/s, as nccl-tests reports)."""
    if time_ns <= 0:
        raise ValueError(f"time {time_ns} ns <= 0")
    return nbytes / time_ns  # bytes/ns == GB/s


def busbw_gbps(nbytes: int, time_ns: float, n: int) -> float:
    return algbw_gbps(nbytes, time_ns) * allreduce_bus_factor(n)


def percentile(values, q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default)."""
    ordered = sorted(values)
    if not ordered:
        raise ValueError("no values")
    pos = (len(ordered) - 1) * q / 100.0
    lo, hi = math.floor(pos), math.ceil(pos)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def median(values) -> float:
    return percentile(values, 50.0)


def summarize_ns(samples) -> dict:
    return {"median": int(round(median(samples))),
            "p10": int(round(percentile(samples, 10))),
            "p90": int(round(percentile(samples, 90))),
            "min": int(round(min(samples))), "max": int(round(max(samples))),
            "count": len(samples)}


def per_iteration_max(per_rank):
    """Iteration i's time is the slowest rank's: a step is over for the job
    only when every rank is done (ranks start each iteration together)."""
    lengths = {len(s) for s in per_rank}
    if len(lengths) != 1:
        raise ValueError(f"ranks timed different iteration counts {sorted(lengths)}")
    return [max(vals) for vals in zip(*per_rank)]


def sweep_sizes(min_bytes: int, max_bytes: int, factor: int = 2):
    if min_bytes <= 0 or max_bytes < min_bytes or factor < 2:
        raise ValueError(f"bad sweep {min_bytes}..{max_bytes} x{factor}")
    sizes, size = [], min_bytes
    while size <= max_bytes:
        sizes.append(size)
        size *= factor
    return sizes


def inner_ops_for(nbytes: int) -> int:
    """All-reduces timed back to back per sample: small ones are a few us,
    near the launch cost, so (as nccl-tests does) several run between the
    two events and the time is divided; large ones need only one."""
    if nbytes <= (1 << 20):
        return 20
    if nbytes <= (64 << 20):
        return 4
    return 1


def fit_latency_bandwidth(points):
    """(latency_ns, algbw_GBps) of t = a + bytes / B through (bytes, ns)
    points, least squares on relative error (weights 1/t^2) so the
    microsecond-scale small sizes fix the latency as much as the large
    ones fix the bandwidth."""
    pts = [(float(b), float(t)) for b, t in points if t > 0]
    if len(pts) < 2:
        raise ValueError("need two points")
    sw = sx = sy = sxx = sxy = 0.0
    for x, y in pts:
        w = 1.0 / (y * y)
        sw += w
        sx += w * x
        sy += w * y
        sxx += w * x * x
        sxy += w * x * y
    det = sw * sxx - sx * sx
    if det == 0:
        raise ValueError("all points have the same size")
    slope = (sw * sxy - sx * sy) / det
    intercept = (sy - slope * sx) / sw
    return intercept, (1.0 / slope if slope > 0 else float("inf"))


def union_busy(intervals) -> int:
    return cf.union_ns(intervals)


def busy_breakdown(intervals) -> dict:
    """GPU time of one step from (start_ns, end_ns, is_comm) intervals:
    busy = union of all; exposed communication = busy time in which only
    communication kernels run (what overlap failed to hide)."""
    everything = [(s, e) for s, e, _ in intervals]
    compute = [(s, e) for s, e, comm in intervals if not comm]
    comm = [(s, e) for s, e, c in intervals if c]
    busy = union_busy(everything)
    compute_busy = union_busy(compute)
    comm_busy = union_busy(comm)
    return {
        "busy_ns": busy,
        "compute_busy_ns": compute_busy,
        "comm_busy_ns": comm_busy,
        "exposed_comm_ns": busy - compute_busy,
        "overlap_ns": compute_busy + comm_busy - busy,
        "gpu_span_ns": (max(e for _, e in everything) - min(s for s, _ in everything)
                        if everything else 0),
        "kernels": len(intervals),
        "comm_kernels": len(comm),
    }


def is_comm_kernel(name: str) -> bool:
    # NCCL names every device kernel ncclKernel_* / ncclDevKernel_*.
    return "nccl" in name.lower()


def case_id(kind: str, n: int, model: str = "", batch: int = 0,
            precision: str = "", bucket_mb=None) -> str:
    if kind != "train":
        return f"{kind}_n{n}"
    base = f"train_{model}_b{batch}_{precision}_n{n}"
    return base if bucket_mb is None else f"{base}_bucket{bucket_mb:g}"


def build_plan(models, precisions, world_sizes, buckets_mb, batches,
               profile_steps: int, sweep: bool = True, interference: bool = True):
    """Every case in run order: link measurements first (cheap, needed by
    every model), then model-major so a cut budget leaves whole models
    (all N of one model) rather than one N of every model."""
    multi = [n for n in world_sizes if n > 1]
    plan = []
    if sweep:
        plan += [{"id": case_id("sweep", n), "kind": "sweep", "n": n} for n in multi]
    if interference:
        plan += [{"id": case_id("interference", n), "kind": "interference", "n": n}
                 for n in multi]
    for model in models:
        batch = batches[model]
        for precision in precisions:
            common = {"kind": "train", "model": model, "batch": batch,
                      "precision": precision}
            if 1 in world_sizes:
                plan.append(dict(common, id=case_id("train", 1, model, batch, precision),
                                 n=1, ddp=False, bucket_mb=None,
                                 profile_steps=profile_steps))
            for n in multi:
                for i, bucket in enumerate(buckets_mb):
                    plan.append(dict(
                        common, id=case_id("train", n, model, batch, precision, bucket),
                        n=n, ddp=True, bucket_mb=bucket,
                        # One profile per (model, precision, N): the default bucket's.
                        profile_steps=profile_steps if i == 0 else 0))
    return plan


def expected_case_s(history: dict, case: dict) -> float:
    """The longest time seen for a case of the same model (or kind), the
    kind's default before any: N>1 costs about what N=1 does plus DDP."""
    key = case.get("model") or case["kind"]
    return max(history.get(key, [DEFAULT_CASE_S[case["kind"]]]))


def should_start(now: float, deadline: float, expected_s: float) -> bool:
    left = deadline - now
    return left >= MIN_CASE_S and left >= expected_s * CASE_MARGIN


def split_budget(start: float, budget_s: float, agent: bool, agent_reserve_s: float):
    """(measurement deadline, overall deadline): the agent stage, when asked
    for, keeps its reserve at the end of the budget."""
    end = start + budget_s
    if not agent:
        return end, end
    reserve = min(agent_reserve_s, budget_s / 2)
    return end - reserve, end


def present_world_sizes(requested, gpu_count: int):
    return sorted({n for n in requested if 1 <= n <= gpu_count})


def parse_int_list(text: str):
    return [int(x) for x in re.split(r"[,+ ]+", text.strip()) if x]


def parse_float_list(text: str):
    return [float(x) for x in re.split(r"[,+ ]+", text.strip()) if x]


def parse_names(text: str):
    return [x for x in re.split(r"[,+ ]+", text.strip()) if x]


def parse_bytes(text: str) -> int:
    m = re.fullmatch(r"\s*(\d+)\s*([KMG]?)i?B?\s*", text, re.IGNORECASE)
    if not m:
        raise ValueError(f"not a size: {text!r}")
    return int(m.group(1)) << {"": 0, "K": 10, "M": 20, "G": 30}[m.group(2).upper()]


def parse_batches(text: str, models) -> dict:
    """'resnet50=32,gpt2=8' over the defaults."""
    batches = {m: BATCH[m] for m in models}
    for item in parse_names(text):
        name, _, value = item.partition("=")
        if name not in batches or not value.isdigit():
            raise ValueError(f"bad --batch item {item!r}")
        batches[name] = int(value)
    return batches


def gpu_tag_from_name(name: str) -> str:
    """'NVIDIA H100 80GB HBM3' -> 'h100' (the tag capture_agent.py files use)."""
    m = re.search(r"\b([A-Z]{1,3}\d{2,4}[A-Z]?)\b", name)
    return m.group(1).lower() if m else re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")


def sweep_rows(n: int, per_rank_sweeps):
    """Per (dtype, size): median over iterations of the slowest rank's
    per-operation time, with algorithm and bus bandwidth."""
    rows = []
    for entries in zip(*per_rank_sweeps):
        first = entries[0]
        times = per_iteration_max([e["samples_ns"] for e in entries])
        med = median(times)
        rows.append({
            "world_size": n, "dtype": first["dtype"], "bytes": first["bytes"],
            "elements": first["elements"], "inner_ops": first["inner_ops"],
            "time_ns": summarize_ns(times),
            "algbw_GBps": round(algbw_gbps(first["bytes"], med), 3),
            "busbw_GBps": round(busbw_gbps(first["bytes"], med, n), 3),
            "per_rank_median_ns": [int(round(median(e["samples_ns"]))) for e in entries],
        })
    return rows


def link_constants(rows):
    """Per (world size, dtype): fitted latency and bandwidth, the smallest
    size's time and the largest bus bandwidth seen."""
    out = []
    keys = sorted({(r["world_size"], r["dtype"]) for r in rows})
    for n, dtype in keys:
        sel = [r for r in rows if r["world_size"] == n and r["dtype"] == dtype]
        lat, bw = fit_latency_bandwidth([(r["bytes"], r["time_ns"]["median"]) for r in sel])
        best = max(sel, key=lambda r: r["busbw_GBps"])
        out.append({
            "world_size": n, "dtype": dtype,
            "fit_latency_ns": round(lat, 1),
            "fit_algbw_GBps": round(bw, 3),
            "fit_busbw_GBps": round(bw * allreduce_bus_factor(n), 3),
            "smallest_bytes": sel[0]["bytes"],
            "smallest_time_ns": sel[0]["time_ns"]["median"],
            "peak_busbw_GBps": best["busbw_GBps"], "peak_busbw_bytes": best["bytes"],
        })
    return out


def scaling_rows(train):
    """Per DDP case: step time against the same model's N=1 baseline
    (weak scaling: efficiency = t1 / tN, 1.0 = perfect)."""
    base = {(r["model"], r["precision"]): r for r in train
            if r.get("status") == "ok" and r["world_size"] == 1}
    rows = []
    for r in train:
        b = base.get((r["model"], r["precision"]))
        if r.get("status") != "ok" or r["world_size"] == 1 or b is None:
            continue
        t1, tn = b["step_ns"]["median"], r["step_ns"]["median"]
        rows.append({"id": r["id"], "model": r["model"], "precision": r["precision"],
                     "world_size": r["world_size"], "bucket_cap_mb": r["bucket_cap_mb"],
                     "baseline_step_ns": t1, "step_ns": tn,
                     "added_ns": tn - t1, "efficiency": round(t1 / tn, 4)})
    return rows


def write_json(path: Path, doc) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    data = (json.dumps(doc, indent=1, sort_keys=False) + "\n").encode()
    tmp = path.with_name(path.name + ".tmp")
    if path.suffix == ".gz":
        with open(tmp, "wb") as f, gzip.GzipFile(filename="", mode="wb", fileobj=f,
                                                 compresslevel=9, mtime=0) as gz:
            gz.write(data)
    else:
        tmp.write_bytes(data)
    os.replace(tmp, path)


def read_jsonl(path: Path):
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        line = line.strip()
        if line:
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:  # a line cut by a kill: drop it
                pass
    return out


def append_jsonl(path: Path, record) -> None:
    with open(path, "a") as f:
        f.write(json.dumps(record) + "\n")
        f.flush()
        os.fsync(f.fileno())


def utc_now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


# ---------------------------------------------------------------------------
# Worker (run by torchrun; imports torch).
# ---------------------------------------------------------------------------

class Ctx:
    """What a worker process knows: its rank, the groups, the config."""

    def __init__(self, cfg: dict):
        import torch
        import torch.distributed as dist
        self.cfg = cfg
        self.rank = int(os.environ["RANK"])
        self.local_rank = int(os.environ["LOCAL_RANK"])
        self.world = int(os.environ["WORLD_SIZE"])
        torch.cuda.set_device(self.local_rank)
        self.device = torch.device("cuda", self.local_rank)
        nccl_timeout = datetime.timedelta(seconds=cfg["nccl_timeout_s"])
        ctl_timeout = datetime.timedelta(seconds=cfg["control_timeout_s"])
        # No device_id: communicators are made lazily by each group's first
        # collective, among its members only (the well-trodden path).
        dist.init_process_group("nccl", timeout=nccl_timeout)
        # Control traffic (decisions, results, iteration barriers) goes
        # over gloo: a CPU barrier puts no kernel on the measured GPUs.
        self.control = dist.new_group(backend="gloo", timeout=ctl_timeout)
        self.nccl, self.gloo = {}, {}
        for n in cfg["world_sizes"]:
            if n < 2:
                continue
            ranks = list(range(n))
            # Every rank calls new_group for every group, members or not.
            self.nccl[n] = dist.new_group(ranks, backend="nccl", timeout=nccl_timeout)
            self.gloo[n] = dist.new_group(ranks, backend="gloo", timeout=ctl_timeout)

    def barrier(self, n: int) -> None:
        import torch.distributed as dist
        if n > 1:
            dist.barrier(group=self.gloo[n])


def torch_environment(world: int) -> dict:
    import torch
    env = {"torch": torch.__version__, "torch_cuda": torch.version.cuda,
           "cudnn": torch.backends.cudnn.version(), "world_size": world,
           "device_count": torch.cuda.device_count()}
    try:
        v = torch.cuda.nccl.version()
        env["nccl"] = ".".join(map(str, v)) if isinstance(v, tuple) else str(v)
    except Exception as exc:
        env["nccl"] = f"unavailable: {exc}"
    devices = []
    for i in range(torch.cuda.device_count()):
        p = torch.cuda.get_device_properties(i)
        devices.append({k: (str(getattr(p, k)) if k == "uuid" else getattr(p, k, None))
                        for k in ("name", "total_memory", "multi_processor_count",
                                  "major", "minor", "L2_cache_size", "uuid",
                                  "pci_bus_id", "pci_device_id")})
    env["devices"] = devices
    n = torch.cuda.device_count()
    env["peer_access"] = [[i == j or torch.cuda.can_device_access_peer(i, j)
                           for j in range(n)] for i in range(n)]
    for key, fn in (("allow_tf32_matmul", lambda: torch.backends.cuda.matmul.allow_tf32),
                    ("allow_tf32_cudnn", lambda: torch.backends.cudnn.allow_tf32),
                    ("cudnn_benchmark", lambda: torch.backends.cudnn.benchmark)):
        try:
            env[key] = fn()
        except Exception as exc:
            env[key] = f"unavailable: {exc}"
    return env


def time_allreduce(ctx: Ctx, n: int, tensor, inner: int, iters: int):
    import torch
    import torch.distributed as dist
    group = ctx.nccl[n]
    samples = []
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    for _ in range(iters):
        torch.cuda.synchronize()
        ctx.barrier(n)  # every rank starts the sample together
        start.record()
        for _ in range(inner):
            dist.all_reduce(tensor, group=group)
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) * 1e6 / inner)
    return samples


DTYPE_NAMES = ("fp32", "bf16", "fp16")


def torch_dtype(name: str):
    import torch
    return {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[name]


def run_sweep(ctx: Ctx, n: int) -> list:
    import torch
    import torch.distributed as dist
    cfg = ctx.cfg
    sizes = sweep_sizes(cfg["sweep_min_bytes"], cfg["sweep_max_bytes"], cfg["sweep_factor"])
    out = []
    for name in cfg["sweep_dtypes"]:
        dtype = torch_dtype(name)
        esize = torch.empty(0, dtype=dtype).element_size()
        # Zeros: repeated in-place sums stay finite.
        buf = torch.zeros(sizes[-1] // esize, dtype=dtype, device=ctx.device)
        dist.all_reduce(buf[:1024], group=ctx.nccl[n])  # connection set-up, untimed
        torch.cuda.synchronize()
        for nbytes in sizes:
            t = buf[: nbytes // esize]
            for _ in range(cfg["sweep_warmup"]):
                dist.all_reduce(t, group=ctx.nccl[n])
            inner = inner_ops_for(nbytes)
            samples = time_allreduce(ctx, n, t, inner, cfg["sweep_iters"])
            out.append({"dtype": name, "bytes": nbytes, "elements": t.numel(),
                        "inner_ops": inner, "samples_ns": samples})
        del buf
        torch.cuda.empty_cache()
    return out


def _elapsed_ns(a, b) -> float:
    return a.elapsed_time(b) * 1e6


def _time_stream_work(fn, reps: int = 3, align=None) -> float:
    """Median CUDA-event time of fn after one untimed call; `align` (a
    barrier) keeps ranks' collectives from timing each other's lateness."""
    import torch
    s = torch.cuda.Event(enable_timing=True)
    e = torch.cuda.Event(enable_timing=True)
    fn()
    vals = []
    for _ in range(reps):
        torch.cuda.synchronize()
        if align is not None:
            align()
        s.record()
        fn()
        e.record()
        e.synchronize()
        vals.append(_elapsed_ns(s, e))
    return median(vals)


def _concurrent(ctx: Ctx, n: int, compute, comm_tensor, comm_ops: int):
    """(compute ns, comm ns) with the all-reduces on a side stream while
    the compute runs on the default one, as DDP overlaps them."""
    import torch
    import torch.distributed as dist
    side = torch.cuda.Stream()
    ev = [torch.cuda.Event(enable_timing=True) for _ in range(4)]
    go = torch.cuda.Event()
    torch.cuda.synchronize()
    ctx.barrier(n)
    # The GPU idles in a spin kernel while the host queues both streams'
    # work, so compute and communication start together rather than the
    # all-reduces getting a head start of their launch time.
    if hasattr(torch.cuda, "_sleep"):
        torch.cuda._sleep(SPIN_CYCLES)
    go.record()
    side.wait_event(go)
    with torch.cuda.stream(side):
        ev[0].record(side)
        works = [dist.all_reduce(comm_tensor, group=ctx.nccl[n], async_op=True)
                 for _ in range(comm_ops)]
    ev[2].record()
    compute()
    ev[3].record()
    with torch.cuda.stream(side):
        for w in works:
            w.wait()
        ev[1].record(side)
    torch.cuda.synchronize()
    return _elapsed_ns(ev[2], ev[3]), _elapsed_ns(ev[0], ev[1])


SPIN_CYCLES = 40_000_000  # ~20 ms at 2 GHz: longer than queueing 200 launches


def run_interference(ctx: Ctx, n: int) -> dict:
    """Slowdown of compute under a concurrent all-reduce and of the
    all-reduce under compute: the cost model's contention factors."""
    import torch
    import torch.distributed as dist
    dev = ctx.device
    a = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
    c = torch.empty(8192, 8192, device=dev, dtype=torch.bfloat16)
    x = torch.empty(256 << 20, device=dev)  # 1 GiB fp32
    y = torch.empty_like(x)
    comm = torch.zeros(64 << 20, device=dev)  # 256 MiB fp32, a big DDP bucket's scale

    def gemm():
        for _ in range(8):
            torch.mm(a, b, out=c)

    def copy():
        for _ in range(16):
            y.copy_(x)

    def one_allreduce():
        dist.all_reduce(comm, group=ctx.nccl[n])

    ctx.barrier(n)
    alone = {"gemm": _time_stream_work(gemm), "copy": _time_stream_work(copy)}
    ctx.barrier(n)
    op_ns = _time_stream_work(one_allreduce, reps=5, align=lambda: ctx.barrier(n))
    # Enough all-reduces to outlast the compute; every rank must run the
    # same count, so the largest wish wins.
    want = max(1, math.ceil(2.0 * max(alone.values()) / op_ns))
    gathered = [None] * n
    dist.all_gather_object(gathered, want, group=ctx.gloo[n])
    ops = min(200, max(gathered))
    ctx.barrier(n)
    comm_alone = _time_stream_work(lambda: [one_allreduce() for _ in range(ops)], reps=3,
                                   align=lambda: ctx.barrier(n))
    result = {"comm_bytes": comm.numel() * 4, "comm_ops": ops,
              "comm_alone_ns": round(comm_alone), "kernels": {}}
    for name, fn in (("gemm", gemm), ("copy", copy)):
        pairs = [_concurrent(ctx, n, fn, comm, ops) for _ in range(3)]
        cmp_ns = median([p[0] for p in pairs])
        com_ns = median([p[1] for p in pairs])
        result["kernels"][name] = {
            "alone_ns": round(alone[name]), "with_comm_ns": round(cmp_ns),
            "compute_slowdown": round(cmp_ns / alone[name], 4),
            "comm_with_compute_ns": round(com_ns),
            "comm_slowdown": round(com_ns / comm_alone, 4)}
    result["what"] = {"gemm": "8 bf16 8192^3 matmuls", "copy": "16 copies of 1 GiB fp32"}
    return result


def module_cells(step):
    """The closure cells of build_step's step that hold a trainable module
    (net, or gen and disc): swapping a cell's module for its DDP wrapper
    makes the unchanged step train data-parallel."""
    import torch.nn as nn
    cells = []
    for cell in step.__closure__ or ():
        obj = cell.cell_contents
        if isinstance(obj, nn.Module) and any(p.requires_grad for p in obj.parameters()):
            cells.append(cell)
    return cells


def parameter_stats(modules) -> dict:
    params = [p for m in modules for p in m.parameters() if p.requires_grad]
    return {"tensors": len(params), "elements": sum(p.numel() for p in params),
            "grad_bytes": sum(p.numel() * p.element_size() for p in params)}


def ddp_logging(ddp) -> dict:
    try:
        data = ddp._get_ddp_logging_data()
    except Exception as exc:
        return {"error": str(exc)}
    keep = {}
    for k, v in data.items():
        if isinstance(v, (int, float, str, bool)) and (not isinstance(v, str) or len(v) < 4000):
            keep[k] = v
    return keep


def build_case(ctx: Ctx, case: dict):
    """(step, modules, ddp wrappers) of a train case on this rank."""
    import torch
    from torch.nn.parallel import DistributedDataParallel as DDP
    step = cf.build_step(case["model"], case["batch"], case["precision"],
                         device=f"cuda:{ctx.local_rank}")
    cells = module_cells(step)
    modules = [c.cell_contents for c in cells]
    wrappers = []
    if case["ddp"]:
        for cell in cells:
            ddp = DDP(cell.cell_contents, device_ids=[ctx.local_rank],
                      process_group=ctx.nccl[case["n"]],
                      bucket_cap_mb=case["bucket_mb"])
            cell.cell_contents = ddp
            wrappers.append(ddp)
    torch.cuda.synchronize()
    return step, modules, wrappers


def timed_steps(ctx: Ctx, n: int, step, iters: int):
    """(CUDA-event ns, host ns) of each iteration; all ranks start each one
    together after a synchronize and a CPU barrier."""
    import torch
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    host = []
    for i in range(iters):
        torch.cuda.synchronize()
        ctx.barrier(n)
        h0 = time.perf_counter_ns()
        starts[i].record()
        step()
        ends[i].record()
        ends[i].synchronize()
        host.append(time.perf_counter_ns() - h0)
    return [int(round(_elapsed_ns(s, e))) for s, e in zip(starts, ends)], host


def step_intervals(events):
    """Per ProfilerStep: its GPU events as (start_ns, end_ns, is_comm),
    found through the correlation ids of the launches inside the step."""
    by_corr = {}
    for e in events:
        if e.get("ph") == "X" and e.get("cat") in cf.GPU_CATS:
            c = (e.get("args") or {}).get("correlation")
            if c is not None:
                by_corr.setdefault(c, []).append(e)
    out = []
    for s in cf.analyze_steps(events):
        ivs = []
        for c in s["correlations"]:
            for g in by_corr.get(c, ()):
                start = cf.to_ns(g["ts"])
                ivs.append((start, start + cf.to_ns(g["dur"]),
                            g.get("cat") == "kernel" and is_comm_kernel(str(g.get("name", "")))))
        out.append(ivs)
    return out


def profiled_busy(ctx: Ctx, n: int, step, steps: int, scratch: Path):
    """Rank 0 profiles `steps` steps (after 1 wait + 1 warm-up), the other
    ranks run the same steps unprofiled, each step synchronised."""
    import torch
    from torch.profiler import ProfilerActivity, profile, schedule
    total = 2 + steps
    if ctx.rank != 0:
        for _ in range(total):
            torch.cuda.synchronize()
            ctx.barrier(n)
            step()
            torch.cuda.synchronize()
        return None
    path = scratch / f"profile_{os.getpid()}.json"
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
                 schedule=schedule(wait=1, warmup=1, active=steps, repeat=1),
                 on_trace_ready=lambda p: p.export_chrome_trace(str(path))) as prof:
        for _ in range(total):
            torch.cuda.synchronize()
            ctx.barrier(n)
            step()
            torch.cuda.synchronize()
            prof.step()
    with open(path) as f:
        events = json.load(f).get("traceEvents", [])
    path.unlink()
    per_step = [busy_breakdown(ivs) for ivs in step_intervals(events)]
    per_step = [s for s in per_step if s["kernels"] > 0]
    if not per_step:
        return {"error": "no profiled step with kernels"}
    keys = ("busy_ns", "compute_busy_ns", "comm_busy_ns", "exposed_comm_ns",
            "overlap_ns", "gpu_span_ns", "kernels", "comm_kernels")
    return {"steps": per_step,
            "median": {k: int(round(median([s[k] for s in per_step]))) for k in keys}}


def run_train(ctx: Ctx, case: dict) -> dict:
    import torch
    cfg = ctx.cfg
    n = case["n"]
    t0 = time.time()
    torch.cuda.reset_peak_memory_stats()
    step, modules, wrappers = build_case(ctx, case)
    t_build = time.time()
    for _ in range(cfg["warmup"]):
        step()
    torch.cuda.synchronize()
    t_warm = time.time()
    wall, host = timed_steps(ctx, n, step, cfg["iters"])
    t_timed = time.time()
    busy = None
    if case.get("profile_steps"):
        try:
            busy = profiled_busy(ctx, n, step, case["profile_steps"], Path(cfg["state"]))
        except Exception as exc:  # the step times stand without it
            busy = {"error": f"{type(exc).__name__}: {exc}"}
    r = {"wall_ns": wall, "host_ns_median": int(median(host)),
         "peak_memory_allocated_bytes": torch.cuda.max_memory_allocated(),
         "params": parameter_stats(modules),
         "seconds": {"build": round(t_build - t0, 2), "warmup": round(t_warm - t_build, 2),
                     "timed": round(t_timed - t_warm, 2),
                     "profile": round(time.time() - t_timed, 2)}}
    if ctx.rank == 0:
        r["busy"] = busy
        r["ddp_logging"] = [ddp_logging(w) for w in wrappers]
    del step, modules, wrappers
    return r


def merge_train(case: dict, results: list) -> dict:
    """Rank 0's record of a train case from every participant's result."""
    part = results[: case["n"]]
    rec = {k: case[k] for k in ("id", "kind", "model", "batch", "precision")}
    rec.update({"world_size": case["n"], "batch_per_gpu": case["batch"],
                "global_batch": case["batch"] * case["n"], "ddp": case["ddp"],
                "bucket_cap_mb": case["bucket_mb"],
                "gradient_as_bucket_view": False if case["ddp"] else None,
                "broadcast_buffers": True if case["ddp"] else None})
    step = per_iteration_max([p["wall_ns"] for p in part])
    rec["step_ns"] = summarize_ns(step)
    rec["step_ns_samples"] = step
    rec["per_rank_median_ns"] = [int(round(median(p["wall_ns"]))) for p in part]
    rec["host_ns_median_rank0"] = part[0]["host_ns_median"]
    rec["samples_per_s"] = round(rec["global_batch"] / (rec["step_ns"]["median"] / 1e9), 2)
    rec["peak_memory_allocated_bytes"] = max(p["peak_memory_allocated_bytes"] for p in part)
    rec["params"] = part[0]["params"]
    rec["busy_rank0"] = part[0].get("busy")
    rec["ddp_logging_rank0"] = part[0].get("ddp_logging")
    rec["seconds_rank0"] = part[0]["seconds"]
    return rec


def run_case_here(ctx: Ctx, case: dict):
    """This rank's part of a case, or None when it does not take part."""
    if ctx.rank >= case["n"]:
        return None
    try:
        if case["kind"] == "sweep":
            return {"sweep": run_sweep(ctx, case["n"])}
        if case["kind"] == "interference":
            return {"interference": run_interference(ctx, case["n"])}
        return run_train(ctx, case)
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()}
    finally:
        _free_cuda()


def _free_cuda():
    import gc
    import torch
    gc.collect()
    torch.cuda.empty_cache()


def merge_case(case: dict, results: list, seconds: float) -> dict:
    part = results[: case["n"]]
    errors = [p["error"] for p in part if p and "error" in p]
    if errors:
        rec = {k: v for k, v in case.items() if k != "profile_steps"}
        rec.update({"status": "failed", "error": errors[0],
                    "traceback": next(p["traceback"] for p in part if p and "error" in p)})
    elif case["kind"] == "sweep":
        rows = sweep_rows(case["n"], [p["sweep"] for p in part])
        rec = {"id": case["id"], "kind": "sweep", "world_size": case["n"], "rows": rows,
               "link_constants": link_constants(rows), "status": "ok"}
    elif case["kind"] == "interference":
        rec = {"id": case["id"], "kind": "interference", "world_size": case["n"],
               "per_rank": [p["interference"] for p in part], "status": "ok"}
    else:
        rec = merge_train(case, results)
        rec["status"] = "ok"
    rec["seconds"] = round(seconds, 2)
    rec["finished_utc"] = utc_now()
    return rec


def describe(rec: dict) -> str:
    if rec.get("status") != "ok":
        return f"{rec['status'].upper()} {rec['id']}: {rec.get('error', '')}"
    if rec["kind"] == "sweep":
        return f"ok   {rec['id']}: " + "; ".join(
            f"{c['dtype']} lat {c['fit_latency_ns']/1e3:.1f} us peak busbw "
            f"{c['peak_busbw_GBps']:.0f} GB/s" for c in rec["link_constants"]
        ) + f" ({rec['seconds']} s)"
    if rec["kind"] == "interference":
        k = rec["per_rank"][0]["kernels"]
        return (f"ok   {rec['id']}: gemm x{k['gemm']['compute_slowdown']} copy "
                f"x{k['copy']['compute_slowdown']} under all-reduce ({rec['seconds']} s)")
    busy = (rec.get("busy_rank0") or {}).get("median")
    profiled = (f"busy {busy['busy_ns']/1e6:.2f} exposed comm "
                f"{busy['exposed_comm_ns']/1e6:.2f} ms" if busy else "not profiled")
    return (f"ok   {rec['id']}: {rec['step_ns']['median']/1e6:.2f} ms "
            f"(p10 {rec['step_ns']['p10']/1e6:.2f} p90 {rec['step_ns']['p90']/1e6:.2f}) "
            f"{profiled} ({rec['seconds']} s)")


def decide(ctx: Ctx, case: dict, done: set, history: dict):
    """Rank 0 decides whether the case runs and tells every rank, so all
    ranks walk the plan in step."""
    import torch.distributed as dist
    msg = [None]
    if ctx.rank == 0:
        if case["id"] in done:
            msg[0] = "done"
        elif should_start(time.time(), ctx.cfg["deadline"], expected_case_s(history, case)):
            msg[0] = "run"
        else:
            msg[0] = "skip"
    dist.broadcast_object_list(msg, src=0, group=ctx.control)
    return msg[0]


def cmd_worker(args) -> int:
    import torch
    import torch.distributed as dist
    state = Path(args.state)
    cfg = json.loads((state / "config.json").read_text())
    if not cfg.get("allow_nvls"):
        os.environ.update(SAFETY_ENV)  # also when started by hand, before NCCL reads it
    ctx = Ctx(cfg)
    results_path = state / "results.jsonl"
    if ctx.rank == 0:
        (state / f"torch_env_{os.getpid()}.json").write_text(
            json.dumps(torch_environment(ctx.world), indent=1))
    done = {r["id"] for r in read_jsonl(results_path)} if ctx.rank == 0 else set()
    history = {}
    for r in read_jsonl(results_path):
        if r.get("status") == "ok":
            history.setdefault(r.get("model") or r["kind"], []).append(r["seconds"])
    for case in cfg["plan"]:
        verdict = decide(ctx, case, done, history)
        if verdict == "done":
            continue
        if verdict == "skip":
            if ctx.rank == 0:
                left = cfg["deadline"] - time.time()
                rec = {"id": case["id"], "kind": case["kind"], "status": "skipped",
                       "error": f"time budget: {left:.0f} s left, expected "
                                f"{expected_case_s(history, case):.0f} s"}
                append_jsonl(results_path, rec)
                log(describe(rec))
            continue
        if ctx.rank == 0:
            (state / "current.json").write_text(json.dumps(case))
            log(f"start {case['id']}")
        t0 = time.time()
        mine = run_case_here(ctx, case)
        gathered = [None] * ctx.world
        dist.all_gather_object(gathered, mine, group=ctx.control)
        if ctx.rank == 0:
            rec = merge_case(case, gathered, time.time() - t0)
            append_jsonl(results_path, rec)
            history.setdefault(case.get("model") or case["kind"], []).append(rec["seconds"])
            log(describe(rec))
            if rec["status"] != "ok":
                print(rec.get("traceback", ""), flush=True)
    dist.barrier(group=ctx.control)
    dist.destroy_process_group()
    torch.cuda.synchronize()
    return 0


# ---------------------------------------------------------------------------
# Driver (no torch).
# ---------------------------------------------------------------------------

def sh(cmd, timeout: float = 30.0) -> dict:
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        return {"cmd": " ".join(cmd), "rc": p.returncode, "stdout": p.stdout,
                "stderr": p.stderr[-2000:]}
    except Exception as exc:
        return {"cmd": " ".join(cmd), "error": f"{type(exc).__name__}: {exc}"}


GPU_FIELDS = ("index", "name", "pci.bus_id", "uuid", "driver_version", "memory.total",
              "clocks.max.sm", "clocks.max.mem", "power.limit", "pcie.link.gen.max",
              "pcie.link.width.max", "pcie.link.gen.current", "pcie.link.width.current")


def list_gpus() -> list:
    """[{index, name}] from nvidia-smi, else from torch in a child process."""
    q = sh(["nvidia-smi", "--query-gpu=index,name", "--format=csv,noheader"])
    gpus = []
    for line in q.get("stdout", "").strip().splitlines():
        index, _, name = line.partition(",")
        if index.strip().isdigit():
            gpus.append({"index": int(index), "name": name.strip()})
    if gpus:
        return gpus
    t = sh([sys.executable, "-c", "import torch; [print(i, torch.cuda.get_device_name(i)) "
            "for i in range(torch.cuda.device_count())]"], timeout=120)
    for line in t.get("stdout", "").strip().splitlines():
        index, _, name = line.partition(" ")
        if index.isdigit():
            gpus.append({"index": int(index), "name": name})
    return gpus


def host_environment() -> dict:
    env = {"hostname": socket.gethostname(), "platform": platform.platform(),
           "python": platform.python_version(), "cpu_count": os.cpu_count(),
           "cpu_model": ""}
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                env["cpu_model"] = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    env["gpus"] = list_gpus()
    # Details apart: a field this driver does not know fails only this query.
    env["nvidia_smi_query"] = sh(["nvidia-smi", f"--query-gpu={','.join(GPU_FIELDS)}",
                                  "--format=csv"])
    env["nvidia_smi_topo_m"] = sh(["nvidia-smi", "topo", "-m"])
    env["nvidia_smi_nvlink_status"] = sh(["nvidia-smi", "nvlink", "--status"])
    env["nvidia_smi_nvlink_capabilities"] = sh(["nvidia-smi", "nvlink", "--capabilities"])
    env["variables"] = {k: v for k, v in sorted(os.environ.items())
                        if k.startswith(("NCCL_", "TORCH_NCCL", "TORCH_SYMM", "NVSHMEM_",
                                         "CUDA_", "OMP_NUM_THREADS"))}
    return env


NCCL_WANTED = re.compile(r"NCCL version|via |Channel \d+/\d+ :|Trees|NVLS|nvls|channels|"
                         r"Connected all|Init COMPLETE|Using network|P2P plugin|"
                         r"comm 0x[0-9a-f]+ rank")


def nccl_log_digest(state: Path, limit: int = 200) -> list:
    """The lines of NCCL's INFO log that say how ranks are connected
    (transport per channel, rings/trees, NVLS, version). Lines that differ
    only in channel number or pointer are given once with their count."""
    counts, order = {}, []
    for path in sorted(state.glob("nccl.*.log")):
        try:
            lines = path.read_text(errors="replace").splitlines()
        except OSError:
            continue
        for line in lines:
            text = re.sub(r"^\S+:\d+:\d+ ", "", line).strip()
            if not NCCL_WANTED.search(text):
                continue
            key = re.sub(r"Channel \d+", "Channel *", re.sub(r"0x[0-9a-f]+", "0x*", text))
            if key not in counts:
                order.append((key, f"{path.name}: {text}"))
            counts[key] = counts.get(key, 0) + 1
    out = [line if counts[key] == 1 else f"{line} (x{counts[key]})" for key, line in order]
    return out[:limit]


def child_env(args, state: Path) -> dict:
    env = dict(os.environ)
    env["PYTHONUNBUFFERED"] = "1"
    if not args.allow_nvls:
        env.update(SAFETY_ENV)
    if "NCCL_DEBUG" not in os.environ:
        # INFO to files, not the console: it records the transports NCCL chose.
        env["NCCL_DEBUG"] = "INFO"
        env["NCCL_DEBUG_SUBSYS"] = "INIT"
        env["NCCL_DEBUG_FILE"] = str(state / "nccl.%h.%p.log")
    return env


def launch_command(max_n: int, state: Path) -> list:
    """One torchrun launch of max_n processes measures every N: sub-groups
    of ranks 0..N-1 run each case while the others wait on a CPU barrier.
    One launch pays torch import, CUDA/NCCL start-up and cuDNN warm-up once,
    and lets cases run model by model (N=1, 2, 4 of one model together), so
    a cut budget still leaves complete comparisons. torchrun, not
    torch.multiprocessing, because it is how DDP jobs are started and it
    tears every rank down when one fails."""
    return [sys.executable, "-m", "torch.distributed.run", "--standalone",
            f"--nproc_per_node={max_n}", str(Path(__file__).resolve()), "worker",
            "--state", str(state)]


def run_launch(cmd, env, timeout_s: float) -> dict:
    """Runs the launch in its own process group so a timeout ends torchrun
    and every rank it started."""
    t0 = time.time()
    proc = subprocess.Popen(cmd, env=env, start_new_session=True)
    try:
        rc = proc.wait(timeout=max(timeout_s, 1))
        status = "exited"
    except subprocess.TimeoutExpired:
        status = "timeout"
        for sig, wait in ((signal.SIGTERM, 15), (signal.SIGKILL, 10)):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                proc.wait(timeout=wait)
                break
            except subprocess.TimeoutExpired:
                continue
        rc = proc.returncode
    finally:
        if proc.poll() is None:  # the driver itself is being stopped
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    return {"cmd": shlex.join(cmd), "rc": rc, "status": status,
            "seconds": round(time.time() - t0, 1)}


def record_crash(state: Path, launch: dict) -> None:
    """The case running when a launch died is recorded failed, so a
    relaunch goes on after it instead of repeating it."""
    cur = state / "current.json"
    if not cur.exists():
        return
    case = json.loads(cur.read_text())
    if case["id"] in {r["id"] for r in read_jsonl(state / "results.jsonl")}:
        return
    rec = {k: v for k, v in case.items() if k != "profile_steps"}
    rec.update({"status": "failed",
                "error": f"launch {launch['status']} with rc {launch['rc']} during this case",
                "seconds": None, "finished_utc": utc_now()})
    append_jsonl(state / "results.jsonl", rec)


def run_measurements(args, cfg: dict, state: Path) -> list:
    launches = []
    env = child_env(args, state)
    cmd = launch_command(max(cfg["world_sizes"]), state)
    for attempt in range(args.max_restarts + 1):
        left = cfg["deadline"] - time.time()
        if left < MIN_CASE_S + 30:
            break
        log(f"launch {attempt + 1}: {shlex.join(cmd)}")
        # The grace covers start-up and the case running at the deadline.
        launch = run_launch(cmd, env, left + args.grace_s)
        launches.append(launch)
        log(f"launch {attempt + 1} {launch['status']} rc={launch['rc']} after {launch['seconds']} s")
        if launch["status"] == "exited" and launch["rc"] == 0:
            break
        record_crash(state, launch)
        planned = {c["id"] for c in cfg["plan"]}
        if planned <= {r["id"] for r in read_jsonl(state / "results.jsonl")}:
            break
    return launches


def agent_cases(models, precisions, batches):
    """capture_agent.py case names of this run's workloads, and those it
    cannot capture (a batch not in its list)."""
    import capture_agent as ca
    ok, missing = [], []
    for m in models:
        for p in precisions:
            name = cf.case_name(m, batches[m], p)
            (ok if batches[m] in ca.BATCHES.get(m, ()) else missing).append(name)
    return ok, missing


def build_agent(deadline: float, log_path: Path) -> dict:
    """habitat_agent._C, built in place as agent/README.md says, unless present."""
    pkg = ROOT / "agent" / "python"
    built = sorted(str(p) for p in (pkg / "habitat").glob("_C*.so"))
    if built:
        return {"status": "present", "files": built}
    t0 = time.time()
    try:
        with open(log_path, "w") as f:
            p = subprocess.run([sys.executable, "setup.py", "build_ext", "--inplace"],
                               cwd=pkg, stdout=f, stderr=subprocess.STDOUT,
                               timeout=max(deadline - time.time() - 30, 10))
        status = "ok" if p.returncode == 0 else f"failed rc {p.returncode}"
    except subprocess.TimeoutExpired:
        status = "timeout"
    lines = log_path.read_text(errors="replace").splitlines() if log_path.exists() else []
    return {"status": status, "seconds": round(time.time() - t0, 1),
            "setup_lines": [ln for ln in lines if "habitat setup" in ln],
            "log_tail": lines[-15:] if status != "ok" else []}


def run_agent_stage(args, cfg: dict, deadline: float, state: Path) -> dict:
    """The project's agent trace of each model at N=1, in its own process
    (CUPTI takes one client per process; the worker's torch.profiler is
    another), on GPU 0 only."""
    out_dir = Path(args.agent_traces).resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    cases, missing = agent_cases(cfg["models"], cfg["precisions"], cfg["batches"])
    res = {"dir": str(out_dir), "not_capturable": missing}
    res["build"] = build_agent(deadline, state / "agent_build.log")
    if res["build"]["status"] not in ("ok", "present"):
        res["status"] = "build failed"
        return res
    cmd = [sys.executable, str(CAPTURE_DIR / "capture_agent.py"), "run",
           "--gpu", cfg["gpu_tag"], "--out", str(out_dir),
           "--models", ",".join(cfg["models"]), "--cases", ",".join(cases),
           "--deadline", str(deadline - 5)]
    env = child_env(args, state)
    env.pop("NCCL_DEBUG_FILE", None)
    env["CUDA_VISIBLE_DEVICES"] = env.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0]
    res["command"] = shlex.join(cmd)
    log(f"agent stage: {res['command']}")
    launch = run_launch(cmd, env, deadline - time.time() + args.grace_s)
    res["launch"] = launch
    res["cases"] = []
    for p in sorted((out_dir / "cases").glob("*.json")):
        r = json.loads(p.read_text())
        r.pop("traceback", None)
        r.pop("wall_ns_samples", None)
        r.pop("gpu_busy_ns_samples", None)
        res["cases"].append(r)
    res["status"] = "ok" if launch["rc"] == 0 else f"launch rc {launch['rc']}"
    return res


def assemble(cfg: dict, records: list, extra: dict) -> dict:
    """The output document from the per-case records."""
    by_kind = {"sweep": [], "interference": [], "train": []}
    for r in records:
        by_kind.setdefault(r.get("kind", "train"), []).append(r)
    train = by_kind["train"]
    sweeps = [r for r in by_kind["sweep"] if r.get("status") == "ok"]
    doc = {"schema": SCHEMA}
    doc.update(extra)
    doc["config"] = {k: v for k, v in cfg.items() if k not in ("plan", "state")}
    doc["allreduce_sweep"] = [row for r in sweeps for row in r["rows"]]
    doc["link_constants"] = [c for r in sweeps for c in r["link_constants"]]
    doc["interference"] = [r for r in by_kind["interference"] if r.get("status") == "ok"]
    doc["train"] = [r for r in train if r.get("status") == "ok"]
    doc["scaling"] = scaling_rows(doc["train"])
    doc["not_measured"] = [{k: r.get(k) for k in ("id", "status", "error")}
                           for r in records if r.get("status") != "ok"]
    done = {r["id"] for r in records}
    doc["not_measured"] += [{"id": c["id"], "status": "not reached",
                             "error": "the launch ended before this case"}
                            for c in cfg["plan"] if c["id"] not in done]
    return doc


def make_config(args, gpu_count: int, gpu_name: str, deadline: float, state: Path) -> dict:
    models = parse_names(args.models)
    for m in models:
        if m not in BATCH:
            raise SystemExit(f"unknown model {m}; known: {', '.join(BATCH)}")
    precisions = parse_names(args.precisions)
    world_sizes = present_world_sizes(parse_int_list(args.world_sizes), gpu_count)
    batches = parse_batches(args.batch, models)
    buckets = parse_float_list(args.bucket_mb)
    sweep_dtypes = parse_names(args.sweep_dtypes)
    for d in sweep_dtypes:
        if d not in DTYPE_NAMES:
            raise SystemExit(f"unknown sweep dtype {d}")
    cfg = {
        "models": models, "precisions": precisions, "world_sizes": world_sizes,
        "batches": batches, "bucket_mb": buckets, "warmup": args.warmup,
        "iters": args.iters, "profile_steps": args.profile_steps,
        "sweep_min_bytes": parse_bytes(args.sweep_min), "sweep_max_bytes": parse_bytes(args.sweep_max),
        "sweep_factor": args.sweep_factor, "sweep_dtypes": sweep_dtypes,
        "sweep_iters": args.sweep_iters, "sweep_warmup": args.sweep_warmup,
        "nccl_timeout_s": args.nccl_timeout_s, "control_timeout_s": args.control_timeout_s,
        "deadline": deadline, "state": str(state),
        "gpu_tag": args.gpu_tag or gpu_tag_from_name(gpu_name),
        "gpu_count": gpu_count, "allow_nvls": bool(getattr(args, "allow_nvls", False)),
    }
    cfg["plan"] = build_plan(models, precisions, world_sizes, buckets, batches,
                             args.profile_steps, sweep=not args.no_sweep,
                             interference=not args.no_interference)
    return cfg


PROTOCOL = {
    "iteration": "capture_fixtures.build_step: zero_grad, forward, loss, backward, optimizer "
                 "step, random inputs on the GPU; N>1: the step's module(s) wrapped in "
                 "DistributedDataParallel (NCCL, the bucket_cap_mb given, other arguments "
                 "default: gradient_as_bucket_view False, broadcast_buffers True)",
    "scaling": "weak: the per-GPU batch is fixed, global batch = batch x N",
    "ranks": "N=k uses GPUs 0..k-1 of one torchrun launch; the other ranks wait on a "
             "gloo barrier",
    "step_time": "each rank: synchronize, gloo barrier, CUDA event, step, CUDA event, "
                 "synchronize; per iteration the slowest rank; median/p10/p90 over the "
                 "timed iterations",
    "busy_rank0": "torch.profiler on rank 0 (1 wait, 1 warm-up, profile_steps active, "
                  "each synchronized): per step the union of kernel/memcpy/memset "
                  "intervals (busy), of non-NCCL ones (compute), of NCCL kernels "
                  "(comm); exposed_comm = busy - compute",
    "allreduce": "dist.all_reduce (sum, in place) on the N-rank NCCL group; per sample "
                 "inner_ops back-to-back operations between two CUDA events after a "
                 "gloo barrier, time / inner_ops; slowest rank per sample; median; "
                 "algbw = bytes / time, busbw = algbw x 2(n-1)/n (nccl-tests' "
                 "convention, https://github.com/NVIDIA/nccl-tests/blob/master/doc/"
                 "PERFORMANCE.md), GB = 1e9 bytes; small sizes are bound by the host "
                 "cost of one torch.distributed call (what DDP's buckets also pay), not "
                 "by NCCL's device latency",
    "link_constants": "fit of time = latency + bytes / algbw over the sweep, least "
                      "squares on relative error",
    "interference": "compute on the default stream with all-reduces of 256 MiB fp32 on "
                    "a side stream (async), against each alone; slowdown = together / "
                    "alone",
}


def cmd_run(args) -> int:
    start = time.time()
    started_utc = utc_now()
    state = Path(args.work_dir or f"/tmp/measure_ddp_{os.getpid()}").resolve()
    state.mkdir(parents=True, exist_ok=True)
    for stale in ("results.jsonl", "current.json"):
        (state / stale).unlink(missing_ok=True)
    host = host_environment()
    gpu_count = len(host["gpus"])
    gpu_name = host["gpus"][0]["name"] if host["gpus"] else "none"
    measure_deadline, end = split_budget(start, args.budget_s, bool(args.agent_traces),
                                         args.agent_reserve_s)
    cfg = make_config(args, gpu_count, gpu_name, measure_deadline, state)
    (state / "config.json").write_text(json.dumps(cfg, indent=1))
    log(f"{gpu_count} x {gpu_name}; world sizes {cfg['world_sizes']}; "
        f"{len(cfg['plan'])} cases; budget {args.budget_s:.0f} s "
        f"(measurements until +{measure_deadline - start:.0f} s)")
    launches = []
    if gpu_count == 0:
        log("no GPU found by nvidia-smi; nothing measured")
    else:
        launches = run_measurements(args, cfg, state)
    agent = run_agent_stage(args, cfg, end, state) if args.agent_traces and gpu_count else None
    torch_envs = [json.loads(p.read_text()) for p in sorted(state.glob("torch_env_*.json"))]
    extra = {
        "command": shlex.join([sys.executable] + sys.argv),
        "cwd": os.getcwd(),
        "started_utc": started_utc, "finished_utc": utc_now(),
        "wall_s": round(time.time() - start, 1),
        "budget_s": args.budget_s,
        "environment": {"host": host, "torch": torch_envs[0] if torch_envs else None,
                        "child_env_set": {k: v for k, v in child_env(args, state).items()
                                          if k in SAFETY_ENV or k.startswith("NCCL_DEBUG")},
                        "nccl_log": nccl_log_digest(state)},
        "protocol": PROTOCOL,
        "launches": launches,
        "agent_traces": agent,
    }
    doc = assemble(cfg, read_jsonl(state / "results.jsonl"), extra)
    write_json(Path(args.out), doc)
    print_summary(doc)
    log(f"wrote {args.out} ({doc['wall_s']} s)")
    return 0 if doc["train"] or doc["allreduce_sweep"] else 1


def print_summary(doc: dict) -> None:
    for c in doc["link_constants"]:
        print(f"all-reduce n={c['world_size']} {c['dtype']}: latency {c['fit_latency_ns']/1e3:.1f} us, "
              f"fit busbw {c['fit_busbw_GBps']:.0f} GB/s, peak busbw {c['peak_busbw_GBps']:.0f} "
              f"GB/s at {c['peak_busbw_bytes'] >> 20} MiB")
    for r in doc["train"]:
        print(f"{r['id']:48s} {r['step_ns']['median']/1e6:9.2f} ms")
    for s in doc["scaling"]:
        print(f"{s['id']:48s} efficiency {s['efficiency']:.3f} (+{s['added_ns']/1e6:.2f} ms)")
    for m in doc["not_measured"]:
        print(f"not measured: {m}")


def cmd_plan(args) -> int:
    cfg = make_config(args, args.assume_gpus, "NVIDIA H100 80GB HBM3", time.time() + args.budget_s,
                      Path("/tmp"))
    for c in cfg["plan"]:
        print(c["id"])
    print(f"{len(cfg['plan'])} cases for {args.assume_gpus} GPUs")
    return 0


def add_common(p) -> None:
    p.add_argument("--models", default=",".join(MODELS))
    p.add_argument("--precisions", default=",".join(PRECISIONS))
    p.add_argument("--world-sizes", default=",".join(map(str, WORLD_SIZES)),
                   help="those larger than the GPU count are left out")
    p.add_argument("--batch", default="", help="per-GPU batch overrides, e.g. resnet50=32")
    p.add_argument("--bucket-mb", default=",".join(map(str, BUCKETS_MB)),
                   help="DDP bucket_cap_mb values; the first is the one profiled")
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--iters", type=int, default=30)
    p.add_argument("--profile-steps", type=int, default=3, help="0: no GPU-busy profile")
    p.add_argument("--sweep-min", default="1K")
    p.add_argument("--sweep-max", default="1G")
    p.add_argument("--sweep-factor", type=int, default=2)
    p.add_argument("--sweep-dtypes", default="fp32,bf16")
    p.add_argument("--sweep-iters", type=int, default=20)
    p.add_argument("--sweep-warmup", type=int, default=5)
    p.add_argument("--no-sweep", action="store_true")
    p.add_argument("--no-interference", action="store_true")
    p.add_argument("--budget-s", type=float, default=420.0)
    p.add_argument("--gpu-tag", default="", help="capture_agent's GPU tag; default from the name")
    p.add_argument("--nccl-timeout-s", type=float, default=90.0)
    p.add_argument("--control-timeout-s", type=float, default=600.0)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("run", help="measure and write the JSON")
    add_common(p)
    p.add_argument("--out", required=True, help="output JSON (.gz: gzip)")
    p.add_argument("--work-dir", default="", help="state files (default /tmp/measure_ddp_PID)")
    p.add_argument("--agent-traces", default="", help="capture agent traces at N=1 into DIR")
    p.add_argument("--agent-reserve-s", type=float, default=150.0)
    p.add_argument("--max-restarts", type=int, default=1,
                   help="relaunches after a crashed launch (it resumes after the failed case)")
    p.add_argument("--grace-s", type=float, default=60.0)
    p.add_argument("--allow-nvls", action="store_true",
                   help="do not force NVLink multicast off (only on hosts you own)")
    p = sub.add_parser("plan", help="print the cases and exit (no GPU, no torch)")
    add_common(p)
    p.add_argument("--assume-gpus", type=int, default=2)
    p = sub.add_parser("worker", help="internal: what torchrun starts")
    p.add_argument("--state", required=True)
    args = parser.parse_args(argv)
    return {"run": cmd_run, "plan": cmd_plan, "worker": cmd_worker}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
