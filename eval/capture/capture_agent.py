#!/usr/bin/env python3
"""Captures the agent fixtures under tests/testdata/agent/<gpu>/.

Same workloads as capture_fixtures.py (build_step: the paper's five models
plus GPT-2 small and ViT-B/16, SGD for the CNNs, Adam(W) for the rest), three
batch sizes each, fp32 and bf16 autocast, but captured with the project's
own agent (habitat_agent.OperationTracker: RecordFunction + CUPTI) instead of
torch.profiler. For each case:
  * wall time: CUDA events around each of 30 iterations after 10 warm-up
    iterations (median, p10, p90) -- untracked;
  * GPU-busy time: habitat_agent.measure_gpu_busy, 30 iterations in one CUPTI
    region with a synchronisation after each (median);
  * one tracked iteration -> <case>.trace.gz (habitat.v1.Trace, gzip), with
    iteration_wall_ns = the untracked median;
  * optionally per-op re-runs (tracker.measure_ops, when the agent has it)
    and hardware counters (tracker.collect_counters), each within the
    time budget.

Sub-commands:
  all       every case, one child process per model, then `merge`
  run       the cases of some models in this process (used by `all`)
  merge     <out>/measurements.json from the per-case results (no torch)
  hostbench host speed micro-benchmarks (Python, CPU ops, CUDA launches)
  overhead  capture overhead on ResNet-50: torch.profiler vs the agent,
            each in its own process (CUPTI has one client per process)
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import re
import statistics
import subprocess
import sys
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT / "agent" / "python"))

import capture_fixtures as cf  # noqa: E402  (build_step, environment, ...)

# The paper's five first: when the budget runs out, the extras go first.
MODELS = ("resnet50", "inception_v3", "transformer", "gnmt", "dcgan", "gpt2", "vit")
# capture_fixtures' two batch sizes plus a third, so that batch trends show.
BATCHES = {
    "resnet50": (16, 32, 64),
    "inception_v3": (16, 32, 64),
    "transformer": (16, 32, 64),
    "gnmt": (16, 32, 64),
    "dcgan": (32, 64, 128),
    "gpt2": (4, 8, 16),
    "vit": (16, 32, 64),
}
PRECISIONS = ("fp32", "bf16")
# The tracker's names for the case precisions (autocast is "amp_*").
TRACKER_PRECISION = {"fp32": "fp32", "tf32": "tf32", "bf16": "amp_bf16", "fp16": "amp_fp16"}
WARMUP = 10
REPETITIONS = 30
MIN_CASE_S = 10.0


def split_list(text: str):
    """Lists on the command line: comma- or plus-separated."""
    return [x for x in re.split(r"[,+]", text) if x]


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def cases(models, only=None, precisions=PRECISIONS):
    for model in models:
        for batch in BATCHES[model]:
            for precision in precisions:
                name = cf.case_name(model, batch, precision)
                if only is None or name in only:
                    yield model, batch, precision, name


def run_case(model, batch, precision, name, out_dir: Path, opts) -> dict:
    import torch
    import habitat_agent

    r = {"case": name, "model": model, "batch_size": batch, "precision": precision}
    t0 = time.time()
    stage = {}
    step = cf.build_step(model, batch, precision)
    torch.cuda.reset_peak_memory_stats()
    for _ in range(WARMUP):
        step()
    torch.cuda.synchronize()
    stage["warmup_s"] = round(time.time() - t0, 2)

    t = time.time()
    wall, host = cf.time_iterations(step, REPETITIONS)
    r.update({
        "repetitions": REPETITIONS, "warmup_iterations": WARMUP,
        "wall_ns_median": cf.percentile_int(wall, 50),
        "wall_ns_p10": cf.percentile_int(wall, 10),
        "wall_ns_p90": cf.percentile_int(wall, 90),
        "wall_ns_samples": wall,
        "host_clock_ns_median": cf.percentile_int(host, 50),
        "peak_memory_allocated_bytes": torch.cuda.max_memory_allocated(),
    })
    stage["wall_s"] = round(time.time() - t, 2)

    t = time.time()
    busy = habitat_agent.measure_gpu_busy(step, repetitions=REPETITIONS, warmup=1)
    r["gpu_busy_ns_samples"] = busy["busy_ns"]
    r["gpu_busy_ns_median"] = cf.percentile_int(busy["busy_ns"], 50)
    stage["busy_s"] = round(time.time() - t, 2)

    t = time.time()
    tracker = habitat_agent.OperationTracker(model_name=model, batch_size=batch,
                                       precision=TRACKER_PRECISION[precision],
                                       verbose=False)
    with tracker.track():
        step()
    stage["track_s"] = round(time.time() - t, 2)

    # Counters and re-runs cost 5-15 s a case (H100); by default only the
    # middle batch size gets them, so a GPU's 42 cases fit one 10-minute run.
    extras = opts.extras_all_batches or batch == BATCHES[model][len(BATCHES[model]) // 2]
    if opts.measure_ops and extras and hasattr(tracker, "measure_ops"):
        t = time.time()
        try:
            rep = tracker.measure_ops(max_seconds=opts.measure_ops_s)
            r["measure_ops"] = rep
        except Exception as exc:
            r["measure_ops"] = {"error": f"{type(exc).__name__}: {exc}"}
        stage["measure_ops_s"] = round(time.time() - t, 2)

    left = opts.deadline - time.time()
    if not extras:
        pass
    elif opts.counters and left > opts.counter_reserve_s:
        t = time.time()
        try:
            rep = tracker.collect_counters(step)
            r["counters"] = {k: v for k, v in rep.items()
                             if k not in ("wanted_keys",)}
        except Exception as exc:
            r["counters"] = {"error": f"{type(exc).__name__}: {exc}"}
        stage["counters_s"] = round(time.time() - t, 2)
    elif opts.counters:
        r["counters"] = {"skipped": f"{left:.0f} s left, reserve {opts.counter_reserve_s} s"}

    trace = tracker.get_tracked_trace(iteration_wall_ns=r["wall_ns_median"])
    path = out_dir / f"{name}.trace.gz"
    trace.save(str(path))
    s = trace.summary
    r["tracked"] = {k: s[k] for k in (
        "operations", "operations_with_backward", "kernels", "unattributed_kernels",
        "memory_activities", "pass_time_ns", "unattributed_kernel_ns", "gpu_busy_ns")}
    r["tracked"]["tracked_wall_ns"] = int(s["metadata"].get("agent.tracked_wall_ns", 0))
    r["tracked"]["metadata"] = s["metadata"]
    # Item 4's check: per-op times add up to the GPU-busy time.
    per_op = s["pass_time_ns"] + s["unattributed_kernel_ns"]
    r["per_op_sum_over_busy_tracked"] = round(per_op / s["gpu_busy_ns"], 4)
    r["per_op_sum_over_busy_median"] = round(per_op / r["gpu_busy_ns_median"], 4)
    r["trace_file"] = f"tests/testdata/agent/{opts.gpu}/{name}.trace.gz"
    r["trace_bytes"] = path.stat().st_size
    r["host_share"] = round(1.0 - r["gpu_busy_ns_median"] / r["wall_ns_median"], 4)
    r["stage_seconds"] = stage
    r["seconds_taken"] = round(time.time() - t0, 1)
    r["status"] = "ok"
    return r


def cmd_run(args) -> int:
    import torch
    out_dir = Path(args.out)
    (out_dir / "cases").mkdir(parents=True, exist_ok=True)
    only = set(split_list(args.cases)) if args.cases else None
    failures = 0
    for model, batch, precision, name in cases(split_list(args.models), only,
                                               split_list(args.precisions)):
        left = args.deadline - time.time()
        if left < MIN_CASE_S:
            r = {"case": name, "model": model, "batch_size": batch,
                 "precision": precision, "status": "skipped",
                 "error": f"time budget exhausted ({left:.0f} s left)"}
            log(f"SKIP {name}")
        else:
            log(f"start {name}")
            try:
                r = run_case(model, batch, precision, name, out_dir, args)
                log(f"ok   {name}: wall {r['wall_ns_median']/1e6:.2f} ms busy "
                    f"{r['gpu_busy_ns_median']/1e6:.2f} ms, tracked busy "
                    f"{r['tracked']['gpu_busy_ns']/1e6:.2f} ms, per-op/busy "
                    f"{r['per_op_sum_over_busy_median']}, {r['trace_bytes']/1e3:.0f} kB, "
                    f"stages {r['stage_seconds']}")
                if "counters" in r:
                    c = r["counters"]
                    log(f"     counters: {c.get('status', c)} {c.get('message', '')} "
                        f"covered {c.get('covered_fraction')} matched {c.get('matched')}"
                        f"/{c.get('kernels')} passes {c.get('replay_passes')}")
                if "measure_ops" in r:
                    m = r["measure_ops"]
                    log(f"     measure_ops: { {k: v for k, v in m.items() if not isinstance(v, (list, dict))} }")
            except Exception as exc:
                failures += 1
                r = {"case": name, "model": model, "batch_size": batch,
                     "precision": precision, "status": "failed",
                     "error": f"{type(exc).__name__}: {exc}",
                     "traceback": traceback.format_exc()}
                log(f"FAIL {name}: {r['error']}")
                print(r["traceback"], flush=True)
        with open(out_dir / "cases" / f"{name}.json", "w") as f:
            json.dump(r, f, indent=1)
        gc.collect()
        torch.cuda.empty_cache()
    return 1 if failures else 0


def cmd_all(args) -> int:
    deadline = time.time() + args.budget_s
    rc = 0
    env = None
    for model in split_list(args.models):
        left = deadline - time.time()
        cmd = [sys.executable, os.path.abspath(__file__), "run", "--gpu", args.gpu,
               "--out", args.out, "--models", model, "--deadline", str(deadline),
               "--measure-ops-s", str(args.measure_ops_s),
               "--counter-reserve-s", str(args.counter_reserve_s),
               "--precisions", args.precisions]
        if args.cases:
            cmd += ["--cases", args.cases]
        if args.counters:
            cmd.append("--counters")
        if args.measure_ops:
            cmd.append("--measure-ops")
        if args.extras_all_batches:
            cmd.append("--extras-all-batches")
        try:
            rc |= subprocess.run(cmd, timeout=max(left, 1) + 20).returncode != 0
        except subprocess.TimeoutExpired:
            log(f"{model} ran past the budget and was stopped")
            rc = 1
    if env is None:
        try:
            out = subprocess.run([sys.executable, "-c",
                                  "import json,sys; sys.path.insert(0, %r); import capture_fixtures as cf; "
                                  "print(json.dumps(cf.environment(%r)))" % (str(HERE), args.gpu)],
                                 capture_output=True, text=True, timeout=60)
            env = json.loads(out.stdout)
        except Exception as exc:
            env = {"error": str(exc)}
    with open(Path(args.out) / "environment.json", "w") as f:
        json.dump(env, f, indent=1)
    return rc | cmd_merge(args)


def cmd_merge(args) -> int:
    out = Path(args.out)
    results = []
    for p in sorted((out / "cases").glob("*.json")):
        with open(p) as f:
            results.append(json.load(f))
    env = {}
    if (out / "environment.json").exists():
        env = json.loads((out / "environment.json").read_text())
    doc = {
        "gpu_tag": args.gpu,
        "capture_script": "eval/capture/capture_agent.py",
        "protocol": {
            "iteration": "zero_grad, forward, loss, backward, optimizer step",
            "warmup_iterations": WARMUP,
            "repetitions": REPETITIONS,
            "wall_time": "CUDA events around each iteration, synchronised after it, untracked",
            "gpu_busy": "habitat_agent.measure_gpu_busy: union of the kernel/memcpy/memset "
                        "intervals of each iteration, 30 iterations in one CUPTI region",
            "trace": "one iteration tracked with habitat_agent.OperationTracker; "
                     "iteration_wall_ns = untracked wall median",
            "host_share": "1 - gpu_busy_ns_median / wall_ns_median",
        },
        "environment": env,
        "cases": [r for r in results if r.get("status") == "ok"],
        "missing": [{k: r.get(k) for k in ("case", "status", "error")}
                    for r in results if r.get("status") != "ok"],
    }
    with open(out / "measurements.json", "w") as f:
        json.dump(doc, f, indent=1)
    log(f"merged {len(doc['cases'])} cases, {len(doc['missing'])} missing")
    return 0


def _median_ns(fn, runs=11):
    vals = []
    for _ in range(runs):
        t = time.perf_counter_ns()
        fn()
        vals.append(time.perf_counter_ns() - t)
    return statistics.median(vals)


def cmd_hostbench(args) -> int:
    """Host speed, measured apart from any model: the factor between two
    machines' CPUs that the wall-time prediction needs."""
    import torch
    n = 20000
    res = {"cpu_model": "", "os_cpu_count": os.cpu_count()}
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                res["cpu_model"] = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass

    def py_loop():
        acc = 0
        for i in range(n * 10):
            acc += i * i
        return acc
    res["python_loop_ns_per_iter"] = _median_ns(py_loop) / (n * 10)

    a = torch.ones(16)
    b = torch.ones(16)

    def cpu_ops():
        for _ in range(n):
            torch.add(a, b)
    cpu_ops()
    res["torch_cpu_add_ns_per_op"] = _median_ns(cpu_ops) / n

    ca = torch.ones(16, device="cuda")
    cb = torch.ones(16, device="cuda")
    cc = torch.empty(16, device="cuda")

    def launches():
        for _ in range(n):
            torch.add(ca, cb, out=cc)
        torch.cuda.synchronize()
    launches()
    res["torch_cuda_add_ns_per_launch"] = _median_ns(launches) / n

    net = torch.nn.Sequential(*[torch.nn.Linear(64, 64) for _ in range(8)]).cuda()
    x = torch.randn(8, 64, device="cuda")
    opt = torch.optim.Adam(net.parameters())

    def tiny_steps():
        for _ in range(200):
            opt.zero_grad(set_to_none=True)
            net(x).sum().backward()
            opt.step()
        torch.cuda.synchronize()
    tiny_steps()
    res["tiny_mlp_adam_step_ns"] = _median_ns(tiny_steps) / 200
    res["device"] = torch.cuda.get_device_name(0)
    res["measured_at_utc"] = cf.utc_now()
    print(json.dumps(res, indent=1))
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(res, indent=1))
    return 0


