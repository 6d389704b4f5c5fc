#!/usr/bin/env python3
"""Measures what torch.profiler (Kineto) costs the host, per recorded op and
per CUDA launch, on the GPU machine it runs on. Superseded by
measure_profiler_cost_interleaved.py, which interleaves profiled and
unprofiled steps: here the unprofiled blocks run before and after one
profiler session, and a drifting host moves them apart (kept for the record
of the first run, docs/profiled_wall_time.md).

Each workload is a loop of small CUDA ops (host-bound: the GPU finishes each
kernel before the next launch arrives). It is timed without the profiler,
then inside torch.profiler with the settings of the committed fixtures
(CPU + CUDA activities, record_shapes=True, profile_memory=False,
with_stack=False, schedule wait=1 warmup=2 active=5, a synchronize at the end
of each step), then without it again. From the exported trace it counts,
per active step, the cpu_op events, the cuda_runtime/cuda_driver events and
the allocator's [memory] events, and the gap between consecutive sibling
cpu_ops nested in a cpu_op (the "sibling gap", the speed unit the importer
scales its constants by: docs/profiled_wall_time.md). The profiler's cost of
a step is its profiled host time less the unprofiled one; least squares over
the workloads splits it into a cost per cpu_op and per launch.

  python3 measure_profiler_cost.py OUT.json [--inner N]

Plain torch; no habitat code. Host time is time.perf_counter_ns around each
step, synchronised after it (the fixtures' wall times are CUDA events around
a synchronised step: the same span for a host-bound step).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import platform
import socket
import statistics
import sys
import tempfile
import time


def sibling_gaps(events):
    """Gaps (us) between consecutive sibling cpu_ops whose parent is a cpu_op."""
    by_thread = collections.defaultdict(list)
    for e in events:
        if e.get("ph") == "X" and e.get("cat") in ("cpu_op", "cuda_runtime", "cuda_driver"):
            by_thread[(e.get("pid"), e.get("tid"))].append(e)
    gaps = []
    for es in by_thread.values():
        es.sort(key=lambda e: (e["ts"], -e["dur"]))
        stack, children = [], collections.defaultdict(list)
        for i, e in enumerate(es):
            while stack and es[stack[-1]]["ts"] + es[stack[-1]]["dur"] <= e["ts"]:
                stack.pop()
            if stack:
                children[stack[-1]].append(i)
            stack.append(i)
        for parent, kids in children.items():
            if es[parent]["cat"] != "cpu_op":
                continue
            for a, b in zip(kids, kids[1:]):
                if es[a]["cat"] == "cpu_op" and es[b]["cat"] == "cpu_op":
                    gaps.append(es[b]["ts"] - es[a]["ts"] - es[a]["dur"])
    return gaps


def step_counts(trace):
    """Per active ProfilerStep: event counts and the sibling-gap median."""
    events = trace["traceEvents"]
    steps = sorted((e for e in events if e.get("ph") == "X" and e.get("cat") == "user_annotation"
                    and str(e.get("name", "")).startswith("ProfilerStep#")),
                   key=lambda e: e["ts"])
    out = []
    for s in steps:
        lo, hi = s["ts"], s["ts"] + s["dur"]
        inside = [e for e in events if "ts" in e and lo <= e["ts"] <= hi]
        cats = collections.Counter(e.get("cat") for e in inside if e.get("ph") == "X")
        memory = sum(1 for e in inside if e.get("name") == "[memory]")
        gaps = sibling_gaps(inside)
        launches = [e["dur"] for e in inside if e.get("name") == "cudaLaunchKernel"]
        out.append({
            "step": s["name"], "profiled_step_us": s["dur"],
            "cpu_op": cats["cpu_op"], "runtime": cats["cuda_runtime"] + cats["cuda_driver"],
            "memory_events": memory, "sibling_pairs": len(gaps),
            "sibling_gap_median_us": statistics.median(gaps) if gaps else None,
            "cudaLaunchKernel_median_us": statistics.median(launches) if launches else None,
        })
    return out


def workload_loops(torch, n, linear_weights_need_grad=True):
    """The loops both profiler-cost scripts time, by name; each runs n ops.

    linear_weights_need_grad: "linears" multiplies by weights that need a
    gradient, under torch.no_grad() (this script's first run); without it
    the weights need none and no no_grad() is entered (the interleaved run).
    """
    import torch.nn.functional as F

    dev = torch.device("cuda")
    x = torch.zeros(16, device=dev)
    a = torch.randn(8, 8, device=dev)
    w = torch.randn(8, 8, device=dev, requires_grad=linear_weights_need_grad)
    b = torch.randn(8, device=dev, requires_grad=linear_weights_need_grad)
    mlp = torch.nn.Sequential(*[m for _ in range(8) for m in (torch.nn.Linear(32, 32),
                                                              torch.nn.GELU())]).to(dev)
    opt = torch.optim.Adam(mlp.parameters(), lr=1e-4)
    inp = torch.randn(4, 32, device=dev)

    def views():          # cpu_ops only: aten::view
        for _ in range(n):
            x.view(-1)

    def adds():           # one cpu_op and one launch each: aten::add_
        for _ in range(n):
            x.add_(1.0)

    def linear_loop():
        for _ in range(n // 4):
            F.linear(a, w, b)

    def linears():        # aten::linear > aten::t > ..., aten::addmm: nested ops, a launch
        if linear_weights_need_grad:
            with torch.no_grad():
                linear_loop()
        else:
            linear_loop()

    def allocs():         # aten::empty: an allocation and a free each
        for _ in range(n):
            torch.empty(1024, device=dev)

    def mlp_steps():      # a training step: forward, backward (autograd thread), Adam
        for _ in range(max(1, n // 100)):
            opt.zero_grad(set_to_none=True)
            mlp(inp).square().mean().backward()
            opt.step()

    return {"views": views, "adds": adds, "linears": linears, "allocs": allocs,
            "mlp_steps": mlp_steps}


def make_workloads(torch, n):
    """(name, loop, profiler options) for each workload; each loop runs n ops."""
    loops = workload_loops(torch, n)
    return [("views", loops["views"], {}), ("adds", loops["adds"], {}),
            ("linears", loops["linears"], {}), ("mlp_steps", loops["mlp_steps"], {}),
            ("allocs", loops["allocs"], {}),
            ("allocs_profile_memory", loops["allocs"], {"profile_memory": True}),
            ("mlp_steps_profile_memory", loops["mlp_steps"], {"profile_memory": True}),
            ("linears_no_shapes", loops["linears"], {"record_shapes": False})]


def timed(torch, fn):
    """Host time (ns) of fn(), the GPU synchronised before and after."""
    torch.cuda.synchronize()
    t0 = time.perf_counter_ns()
    fn()
    torch.cuda.synchronize()
    return time.perf_counter_ns() - t0


def run_environment(torch, script):
    """Where and how the measurement ran: the head of the output JSON."""
    return {
        "script": script,
        "command": " ".join(sys.argv),
        "captured_at_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "hostname": socket.gethostname(), "python": platform.python_version(),
        "torch": torch.__version__, "torch_cuda": torch.version.cuda,
        "device_name": torch.cuda.get_device_name(0),
        "cpu_count": os.cpu_count(),
    }


def write_json(path, doc):
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")


def measure(torch, name, fn, options, reps, scratch):
    """One workload's row: unprofiled steps before and after one profiler
    session, the profiled steps in it, and their event counts."""
    from torch.profiler import ProfilerActivity, profile, schedule

    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    before = [timed(torch, fn) for _ in range(reps)]
    path = os.path.join(scratch, f"{name}.json")
    wait, warmup, active = 1, 2, 5
    profiled = []
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
                 schedule=schedule(wait=wait, warmup=warmup, active=active, repeat=1),
                 record_shapes=options.get("record_shapes", True),
                 profile_memory=options.get("profile_memory", False), with_stack=False,
                 on_trace_ready=lambda p: p.export_chrome_trace(path)) as prof:
        for i in range(wait + warmup + active):
            t = timed(torch, fn)
            if i >= wait + warmup:
                profiled.append(t)
            prof.step()
    after = [timed(torch, fn) for _ in range(reps)]
    with open(path) as f:
        steps = step_counts(json.load(f))
    os.unlink(path)
    unprofiled_ns = statistics.median(before + after)
    profiled_ns = statistics.median(profiled)
    per_step = {k: statistics.median(s[k] for s in steps if s[k] is not None)
                for k in ("cpu_op", "runtime", "memory_events", "sibling_pairs",
                          "sibling_gap_median_us", "cudaLaunchKernel_median_us")
                if any(s[k] is not None for s in steps)}
    row = {"workload": name, "options": options,
           "unprofiled_ns_median": unprofiled_ns,
           "unprofiled_ns_before": statistics.median(before),
           "unprofiled_ns_after": statistics.median(after),
           "profiled_ns_median": profiled_ns, "profiled_ns": profiled,
           "profiler_cost_ns": profiled_ns - unprofiled_ns,
           "per_step": per_step, "steps": steps}
    print(f"{name:26s} unprofiled {unprofiled_ns/1e3:9.1f} us  profiled "
          f"{profiled_ns/1e3:9.1f} us  ops {per_step.get('cpu_op')}  "
          f"runtime {per_step.get('runtime')}  memory {per_step.get('memory_events')}  "
          f"sibling gap {per_step.get('sibling_gap_median_us')}", flush=True)
    return row


def fit_costs(results):
    """Costs per cpu_op and per runtime call (least squares), per memory
    event, and in sibling gaps; adds each fitted row's residual."""
    # Least squares over the record_shapes=True, profile_memory=False
    # workloads: cost = c_op * cpu_ops + c_rt * runtime calls.
    fit_rows = [r for r in results if not r["options"]]
    sxx = sum(r["per_step"]["cpu_op"] ** 2 for r in fit_rows)
    syy = sum(r["per_step"]["runtime"] ** 2 for r in fit_rows)
    sxy = sum(r["per_step"]["cpu_op"] * r["per_step"]["runtime"] for r in fit_rows)
    sxc = sum(r["per_step"]["cpu_op"] * r["profiler_cost_ns"] for r in fit_rows)
    syc = sum(r["per_step"]["runtime"] * r["profiler_cost_ns"] for r in fit_rows)
    det = sxx * syy - sxy * sxy
    c_op = (sxc * syy - syc * sxy) / det
    c_rt = (sxx * syc - sxy * sxc) / det
    nested = [r["per_step"]["sibling_gap_median_us"] for r in fit_rows
              if r["per_step"].get("sibling_pairs", 0) >= 20]
    gap_us = statistics.median(nested) if nested else None
    fit = {"cost_per_cpu_op_ns": c_op, "cost_per_runtime_call_ns": c_rt,
           "sibling_gap_median_us": gap_us,
           "cost_per_cpu_op_in_sibling_gaps": c_op / 1e3 / gap_us if gap_us else None,
           "cost_per_runtime_call_in_sibling_gaps": c_rt / 1e3 / gap_us if gap_us else None}
    for r in fit_rows:
        p = r["per_step"]
        r["fit_residual_ns"] = r["profiler_cost_ns"] - c_op * p["cpu_op"] - c_rt * p["runtime"]
    mem = {r["workload"]: r for r in results}
    if "allocs" in mem and "allocs_profile_memory" in mem:
        extra = mem["allocs_profile_memory"]["profiled_ns_median"] - mem["allocs"]["profiled_ns_median"]
        events = mem["allocs_profile_memory"]["per_step"].get("memory_events") or 0
        fit["cost_per_memory_event_ns"] = extra / events if events else None
    return fit


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("out")
    parser.add_argument("--inner", type=int, default=1000)
    parser.add_argument("--reps", type=int, default=9)
    args = parser.parse_args()

    import torch

    n = args.inner
    scratch = tempfile.mkdtemp()
    results = [measure(torch, name, fn, options, args.reps, scratch)
               for name, fn, options in make_workloads(torch, n)]

    fit = fit_costs(results)
    print(json.dumps(fit, indent=1), flush=True)

    doc = {
        **run_environment(torch, "eval/profiled_wall/measure_profiler_cost.py"),
        "inner_ops": n, "reps": args.reps,
        "fit": fit, "workloads": results,
    }
    write_json(args.out, doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
