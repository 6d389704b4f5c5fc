#!/usr/bin/env python3
"""Per-kernel models of batch scaling, checked against real H100/H200 runs.

From one torch.profiler (Kineto) trace at batch b, predict the summed GPU
time (kernels + memsets + memcpys, what torch.profiler's device time sums)
of the same training iteration at another batch on the same GPU, with
several per-kernel models, and compare with:
  * the committed fixture at the larger batch (same GPU and precision);
  * batch_memory's gpu_time_ns_mean at b/2, 2b and 4b.

Reads only committed data under tests/testdata. Pure Python, no GPU.

usage: /usr/bin/python3 eval/batch_scaling/study.py [--no-cases]   (~30 s on 2 cores)
"""

from __future__ import annotations

import argparse
import collections
import functools
import gzip
import json
import math
import os
import re
import sys
from dataclasses import dataclass, field

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
KINETO = os.path.join(ROOT, "tests", "testdata", "kineto")
BATCH_MEMORY = os.path.join(ROOT, "tests", "testdata", "batch_memory")
GPUS = ("h100", "h200")
PRECISIONS = ("fp32", "bf16")

# Hopper SM limits (H100 SXM and H200 alike; the traces' deviceProperties agree).
NUM_SMS = 132
THREADS_PER_SM = 2048
REGS_PER_SM = 65536
SMEM_PER_SM = 228 * 1024
MAX_BLOCKS_PER_SM = 32
REG_ALLOC_UNIT = 256      # registers are allocated per warp in chunks of 256
SMEM_PER_BLOCK_RESERVED = 1024  # the driver reserves 1 KiB per block on sm_90

# Overhead of a kernel that does not shrink with its work (launch ramp,
# tail, prologue). A constant rather than a fit: the 2-4 us range the brief
# names, middle value; the study prints 2 and 4 us too.
DEFAULT_T0_NS = 3000

# Ops whose kernels cuBLAS/cuDNN pick per shape (GEMM, convolution, RNN,
# attention): their fixed part is larger (tile prologues, split-K
# reductions, the RNN's serial time-step chain) and is given its own t0.
KERNEL_VARYING = re.compile(r"mm$|addmm|bmm|matmul|linear|convolution|_cudnn_rnn|lstm|attention")

# Annotations and autograd nodes whose work is parameter-sized.
FIXED_ANCESTORS = ("Optimizer.", "AccumulateGrad")


@dataclass
class Op:
    """A cpu_op or user_annotation, with its parent for walking outwards."""
    name: str
    start: int
    end: int
    shapes: list
    parent: "Op | None" = None


@dataclass
class Kernel:
    """One GPU activity of the kept step and the op that launched it."""
    name: str
    kind: str          # kernel, gpu_memset, gpu_memcpy
    dur_ns: int
    grid: tuple = (1, 1, 1)
    block: tuple = (1, 1, 1)
    regs: int = 0
    smem: int = 0
    op: Op | None = None
    batched: str = "?"  # "batch", "fixed" or "unknown"
    family: str = ""


@dataclass
class Trace:
    batch: int
    kernels: list = field(default_factory=list)

    def total_ns(self) -> int:
        return sum(k.dur_ns for k in self.kernels)


# ---------------------------------------------------------------- loading

def to_ns(value) -> int:
    """Kineto times are microseconds with 3 decimals and ~16 digits, more
    than a double holds: split at the point to keep nanoseconds exact."""
    whole, _, frac = str(value).partition(".")
    sign = -1 if whole.startswith("-") else 1
    return int(whole) * 1000 + sign * int((frac + "000")[:3])


def load_json(path: str) -> dict:
    """Floats stay text so that to_ns can read them exactly."""
    with gzip.open(path, "rt") as f:
        return json.load(f, parse_float=str)