def cmd_overhead_one(args) -> int:
    """One capture method, in this process (see cmd_overhead)."""
    import torch
    step = cf.build_step("resnet50", args.batch, "fp32")
    for _ in range(WARMUP):
        step()
    torch.cuda.synchronize()
    out = Path(args.scratch)
    out.mkdir(parents=True, exist_ok=True)
    times = []
    extra = {}
    for i in range(args.runs):
        t = time.perf_counter()
        if args.method == "torch_profiler":
            from torch.profiler import ProfilerActivity, profile
            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
                         record_shapes=True) as prof:
                step()
                torch.cuda.synchronize()
            prof.export_chrome_trace(str(out / f"profiler_{i}.json"))
        else:
            import habitat_agent
            tracker = habitat_agent.OperationTracker(model_name="resnet50", batch_size=args.batch,
                                               verbose=False)
            with tracker.track():
                step()
            if args.method == "agent_counters":
                rep = tracker.collect_counters(step)
                extra = {k: rep.get(k) for k in ("status", "message", "seconds",
                                                 "replay_passes", "covered_fraction",
                                                 "matched", "kernels")}
            if args.method == "agent_measure_ops":
                rep = tracker.measure_ops()
                extra = {k: v for k, v in rep.items() if not isinstance(v, (list, dict))}
            tracker.get_tracked_trace().save(str(out / f"agent_{i}.trace.gz"))
        times.append(time.perf_counter() - t)
        step()  # an untracked iteration between captures
        torch.cuda.synchronize()
    print(json.dumps({"method": args.method, "batch": args.batch, "seconds": times,
                      "median_s": statistics.median(times), "extra": extra}))
    return 0


