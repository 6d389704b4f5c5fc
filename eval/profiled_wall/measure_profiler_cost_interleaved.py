#!/usr/bin/env python3
"""The profiler's host cost per recorded op, per CUDA launch, per other CUDA
API call and per allocator event, with profiled and unprofiled steps
interleaved in one torch.profiler session (schedule wait=1, warmup=1,
active=1, repeated): the "wait" step of each cycle runs without the
profiler, the "active" one with it, so a host whose speed drifts (a shared
VM) moves both alike. The second run of measure_profiler_cost.py's question
(docs/profiled_wall_time.md says why it was needed).

  python3 measure_profiler_cost_interleaved.py OUT.json [--inner N] [--cycles N]
      [--only w1,w2]

Each workload is a loop of small CUDA ops (host-bound). Per cycle it records
the unprofiled step's and the profiled step's host time (perf_counter_ns,
synchronised after the step) and, from the profiled step's exported trace,
its cpu_op, launch (runtime/driver calls with a GPU activity), other
runtime-call and [memory] event counts and the median gap between
consecutive sibling cpu_ops nested in a cpu_op. Costs per event come from
the medians of the per-cycle differences.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import statistics
import sys
import tempfile

from measure_profiler_cost import run_environment, timed, workload_loops, write_json


def sibling_gaps(events):
    """Gaps (us) between consecutive cpu_op children of a cpu_op, per thread."""
    by_thread = collections.defaultdict(list)
    for e in events:
        if e.get("ph") == "X" and e.get("cat") == "cpu_op":
            by_thread[(e.get("pid"), e.get("tid"))].append(e)
    gaps = []
    for es in by_thread.values():
        es.sort(key=lambda e: (e["ts"], -e["dur"]))
        stack, children = [], collections.defaultdict(list)
        for i, e in enumerate(es):
            while stack and es[stack[-1]]["ts"] + es[stack[-1]]["dur"] < e["ts"] + e["dur"]:
                stack.pop()
            if stack:
                children[stack[-1]].append(i)
            stack.append(i)
        for kids in children.values():
            for a, b in zip(kids, kids[1:]):
                gap = es[b]["ts"] - es[a]["ts"] - es[a]["dur"]
                if gap >= 0:
                    gaps.append(gap)
    return gaps


def counts(trace):
    events = trace["traceEvents"]
    gpu = {e.get("args", {}).get("correlation") for e in events
           if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")}
    steps = [e for e in events if e.get("ph") == "X" and e.get("cat") == "user_annotation"
             and str(e.get("name", "")).startswith("ProfilerStep#")]
    if not steps:
        return {}
    step = max(steps, key=lambda e: e["ts"])  # the active one (warmup steps are not recorded)
    lo, hi = step["ts"], step["ts"] + step["dur"]
    inside = [e for e in events if "ts" in e and lo <= e["ts"] <= hi]
    runtime = [e for e in inside if e.get("ph") == "X" and e.get("cat") in ("cuda_runtime", "cuda_driver")]
    launches = sum(1 for e in runtime if e.get("args", {}).get("correlation") in gpu)
    gaps = sibling_gaps(inside)
    return {"profiled_step_us": step["dur"], "profiler_steps_in_trace": len(steps),
            "cpu_op": sum(1 for e in inside if e.get("ph") == "X" and e.get("cat") == "cpu_op"),
            "launch": launches, "other_runtime": len(runtime) - launches,
            "memory": sum(1 for e in inside if e.get("name") == "[memory]"),
            "sibling_pairs": len(gaps),
            "sibling_gap_median_us": statistics.median(gaps) if gaps else None}


def make_workloads(torch, n):
    """(name, loop, profile_memory) for each workload; each loop runs n ops.
    The loops are measure_profiler_cost.py's ("empties" are its "allocs";
    here the linear weights need no gradient), and "queries": one CUDA
    runtime call each (cudaStreamQuery), no op, no GPU work."""
    loops = workload_loops(torch, n, linear_weights_need_grad=False)
    stream = torch.cuda.current_stream()

    def queries():
        for _ in range(n):
            stream.query()

    views, empties, adds = loops["views"], loops["allocs"], loops["adds"]
    linears, mlp_steps = loops["linears"], loops["mlp_steps"]
    return [("views", views, False), ("empties", empties, False), ("adds", adds, False),
            ("queries", queries, False), ("linears", linears, False),
            ("mlp_steps", mlp_steps, False), ("empties_profile_memory", empties, True),
            ("mlp_steps_profile_memory", mlp_steps, True),
            *[(name, fn, False) for name, fn in cudnn_loops(torch, n).items()]]


def cudnn_loops(torch, n):
    """Loops of cuDNN work (the fp32 convolution nets are the fixtures whose
    profiler cost the model underestimates on every host): convolutions
    alone, and training steps of a small convolution net (convolution,
    batch norm, ReLU, four times; loss; backward; SGD), in fp32 and bf16."""
    import torch.nn.functional as F

    dev = torch.device("cuda")

    def net():
        layers = []
        for _ in range(4):
            layers += [torch.nn.Conv2d(16, 16, 3, padding=1), torch.nn.BatchNorm2d(16),
                       torch.nn.ReLU()]
        return torch.nn.Sequential(*layers).to(dev)

    x32 = torch.randn(4, 16, 16, 16, device=dev)
    w32 = torch.randn(16, 16, 3, 3, device=dev)
    x16, w16 = x32.bfloat16(), w32.bfloat16()
    model = net()
    opt = torch.optim.SGD(model.parameters(), lr=1e-4, momentum=0.9)

    def convs(x, w):
        def loop():
            for _ in range(n // 4):
                F.conv2d(x, w, padding=1)
        return loop

    def steps(autocast_dtype):
        def loop():
            for _ in range(max(1, n // 100)):
                opt.zero_grad(set_to_none=True)
                with torch.autocast("cuda", dtype=autocast_dtype or torch.bfloat16,
                                    enabled=autocast_dtype is not None):
                    loss = model(x32).float().square().mean()
                loss.backward()
                opt.step()
        return loop

    return {"convs_fp32": convs(x32, w32), "convs_bf16": convs(x16, w16),
            "conv_steps_fp32": steps(None), "conv_steps_bf16": steps(torch.bfloat16)}


def measure(torch, name, fn, profile_memory, n_cycles, scratch):
    """One workload's row: per cycle the unprofiled and the profiled step's
    host time and the profiled step's event counts, and their medians."""
    from torch.profiler import ProfilerActivity, profile, schedule

    for _ in range(3):
        fn()
    cycles = []
    traces = []

    def ready(p):
        path = os.path.join(scratch, f"{name}_{len(traces)}.json")
        p.export_chrome_trace(path)
        traces.append(path)

    # wait (unprofiled), warmup (profiler started, not recorded), active.
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
                 schedule=schedule(wait=1, warmup=1, active=1, repeat=n_cycles),
                 record_shapes=True, profile_memory=profile_memory, with_stack=False,
                 on_trace_ready=ready) as prof:
        for _ in range(n_cycles):
            unprofiled = timed(torch, fn)
            prof.step()
            timed(torch, fn)
            prof.step()
            profiled = timed(torch, fn)
            prof.step()
            cycles.append({"unprofiled_ns": unprofiled, "profiled_ns": profiled})
    for cycle, path in zip(cycles, traces):
        with open(path) as f:
            cycle.update(counts(json.load(f)))
        os.unlink(path)
    med = lambda k: statistics.median(c[k] for c in cycles if c.get(k) is not None) \
        if any(c.get(k) is not None for c in cycles) else None
    row = {"workload": name, "profile_memory": profile_memory,
           "unprofiled_ns_median": med("unprofiled_ns"),
           "profiled_ns_median": med("profiled_ns"),
           "cost_ns_median": statistics.median(c["profiled_ns"] - c["unprofiled_ns"]
                                               for c in cycles),
           **{k: med(k) for k in ("cpu_op", "launch", "other_runtime", "memory",
                                  "sibling_pairs", "sibling_gap_median_us")},
           "cycles": cycles}
    print(f"{name:26s} first unprofiled {cycles[0]['unprofiled_ns']/1e3:9.1f} us  unprofiled "
          f"{row['unprofiled_ns_median']/1e3:9.1f} us  profiled "
          f"{row['profiled_ns_median']/1e3:9.1f} us  cost {row['cost_ns_median']/1e3:8.1f} us  "
          f"ops {row['cpu_op']} launches {row['launch']} other {row['other_runtime']} "
          f"memory {row['memory']} gap {row['sibling_gap_median_us']}", flush=True)
    return row