def op_shapes(args: dict) -> list:
    """Tensor shapes of an op's inputs; TensorLists flattened, and the size
    lists of factory ops (aten::zeros([1, B, H])) counted as shapes, since
    they say which batch the op's output carries."""
    shapes = []
    dims = args.get("Input Dims", [])
    types = args.get("Input type", [])
    concrete = args.get("Concrete Inputs", [])
    for i, dim in enumerate(dims):
        if dim and isinstance(dim[0], list):
            shapes.extend(d for d in dim if d)
        elif dim:
            shapes.append(dim)
        elif i < len(types) and types[i] == "ScalarList" and i < len(concrete):
            sizes = re.findall(r"-?\d+", concrete[i])
            if sizes and concrete[i].startswith("["):
                shapes.append([int(s) for s in sizes])
    return shapes


def build_ops(events: list) -> dict:
    """Ops by External id, each linked to its enclosing op on the same thread."""
    by_thread = collections.defaultdict(list)
    by_id = {}
    for e in events:
        if e.get("cat") not in ("cpu_op", "user_annotation") or e.get("ph") != "X":
            continue
        start = to_ns(e["ts"])
        op = Op(e["name"], start, start + to_ns(e["dur"]), op_shapes(e.get("args", {})))
        by_thread[(e["pid"], e["tid"])].append(op)
        by_id[e["args"].get("External id")] = op
    for ops in by_thread.values():
        link_parents(ops)
    return by_id


def link_parents(ops: list) -> None:
    """Nest ops by their intervals: the enclosing op is the parent."""
    ops.sort(key=lambda o: (o.start, -o.end))
    stack = []
    for op in ops:
        while stack and stack[-1].end < op.end:
            stack.pop()
        op.parent = stack[-1] if stack else None
        stack.append(op)


def kernel_from_event(e: dict, ops: dict) -> Kernel:
    args = e.get("args", {})
    return Kernel(
        name=e["name"], kind=e["cat"], dur_ns=to_ns(e["dur"]),
        grid=tuple(args.get("grid", (1, 1, 1))), block=tuple(args.get("block", (1, 1, 1))),
        regs=int(args.get("registers per thread", 0)), smem=int(args.get("shared memory", 0)),
        op=ops.get(args.get("External id")))


@functools.lru_cache(maxsize=None)
def load_trace(path: str, batch: int) -> Trace:
    events = load_json(path)["traceEvents"]
    ops = build_ops(events)
    trace = Trace(batch)
    for e in events:
        if e.get("cat") in ("kernel", "gpu_memset", "gpu_memcpy") and e.get("ph") == "X":
            trace.kernels.append(kernel_from_event(e, ops))
    classify_trace(trace)
    return trace


# ---------------------------------------------------------- batch dimension

def param_shapes(trace: Trace) -> set:
    """Shapes AccumulateGrad receives are the parameters' shapes; a tensor of
    such a shape is a weight (or its gradient), not an activation, even when
    its first dimension happens to be a multiple of the batch."""
    shapes = set()
    for k in trace.kernels:
        op = k.op
        while op is not None:
            if op.name == "torch::autograd::AccumulateGrad":
                shapes.update(tuple(s) for s in op.shapes)
            op = op.parent
    return shapes


def carries_batch(shape, batch: int, params: set) -> bool:
    """dim 0 a multiple of the batch (batch-first, or flattened batch x seq);
    dim 1 or 2 equal to it (sequence-first RNN inputs, [layers, batch,
    hidden] states, attention's packed [3, seq, batch, d]); or dim 1 a
    multiple of it in a 3-d or larger tensor (attention's [seq, batch x
    heads, d]). Parameter-shaped tensors never: autocast's weight copies
    have their weight's shape."""
    if not shape or tuple(shape) in params:
        return False
    if shape[0] >= batch and shape[0] % batch == 0:
        return True
    if batch in shape[1:3]:
        return True
    return len(shape) >= 3 and shape[1] >= batch and shape[1] % batch == 0


def ancestors(op):
    while op is not None:
        yield op
        op = op.parent