def cmd_overhead(args) -> int:
    results = []
    for method, runs in (("torch_profiler", 3), ("agent", 3), ("agent_measure_ops", 1),
                         ("agent_counters", 1)):
        cmd = [sys.executable, os.path.abspath(__file__), "overhead-one", "--method", method,
               "--runs", str(runs), "--batch", str(args.batch), "--scratch", args.scratch]
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout_s)
            line = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
            if p.returncode == 0 and line:
                results.append(json.loads(line[-1]))
            else:
                results.append({"method": method, "error": p.stderr[-2000:]})
        except subprocess.TimeoutExpired:
            results.append({"method": method, "error": f"over {args.timeout_s} s"})
        log(json.dumps(results[-1])[:400])
    doc = {"model": "resnet50", "batch": args.batch, "precision": "fp32",
           "measured_at_utc": cf.utc_now(), "results": results}
    if args.out:
        Path(args.out).write_text(json.dumps(doc, indent=1))
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawTextHelpFormatter)
    sub = parser.add_subparsers(dest="cmd", required=True)
    for name in ("all", "run"):
        p = sub.add_parser(name)
        p.add_argument("--gpu", required=True)
        p.add_argument("--out", required=True)
        p.add_argument("--models", default=",".join(MODELS))
        p.add_argument("--cases", default="")
        p.add_argument("--precisions", default=",".join(PRECISIONS),
                       help="of fp32, bf16, tf32 (TF32 matmuls), fp16 (autocast + "
                            "gradient scaler); comma- or plus-separated")
        p.add_argument("--counters", action="store_true")
        p.add_argument("--counter-reserve-s", type=float, default=60.0,
                       help="collect counters only while more than this is left")
        p.add_argument("--measure-ops", action="store_true")
        p.add_argument("--measure-ops-s", type=float, default=8.0)
        p.add_argument("--extras-all-batches", action="store_true",
                       help="counters and re-runs for every batch size, not only the middle one")
        if name == "all":
            p.add_argument("--budget-s", type=float, default=400)
        else:
            p.add_argument("--deadline", type=float, default=float("inf"))
    p = sub.add_parser("merge")
    p.add_argument("--gpu", required=True)
    p.add_argument("--out", required=True)
    p = sub.add_parser("hostbench")
    p.add_argument("--out", default="")
    p = sub.add_parser("overhead")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--out", default="")
    p.add_argument("--scratch", default="/tmp/habitat_overhead")
    p.add_argument("--timeout-s", type=float, default=150)
    p = sub.add_parser("overhead-one")
    p.add_argument("--method", required=True,
                   choices=["torch_profiler", "agent", "agent_counters", "agent_measure_ops"])
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--scratch", default="/tmp/habitat_overhead")
    args = parser.parse_args()
    unknown = set(split_list(getattr(args, "precisions", ""))) - set(TRACKER_PRECISION)
    if unknown:
        parser.error(f"unknown precision(s) {', '.join(sorted(unknown))}: "
                     f"choose from {', '.join(TRACKER_PRECISION)}")
    return {"all": cmd_all, "run": cmd_run, "merge": cmd_merge, "hostbench": cmd_hostbench,
            "overhead": cmd_overhead, "overhead-one": cmd_overhead_one}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