def fit_costs(results):
    """Costs per event from the workloads' rows: per workload, and least
    squares over the profile_memory=False ones, in ns and in sibling gaps."""
    by = {r["workload"]: r for r in results}

    def per(w, k):
        return by[w]["cost_ns_median"] / by[w][k] if by[w].get(k) else None

    fit = {"cost_per_view_op_ns": per("views", "cpu_op"),
           "cost_per_empty_op_ns": per("empties", "cpu_op"),
           "cost_per_add_op_with_launch_ns": per("adds", "cpu_op"),
           "cost_per_stream_query_ns": per("queries", "other_runtime")}
    if fit["cost_per_add_op_with_launch_ns"] and fit["cost_per_view_op_ns"]:
        fit["cost_per_launch_ns_adds_less_view_op"] = (fit["cost_per_add_op_with_launch_ns"]
                                                       - fit["cost_per_view_op_ns"])
    if by["empties_profile_memory"].get("memory"):
        fit["cost_per_memory_event_ns"] = (
            (by["empties_profile_memory"]["cost_ns_median"] - by["empties"]["cost_ns_median"])
            / by["empties_profile_memory"]["memory"])
    gaps = [by[w]["sibling_gap_median_us"] for w in ("linears", "mlp_steps")
            if by[w].get("sibling_gap_median_us")]
    fit["sibling_gap_median_us"] = statistics.median(gaps) if gaps else None
    # Least squares, no intercept, over the profile_memory=False workloads:
    # cost = c_op * cpu_ops + c_launch * launches + c_call * other runtime calls.
    rows = [r for r in results if not r["profile_memory"]]
    xs = [[r["cpu_op"] or 0, r["launch"] or 0, r["other_runtime"] or 0] for r in rows]
    ys = [r["cost_ns_median"] for r in rows]
    try:
        import numpy as np
        coef, *_ = np.linalg.lstsq(np.array(xs, float), np.array(ys, float), rcond=None)
        fit["least_squares_ns"] = {"per_cpu_op": coef[0], "per_launch": coef[1],
                                   "per_other_runtime_call": coef[2]}
        if fit["sibling_gap_median_us"]:
            fit["least_squares_in_sibling_gaps"] = {
                k: v / 1e3 / fit["sibling_gap_median_us"]
                for k, v in fit["least_squares_ns"].items()}
    except Exception as exc:  # numpy missing: the per-workload costs stand
        fit["least_squares_error"] = str(exc)
    return fit


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("out")
    parser.add_argument("--inner", type=int, default=1000)
    parser.add_argument("--cycles", type=int, default=9)
    parser.add_argument("--only", default="", help="comma-separated workloads (default: all)")
    args = parser.parse_args()

    import torch

    n = args.inner
    scratch = tempfile.mkdtemp()
    only = {w for w in args.only.split(",") if w}
    results = [measure(torch, name, fn, profile_memory, args.cycles, scratch)
               for name, fn, profile_memory in make_workloads(torch, n)
               if not only or name in only]
    fit = fit_costs(results) if not only else {}
    print(json.dumps(fit, indent=1), flush=True)
    doc = {**run_environment(torch, "eval/profiled_wall/measure_profiler_cost_interleaved.py"),
           "inner_ops": n, "cycles": args.cycles, "fit": fit, "workloads": results}
    write_json(args.out, doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