def classify_op(op, batch: int, params: set) -> str:
    """The innermost op with tensor shapes decides: outer ops (aten::linear)
    also enclose the autocast weight casts, which are parameter-sized."""
    if op is None:
        return "unknown"
    if any(f in a.name for a in ancestors(op) for f in FIXED_ANCESTORS):
        return "fixed"
    if op.name.startswith("aten::_foreach"):
        return "fixed"
    for a in ancestors(op):
        if a.shapes:
            if any(carries_batch(s, batch, params) for s in a.shapes):
                return "batch"
            return "fixed"
    return "unknown"


def family_of(k: Kernel) -> str:
    """Op family for the error breakdown: the innermost aten op's name."""
    for a in ancestors(k.op):
        if a.name.startswith("aten::"):
            return a.name
    return k.op.name if k.op else k.kind


def classify_trace(trace: Trace) -> None:
    params = param_shapes(trace)
    for k in trace.kernels:
        k.batched = classify_op(k.op, trace.batch, params)
        k.family = family_of(k)


# ------------------------------------------------------------- occupancy

def blocks_per_sm(threads: int, regs: int, smem: int) -> int:
    """Resident blocks per SM from the four Hopper limits."""
    threads = max(threads, 1)
    warps = math.ceil(threads / 32)
    limit = min(MAX_BLOCKS_PER_SM, THREADS_PER_SM // (warps * 32))
    if regs:
        regs_per_warp = math.ceil(regs * 32 / REG_ALLOC_UNIT) * REG_ALLOC_UNIT
        limit = min(limit, (REGS_PER_SM // regs_per_warp) // warps)
    if smem:
        limit = min(limit, SMEM_PER_SM // (smem + SMEM_PER_BLOCK_RESERVED))
    return max(limit, 1)


def waves(blocks: int, per_sm: int, sms: int = NUM_SMS) -> int:
    return max(1, math.ceil(blocks / (per_sm * sms)))


def kernel_capacity(k: Kernel) -> int:
    return blocks_per_sm(math.prod(k.block), k.regs, k.smem) * NUM_SMS


# ----------------------------------------------------------- scaling models

def scale_naive(t: float, r: float) -> float:
    return t * r


def scale_overhead(t: float, r: float, t0: float) -> float:
    """A fixed part that does not scale, the rest linear; t0 never above t."""
    t0 = min(t0, t)
    return t0 + (t - t0) * r


def scale_waves(t: float, r: float, blocks: int, capacity: int, t0: float) -> float:
    """Time follows the number of full-machine waves; the fixed part t0 stays."""
    new_blocks = math.ceil(blocks * r)
    ratio = waves(new_blocks, capacity, 1) / waves(blocks, capacity, 1)
    t0 = min(t0, t)
    return t0 + (t - t0) * ratio


def scale_fill(t: float, r: float, blocks: int, capacity: int, t0: float) -> float:
    """Work grows by r, but a grid that does not fill the machine gains SMs as
    it grows, so its time grows by r x (old fill / new fill): a small kernel
    stays flat until it fills the GPU, a large one scales linearly. No
    quantisation: PyTorch/cuDNN kernels change tiles with the shape, so
    wave tails at the target batch are not knowable from this one."""
    fill = min(1.0, blocks / capacity)
    new_fill = min(1.0, blocks * r / capacity)
    t0 = min(t0, t)
    return t0 + (t - t0) * r * fill / new_fill


def grid_is_fixed(k: Kernel) -> bool:
    """Persistent kernels launch one block set per SM (or a small multiple);
    their grid does not follow the batch, only their loop count does."""
    blocks = math.prod(k.grid)
    return blocks % NUM_SMS == 0 and blocks <= kernel_capacity(k)


def is_kernel_varying(k: Kernel) -> bool:
    return bool(KERNEL_VARYING.search(k.family))


def predict_kernel(k: Kernel, r: float, model: str, t0) -> float:
    """t0 is a number, or for model "kv" a pair (other ops, kernel-varying)."""
    t = float(k.dur_ns)
    if k.batched != "batch":  # parameter-sized, or no shapes to tell (listed)
        return t
    if model == "naive":
        return scale_naive(t, r)
    if model == "kv":
        return scale_overhead(t, r, t0[1] if is_kernel_varying(k) else t0[0])
    if model == "overhead" or k.kind != "kernel" or grid_is_fixed(k):
        return scale_overhead(t, r, t0)
    blocks, capacity = math.prod(k.grid), kernel_capacity(k)
    if model == "waves":
        return scale_waves(t, r, blocks, capacity, t0)
    return scale_fill(t, r, blocks, capacity, t0)


def min_duration_by_name(trace: Trace) -> dict:
    shortest = {}
    for k in trace.kernels:
        shortest[k.name] = min(shortest.get(k.name, k.dur_ns), k.dur_ns)
    return shortest


def predict(trace: Trace, r: float, model: str, t0=DEFAULT_T0_NS) -> float:
    """Sum of per-kernel predictions. t0 "min" is each name's shortest run."""
    shortest = min_duration_by_name(trace) if t0 == "min" else None
    return sum(predict_kernel(k, r, model, shortest[k.name] if shortest else t0)
               for k in trace.kernels)


MODELS = (
    ("a naive", "naive", 0),
    ("b overhead 2us", "overhead", 2000),
    ("b overhead 3us", "overhead", 3000),
    ("b overhead 4us", "overhead", 4000),
    ("b overhead min", "overhead", "min"),
    ("c waves 3us", "waves", 3000),
    ("d fill 3us", "fill", 3000),
)
KV_LABEL = "d two t0 (fit H200)"
FIT_GPU = "h200"
T0_GRID = (1000, 2000, 3000, 4000, 5000)
T0_KV_GRID = (2000, 3000, 4000, 6000, 8000, 12000, 16000)


def fit_two_overheads(cases, traces, gpu=FIT_GPU):
    """The (t0, t0 kernel-varying) pair with the lowest MAPE on one GPU's
    batch_memory cases; fitted on the H200 so the H100 numbers are out of
    sample."""
    fit = [c for c in cases if c.gpu == gpu and c.source == "batch_memory"]

    def score(pair):
        return mape([pct_error(predict(traces[(c.gpu, c.model, c.precision)],
                                       c.target / c.base, "kv", pair), c.measured)
                     for c in fit])
    return min(((a, b) for a in T0_GRID for b in T0_KV_GRID), key=score)


def add_fitted_model(cases, traces):
    pair = fit_two_overheads(cases, traces)
    for c in cases:
        c.predicted[KV_LABEL] = predict(traces[(c.gpu, c.model, c.precision)],
                                        c.target / c.base, "kv", pair)
    return pair


# ------------------------------------------------------------------ cases

def fixture_batches(gpu: str) -> dict:
    """{(model, precision): sorted batches} from the fixture file names."""
    found = collections.defaultdict(list)
    for name in os.listdir(os.path.join(KINETO, gpu)):
        m = re.fullmatch(r"(.+)_b(\d+)_(fp32|bf16)\.json\.gz", name)
        if m:
            found[(m[1], m[3])].append(int(m[2]))
    return {key: sorted(v) for key, v in found.items()}


def load_batch_memory(gpu: str) -> dict:
    with gzip.open(os.path.join(BATCH_MEMORY, f"{gpu}.json.gz"), "rt") as f:
        data = json.load(f)
    return {(c["model"], c["precision"], c["batch"]): c["gpu_time_ns_mean"]
            for c in data["cases"] if c.get("status") == "ok"}


def fixture_path(gpu, model, batch, precision):
    return os.path.join(KINETO, gpu, f"{model}_b{batch}_{precision}.json.gz")


@dataclass
class Case:
    gpu: str
    model: str
    precision: str
    base: int
    target: int
    source: str         # "fixture" or "batch_memory"
    measured: float
    base_measured: float  # the same source's value at the base batch
    predicted: dict


def cases_for(gpu, model, precision, batches, memory, trace) -> list:
    b, cases = batches[0], []

    def add(target, source, measured, base_measured):
        r = target / b
        pred = {label: predict(trace, r, kind, t0) for label, kind, t0 in MODELS}
        cases.append(Case(gpu, model, precision, b, target, source, measured,
                          base_measured, pred))

    for target in batches[1:]:
        other = load_trace(fixture_path(gpu, model, target, precision), target)
        add(target, "fixture", other.total_ns(), trace.total_ns())
    base_bm = memory.get((model, precision, b))
    for factor in (0.5, 2, 4):
        target = int(b * factor)
        if (model, precision, target) in memory and base_bm:
            add(target, "batch_memory", memory[(model, precision, target)], base_bm)
    return cases


def all_cases():
    cases, comparability, traces = [], [], {}
    for gpu in GPUS:
        memory = load_batch_memory(gpu)
        for (model, precision), batches in sorted(fixture_batches(gpu).items()):
            b = batches[0]
            trace = load_trace(fixture_path(gpu, model, b, precision), b)
            traces[(gpu, model, precision)] = trace
            comparability.append((gpu, model, precision, b, trace.total_ns(),
                                  memory.get((model, precision, b))))
            cases.extend(cases_for(gpu, model, precision, batches, memory, trace))
    return cases, comparability, traces


# --------------------------------------------------------------- reporting

def pct_error(predicted, measured) -> float:
    return 100.0 * (predicted - measured) / measured


def ratio_corrected(case: Case, label: str, fixture_base: float) -> float:
    """Prediction rescaled to the source's own value at b: isolates the
    scaling model from the run-to-run offset between the fixture capture
    and the batch_memory run."""
    return case.predicted[label] / fixture_base * case.base_measured


def r_label(case: Case) -> str:
    r = case.target / case.base
    return "1/2" if r == 0.5 else str(int(r))


def print_comparability(rows) -> None:
    print("\n## Fixture kernel sum at b vs batch_memory gpu_time_ns_mean at b\n")
    print("| gpu | model | prec | b | fixture ms | batch_memory ms | diff % |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for gpu, model, prec, b, fixture, bm in rows:
        diff = pct_error(fixture, bm) if bm else float("nan")
        print(f"| {gpu} | {model} | {prec} | {b} | {fixture/1e6:.3f} | "
              f"{(bm or 0)/1e6:.3f} | {diff:+.1f} |")
    diffs = [abs(pct_error(f, m)) for *_, f, m in rows if m]
    print(f"\nmean |diff| {sum(diffs)/len(diffs):.1f} %, max {max(diffs):.1f} %")


def print_cases(cases) -> None:
    labels = list(cases[0].predicted)
    print("\n## Per case: predicted GPU time ms (error %) vs measured\n")
    print("| gpu | model | prec | b->target | source | measured | "
          + " | ".join(labels) + " |")
    print("|" + " --- |" * (6 + len(labels)))
    for c in cases:
        cells = [f"{c.predicted[l]/1e6:.2f} ({pct_error(c.predicted[l], c.measured):+.1f})"
                 for l in labels]
        print(f"| {c.gpu} | {c.model} | {c.precision} | {c.base}->{c.target} | "
              f"{c.source} | {c.measured/1e6:.2f} | " + " | ".join(cells) + " |")


def mape(errors) -> float:
    return sum(abs(e) for e in errors) / len(errors) if errors else float("nan")


def case_errors(cases, label, fixture_base, corrected) -> dict:
    """Errors grouped by r (batch_memory targets) and "fixture" (the other fixture)."""
    errs = collections.defaultdict(list)
    for c in cases:
        p = c.predicted[label]
        if c.source == "fixture":
            errs["fixture"].append(pct_error(p, c.measured))
            continue
        if corrected:
            p = ratio_corrected(c, label, fixture_base[(c.gpu, c.model, c.precision)])
        errs[r_label(c)].append(pct_error(p, c.measured))
    return errs


def print_mape(cases, fixture_base, gpus, corrected=False) -> None:
    kind = ("ratio-corrected: pred / fixture(b) x batch_memory(b)" if corrected
            else "absolute")
    cases = [c for c in cases if c.gpu in gpus]
    print(f"\n## MAPE % on {'+'.join(gpus)}, {kind}\n")
    print("r = target / b; columns r=... are batch_memory targets; 'other fixture' is"
          " the committed trace at the larger fixture batch\n(2b, or 4b for resnet50 and"
          " inception_v3).\n")
    groups = ["1/2", "2", "4"]
    print("| scaling model | " + " | ".join(f"r={g}" for g in groups)
          + " | all r | cases <=5% | other fixture |")
    print("| --- |" + " --- |" * (len(groups) + 3))
    for label in cases[0].predicted:
        errs = case_errors(cases, label, fixture_base, corrected)
        every = [e for g in groups for e in errs[g]]
        within = sum(abs(e) <= 5 for e in every)
        print(f"| {label} | " + " | ".join(f"{mape(errs[g]):.1f}" for g in groups)
              + f" | {mape(every):.1f} | {within}/{len(every)} | {mape(errs['fixture']):.1f} |")


def print_mape_by_model(cases, label) -> None:
    print(f"\n## MAPE % by DNN ({label}, absolute, batch_memory targets)\n")
    print("| model | r=1/2 | r=2 | r=4 | other fixture |")
    print("| --- | --- | --- | --- | --- |")
    by = collections.defaultdict(lambda: collections.defaultdict(list))
    for c in cases:
        key = r_label(c) if c.source == "batch_memory" else "fixture"
        by[c.model][key].append(pct_error(c.predicted[label], c.measured))
    for model in sorted(by):
        g = by[model]
        print(f"| {model} | {mape(g['1/2']):.1f} | {mape(g['2']):.1f} | "
              f"{mape(g['4']):.1f} | {mape(g['fixture']):.1f} |")


def fixture_pairs(traces):
    """(trace at b, trace at the larger fixture batch) for every GPU/model/precision."""
    for (gpu, model, precision), trace in sorted(traces.items()):
        target = fixture_batches(gpu)[(model, precision)][1]
        yield trace, load_trace(fixture_path(gpu, model, target, precision), target)


def family_errors(traces, kind, t0):
    """|predicted - measured| per op family at the larger fixture batch, summed
    over traces (errors of one family in one trace cancel, across traces
    they do not), with the measured total for scale."""
    err, total = collections.Counter(), 0.0
    for trace, other in fixture_pairs(traces):
        diff = collections.Counter()
        r = other.batch / trace.batch
        for k in trace.kernels:
            diff[k.family] += predict_kernel(k, r, kind, t0)
        for k in other.kernels:
            diff[k.family] -= k.dur_ns
        for fam, d in diff.items():
            err[fam] += abs(d)
        total += other.total_ns()
    return err, total


def print_families(traces, pair, top=12) -> None:
    chosen = (("a naive", "naive", 0), ("b overhead 3us", "overhead", 3000),
              (KV_LABEL, "kv", pair))
    print("\n## Op families with the largest |error|, fixture b -> the larger fixture"
          " batch, all 28 pairs"
          " (% of the summed measured time there)\n")
    print("| family | " + " | ".join(label for label, *_ in chosen) + " |")
    print("| --- |" + " --- |" * len(chosen))
    results = [family_errors(traces, kind, t0) for _, kind, t0 in chosen]
    worst = sorted(results[-1][0], key=lambda f: -results[-1][0][f])[:top]
    for fam in worst:
        print(f"| {fam} | " + " | ".join(f"{100*err[fam]/total:.2f}" for err, total in results)
              + " |")


def kernel_switches(trace: Trace, other: Trace) -> collections.Counter:
    """Time at b, per family, in kernels whose name is launched a different
    number of times at the other batch: cuBLAS/cuDNN picked another kernel,
    which no per-kernel scaling of this trace can foresee."""
    count_b = collections.Counter(k.name for k in trace.kernels)
    count_o = collections.Counter(k.name for k in other.kernels)
    switched = collections.Counter()
    for k in trace.kernels:
        if count_b[k.name] != count_o[k.name]:
            switched[k.family] += k.dur_ns
    return switched


def print_kernel_switches() -> None:
    print("\n## Kernel selection changes between the two fixture batches"
          " (% of GPU time at b)\n")
    print("| gpu | model | prec | switched % | top families |")
    print("| --- | --- | --- | --- | --- |")
    for gpu in GPUS:
        for (model, prec), batches in sorted(fixture_batches(gpu).items()):
            trace = load_trace(fixture_path(gpu, model, batches[0], prec), batches[0])
            other = load_trace(fixture_path(gpu, model, batches[1], prec), batches[1])
            sw = kernel_switches(trace, other)
            top = ", ".join(f for f, _ in sw.most_common(3))
            print(f"| {gpu} | {model} | {prec} | "
                  f"{100*sum(sw.values())/trace.total_ns():.0f} | {top} |")


def print_unclassified(traces) -> None:
    print("\n## Classification: share of GPU time at b (all traces)\n")
    share = collections.Counter()
    unknown, fixed_other = collections.Counter(), collections.Counter()
    for trace in traces.values():
        for k in trace.kernels:
            share[k.batched] += k.dur_ns
            if k.batched == "unknown":
                unknown[k.op.name if k.op else "(no op)"] += k.dur_ns
            elif k.batched == "fixed" and not in_fixed_family(k):
                fixed_other[k.family] += k.dur_ns
    total = sum(share.values())
    for key in ("batch", "fixed", "unknown"):
        print(f"- {key}: {100*share[key]/total:.2f} %")
    print("\nunclassified (no tensor shapes on the op or its parents), ms:",
          ", ".join(f"{n} {t/1e6:.3f}" for n, t in unknown.most_common()) or "none")
    print("\nfixed by shape alone (no batch dim found; outside optimizer and"
          " AccumulateGrad), ms summed over traces:",
          ", ".join(f"{n} {t/1e6:.3f}" for n, t in fixed_other.most_common(12)))


def in_fixed_family(k: Kernel) -> bool:
    return (any(f in a.name for a in ancestors(k.op) for f in FIXED_ANCESTORS)
            or k.family.startswith("aten::_foreach"))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-cases", action="store_true", help="skip the per-case table")
    args = parser.parse_args(argv)
    cases, comparability, traces = all_cases()
    pair = add_fitted_model(cases, traces)
    fixture_base = {k: t.total_ns() for k, t in traces.items()}
    print_comparability(comparability)
    print(f"\n'{KV_LABEL}': t0 = {pair[0]/1000:g} us for other ops, {pair[1]/1000:g} us for"
          f" kernel-varying ops, chosen on the {FIT_GPU.upper()} batch_memory cases"
          " (its H200 rows are in-sample; the H100 rows are not)")
    print_mape(cases, fixture_base, ("h100",))
    print_mape(cases, fixture_base, ("h200",))
    print_mape(cases, fixture_base, GPUS, corrected=True)
    for label in ("a naive", "b overhead 3us", KV_LABEL):
        print_mape_by_model([c for c in cases if c.gpu == "h100"], label)
    print_unclassified(traces)
    print_families(traces, pair)
    print_kernel_switches()
    if not args.no_cases:
        print_cases(cases)
    return 0


if __name__ == "__main__":
    sys.exit(main())
