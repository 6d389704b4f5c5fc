#!/usr/bin/env python3
"""GPU test of the agent: captures a small CNN and one ResNet-50 training
iteration with habitat_agent.OperationTracker (RecordFunction + CUPTI) and checks
that the traces hold kernels, ops and backward links and are consistent:
every GPU activity is counted once (per-op sums + unattributed = total),
the per-op sum is within a few percent of the measured GPU-busy time, no
records were dropped, every kernel was attributed, and the memory recorded
(allocated at start <= peak allocated <= peak reserved < device total) is
consistent. With counters (CUPTI range profiler, tracker.collect_counters):
the small CNN's kernels making up 99.5% of its kernel time all get
counters, the top kernel has DRAM traffic, and a square matmul's FLOPs
(fp32 without TF32: FFMA counts; bf16: tensor-core counts) are within 1.2x
of 2*M*N*K. Per-op re-runs
(tracker.measure_ops) on ResNet-50: each convolution's re-run forward time
within 0.5-2x of its CUPTI forward time, and >= 80% of the iteration's pass
time in measured ops; the sums are printed. Re-runs at twice the batch
(tracker.measure_batch_scaling): every convolution at both batches, their
forward sum growing 1.3-2.6x, all joined to the trace.

    python tests/gpu/agent_gpu_test.py --out DIR

Needs a CUDA GPU, torch (+ torchvision for ResNet-50) and the extension
built in agent/python (python setup.py build_ext --inplace). Exits 77
(CTest's "skipped") when any of those is missing. Writes DIR/*.trace.gz and
DIR/agent_gpu_results.json.
"""

import argparse
import json
import os
import sys
import time

SKIP = 77
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "agent", "python"))

try:
    import torch
except ImportError:
    print("SKIPPED: torch is not installed")
    sys.exit(SKIP)
if not torch.cuda.is_available():
    print("SKIPPED: no CUDA GPU")
    sys.exit(SKIP)
try:
    import habitat_agent
    from habitat_agent import _C
except ImportError as e:
    print(f"SKIPPED: habitat extension not built ({e}); run "
          "`python setup.py build_ext --inplace` in agent/python")
    sys.exit(SKIP)

# Per-op sum vs GPU-busy: kernels of one stream do not overlap, so the sum
# of pass times may exceed the union only by the little overlap between
# streams (cuDNN/cuBLAS side streams) and memsets.
SUM_VS_BUSY_TOLERANCE = 0.05
failures = []


def check(cond, what):
    status = "ok  " if cond else "FAIL"
    print(f"  [{status}] {what}", flush=True)
    if not cond:
        failures.append(what)


def make_step(model, optimizer, x, target):
    loss_fn = torch.nn.CrossEntropyLoss()

    def step():
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), target)
        loss.backward()
        optimizer.step()
    return step


# Measured FLOPs of a matmul kernel vs 2*M*N*K.
FLOP_TOLERANCE = 1.2


def check_counters(tracker, step, results_case):
    """Collects counters for the last tracked region and checks them."""
    t0 = time.perf_counter()
    report = tracker.collect_counters(step)
    seconds = time.perf_counter() - t0
    results_case["counter_report"] = report
    results_case["counter_s"] = seconds
    print(f"  counter report: {report}", flush=True)
    check(report["status"] == "OK", f"counters collected: {report['status']} "
          f"{report.get('message', '')}")
    if report["status"] != "OK":
        return
    check(report["ran"] and report["wanted_missing"] == 0,
          f"every wanted kernel configuration measured: {report['new_keys']} "
          f"of {report['wanted_keys']} ({report['wanted_missing']} missing)")
    # Auto ranges are named by index on CUDA 13 ("0", "1", ...), so the join
    # is by launch order; it is only trusted when the counts agree exactly.
    check(report["matched"] == report["ranges"] == report["kernels"],
          f"ranges joined to tracked kernels ({'by position' if report['by_position'] else 'by name'}): "
          f"{report['matched']} of {report['ranges']} ranges / {report['kernels']} kernels")
    ks = tracker.kernel_counters()
    kernels_ns = sum(k["duration_ns"] for k in ks)
    results_case["kernel_counters"] = ks
    check(report["covered_fraction"] >= 0.995 - 1e-9,
          f"kernels with counters cover {100 * report['covered_fraction']:.2f}% "
          f"of the kernel time (goal 99.5%)")
    top = max(ks, key=lambda k: k["duration_ns"]) if ks else None
    if top is not None:
        c = top["counters"]
        check(c["dram_read_bytes"] + c["dram_write_bytes"] > 0,
              f"top kernel {top['name'][:80]} ({top['duration_ns']} ns): dram "
              f"read {c['dram_read_bytes']} B, write {c['dram_write_bytes']} B")
    meta = tracker.get_tracked_trace().summary["metadata"]
    check(int(meta.get("agent.kernels_with_counters", "0")) > 0,
          f"trace kernels with counters: {meta.get('agent.kernels_with_counters')}")
    again = tracker.collect_counters(step)
    check(again["status"] == "OK" and not again["ran"],
          "a second collect_counters is served from the cache")
    print(f"  counters: {len(ks)} kernel configurations, {kernels_ns} ns of kernel "
          f"time, collected in {seconds:.2f} s", flush=True)


def matmul_case(dtype, n, out_dir):
    """One n x n x n matmul: its kernel's FLOPs against 2*n^3."""
    name = f"matmul{n}_{str(dtype).split('.')[-1]}"
    print(f"== {name}", flush=True)
    torch.backends.cuda.matmul.allow_tf32 = False  # fp32 on the FMA pipes
    dev = torch.device("cuda")
    a = torch.randn(n, n, device=dev, dtype=dtype)
    b = torch.randn(n, n, device=dev, dtype=dtype)
    c = torch.empty(n, n, device=dev, dtype=dtype)

    def step():
        torch.mm(a, b, out=c)

    for _ in range(3):
        step()
    torch.cuda.synchronize()
    tracker = habitat_agent.OperationTracker(model_name=name, batch_size=n,
                                       precision="fp32" if dtype == torch.float32
                                       else "bf16")
    with tracker.track():
        step()
    t0 = time.perf_counter()
    report = tracker.collect_counters(step, fraction=1.0)
    seconds = time.perf_counter() - t0
    print(f"  counter report: {report}", flush=True)
    case = {"name": name, "n": n, "counter_report": report, "counter_s": seconds}
    check(report["status"] == "OK", f"counters collected: {report['status']} "
          f"{report.get('message', '')}")
    ks = tracker.kernel_counters()
    case["kernel_counters"] = ks
    if not ks:
        check(False, "matmul kernel has counters")
        return case
    # All of the region's kernels (fraction=1.0), weighted by launches: the
    # matmul's work even if cuBLAS splits it over several kernels.
    field = "flop_fp32" if dtype == torch.float32 else "flop_tensor"
    measured = sum(k["counters"][field] * k["launches"] for k in ks)
    read = sum(k["counters"]["dram_read_bytes"] * k["launches"] for k in ks)
    write = sum(k["counters"]["dram_write_bytes"] * k["launches"] for k in ks)
    top = max(ks, key=lambda k: k["duration_ns"])
    flops = 2 * n ** 3
    ratio = measured / flops
    case.update({"kernel": top["name"], "kernels": len(ks), "analytic_flops": flops,
                 "measured_flops": measured, "ratio": ratio,
                 "top_kernel_counters": top["counters"],
                 "dram_read_bytes": read, "dram_write_bytes": write})
    check(1 / FLOP_TOLERANCE <= ratio <= FLOP_TOLERANCE,
          f"{len(ks)} kernel(s), top {top['name'][:80]}: {field} {measured:.4g} "
          f"vs 2MNK {flops:.4g} (ratio {ratio:.3f}, limit {FLOP_TOLERANCE}x)")
    operand_bytes = 2 * n * n * a.element_size()
    check(read > 0 and write > 0,
          f"dram read {read} B, write {write} B (operands {operand_bytes} B, "
          f"result {n * n * a.element_size()} B)")
    print(f"  {name}: counters in {seconds:.2f} s", flush=True)
    tracker.get_tracked_trace().save(os.path.join(out_dir, f"{name}.trace.gz"))
    return case


# Re-run (CUDA events, op alone) vs CUPTI kernel time of one convolution.
RERUN_CONV_FACTOR = 2.0
# Twice a ResNet-50 batch: more than the fixed part, at most a little over
# twice the work (a worse kernel choice).
BATCH_RERUN_GROWTH = (1.3, 2.6)
RERUN_COVERAGE = 0.80


def check_memory(memory):
    """The caching allocator's bytes the trace records for the region
    (habitat.v1.MemoryUsage): the weights were allocated before it began,
    and the peaks lie between that and the device's total."""
    check(memory is not None and memory["source"] == "recorded",
          f"memory recorded: {memory}")
    if memory is None:
        return
    start, peak = memory["allocated_bytes_at_start"], memory["peak_allocated_bytes"]
    reserved = memory["peak_reserved_bytes"]
    total = torch.cuda.get_device_properties(torch.cuda.current_device()).total_memory
    check(0 < start <= peak <= reserved < total,
          f"0 < allocated at start {start} <= peak allocated {peak} <= "
          f"peak reserved {reserved} < device total {total}")


def check_reruns(tracker, plain_wall, results_case):
    """Times every op alone (measure_ops) and compares with CUPTI."""
    t0 = time.perf_counter()
    report = tracker.measure_ops()
    seconds = time.perf_counter() - t0
    results_case["rerun_report"] = report
    print(f"  measure_ops: {report['measured']} of {report['operations']} ops, "
          f"{report['runs']} distinct calls, {report['out_of_time']} out of time, "
          f"{seconds:.1f} s", flush=True)
    for name, reasons in sorted(report["skipped"].items()):
        print(f"    skipped {name}: {reasons}")
    for name, reasons in sorted(report["backward_skipped"].items()):
        print(f"    backward skipped {name}: {reasons}")
    passes = tracker.get_tracked_trace(iteration_wall_ns=plain_wall).summary["passes"]
    all_ns = sum(p["forward_ns"] + (p["backward_ns"] or 0) for p in passes)
    cupti = rerun = covered = 0
    for p in passes:
        if p["rerun_forward_ns"] > 0:
            covered += p["forward_ns"]
            cupti += p["forward_ns"]
            rerun += p["rerun_forward_ns"]
        if p["rerun_backward_ns"]:
            covered += p["backward_ns"]
            cupti += p["backward_ns"]
            rerun += p["rerun_backward_ns"]
    convs = [p for p in passes if p["name"] in ("aten::conv2d", "aten::convolution")]
    measured = [p for p in convs if p["rerun_forward_ns"] > 0 and p["forward_ns"] > 0]
    outside = [p for p in measured
               if not 1 / RERUN_CONV_FACTOR <= p["rerun_forward_ns"] / p["forward_ns"]
               <= RERUN_CONV_FACTOR]
    conv_cupti = sum(p["forward_ns"] for p in measured)
    conv_rerun = sum(p["rerun_forward_ns"] for p in measured)
    conv_bwd_cupti = sum(p["backward_ns"] or 0 for p in measured if p["rerun_backward_ns"])
    conv_bwd_rerun = sum(p["rerun_backward_ns"] or 0 for p in measured)
    print(f"  re-run vs CUPTI, measured passes: {rerun / 1e6:.3f} ms vs "
          f"{cupti / 1e6:.3f} ms (ratio {rerun / max(cupti, 1):.3f})")
    print(f"  convolutions forward: {conv_rerun / 1e6:.3f} ms re-run vs "
          f"{conv_cupti / 1e6:.3f} ms CUPTI (ratio {conv_rerun / max(conv_cupti, 1):.3f}); "
          f"backward {conv_bwd_rerun / 1e6:.3f} ms vs {conv_bwd_cupti / 1e6:.3f} ms")
    for p in outside:
        print(f"    outside {1 / RERUN_CONV_FACTOR}-{RERUN_CONV_FACTOR}x: re-run "
              f"{p['rerun_forward_ns']} ns vs CUPTI {p['forward_ns']} ns")
    results_case["rerun"] = {
        "seconds": seconds, "measured_cupti_ns": cupti, "measured_rerun_ns": rerun,
        "covered_ns": covered, "pass_time_ns": all_ns,
        "conv_forward_cupti_ns": conv_cupti, "conv_forward_rerun_ns": conv_rerun,
        "conv_backward_cupti_ns": conv_bwd_cupti, "conv_backward_rerun_ns": conv_bwd_rerun,
        "conv_ratios": [p["rerun_forward_ns"] / p["forward_ns"] for p in measured],
    }
    check(len(measured) == len(convs) > 0,
          f"every convolution re-run: {len(measured)} of {len(convs)}")
    check(not outside,
          f"convolution re-run forward within {1 / RERUN_CONV_FACTOR}-"
          f"{RERUN_CONV_FACTOR}x of CUPTI: {len(measured) - len(outside)} of "
          f"{len(measured)}")
    check(covered >= RERUN_COVERAGE * all_ns,
          f"measured ops hold {100 * covered / max(all_ns, 1):.1f}% of the pass "
          f"time ({covered} of {all_ns} ns; goal {100 * RERUN_COVERAGE:.0f}%)")


def check_batch_reruns(tracker, batch, results_case):
    """Re-runs the kernel-varying ops at twice the batch
    (measure_batch_scaling) and checks that every convolution has both
    batches and that their summed forward grows as doubled work does."""
    t0 = time.perf_counter()
    report = tracker.measure_batch_scaling(factors=(2,), repetitions=3)
    seconds = time.perf_counter() - t0
    results_case["batch_rerun_report"] = report
    print(f"  measure_batch_scaling: {report['measured']} of {report['operations']} "
          f"kernel-varying ops at {report['batches']}, {report['calls']} distinct calls, "
          f"{seconds:.1f} s; skipped {report['skipped']}, failed {report['batch_failed']}",
          flush=True)
    reruns = tracker.batch_reruns()
    convs = [o for o, _ in rerun_forward_ops(tracker) if o["name"] == "aten::conv2d"]
    with_both = [o for o in convs if [r[0] for r in reruns.get(o["id"], [])] == [batch, 2 * batch]]
    check(len(with_both) == len(convs) > 0,
          f"every convolution re-run at {batch} and {2 * batch}: {len(with_both)} of {len(convs)}")
    one = sum(reruns[o["id"]][0][1] for o in with_both)
    two = sum(reruns[o["id"]][1][1] for o in with_both)
    growth = two / max(one, 1)
    results_case["batch_rerun_conv_forward_growth"] = growth
    check(BATCH_RERUN_GROWTH[0] <= growth <= BATCH_RERUN_GROWTH[1],
          f"convolutions forward at 2x the batch take {growth:.2f}x (expected "
          f"{BATCH_RERUN_GROWTH[0]}-{BATCH_RERUN_GROWTH[1]}x)")
    meta = tracker.get_tracked_trace().summary["metadata"]
    check(meta.get("agent.batch_rerun_operations") == str(len(reruns))
          and meta.get("agent.batch_rerun_unmatched") == "0",
          f"batch re-runs joined to operations: {meta.get('agent.batch_rerun_operations')} "
          f"of {len(reruns)}")


def rerun_forward_ops(tracker):
    from habitat_agent import rerun
    return rerun.forward_operations(tracker.recorded_ops())


def capture(name, step, batch, out_dir, warmup=5, repetitions=10, counters=False,
            reruns=False):
    print(f"== {name}", flush=True)
    for _ in range(warmup):
        step()
    torch.cuda.synchronize()
    plain_wall = habitat_agent.time_iteration(step, repetitions, warmup=0)
    tracker = habitat_agent.OperationTracker(model_name=name.split("_b")[0],
                                       batch_size=batch, precision="fp32")
    t0 = time.perf_counter()
    try:
        with tracker.track():
            step()
    except habitat_agent.TrackingError:
        print(f"  activity records: {tracker.activity_counts()}", flush=True)
        raise
    capture_s = time.perf_counter() - t0
    print(f"  activity records: {tracker.activity_counts()}", flush=True)
    counter_case = {}
    if counters:
        check_counters(tracker, step, counter_case)
    if reruns:
        try:
            check_reruns(tracker, plain_wall, counter_case)
        except Exception as e:  # noqa: BLE001 - reported; the capture stands
            check(False, f"measure_ops raised {type(e).__name__}: {e}")
        try:
            check_batch_reruns(tracker, batch, counter_case)
        except Exception as e:  # noqa: BLE001 - reported; the capture stands
            check(False, f"measure_batch_scaling raised {type(e).__name__}: {e}")
    t0 = time.perf_counter()
    trace = tracker.get_tracked_trace(iteration_wall_ns=plain_wall)
    assemble_s = time.perf_counter() - t0
    check(trace.summary["wall_ns"] == plain_wall,
          "iteration_wall_ns is the untracked timing")
    path = os.path.join(out_dir, f"{name}.trace.gz")
    trace.save(path)
    s = trace.summary
    meta = s["metadata"]
    counts = tracker.activity_counts()
    total = int(meta["agent.gpu_time_ns"])
    unattributed_memory_ns = int(meta["agent.unattributed_memory_ns"])
    busy = s["gpu_busy_ns"]
    gap = (s["pass_time_ns"] - busy) / busy if busy else float("inf")
    check(s["kernels"] > 0, f"kernels captured: {s['kernels']}")
    check(s["operations"] > 0, f"operations: {s['operations']}")
    check(s["operations_with_backward"] > 0,
          f"operations with backward: {s['operations_with_backward']}")
    check(int(meta["agent.backward_nodes_linked"]) > 0,
          f"backward nodes linked: {meta['agent.backward_nodes_linked']} of "
          f"{meta['agent.backward_nodes']}")
    check(int(meta["agent.gradient_accumulations"]) > 0
          and meta["agent.gradient_producers"] == meta["agent.gradient_accumulations"],
          f"gradients with their producing backward pass: {meta['agent.gradient_producers']} "
          f"of {meta['agent.gradient_accumulations']}")
    check(s["unattributed_kernel_ns"] <= 0.01 * total,
          f"unattributed kernels: {s['unattributed_kernels']} "
          f"({s['unattributed_kernel_ns']} ns of {total} ns, limit 1%)")
    check(meta["agent.dropped_records"] == "0",
          f"dropped records: {meta['agent.dropped_records']}")
    check(s["pass_time_ns"] + s["unattributed_kernel_ns"] + unattributed_memory_ns
          == total, "every activity counted once (passes + unattributed = total)")
    check(0 < busy <= total, f"busy {busy} ns <= total kernel time {total} ns")
    tracked_wall = int(meta["agent.tracked_wall_ns"])
    check(busy <= tracked_wall, f"busy {busy} ns <= tracked wall {tracked_wall} ns")
    check(abs(gap) <= SUM_VS_BUSY_TOLERANCE,
          f"per-op sum {s['pass_time_ns']} ns vs busy {busy} ns: "
          f"{100 * gap:+.2f}% (limit {100 * SUM_VS_BUSY_TOLERANCE:.0f}%)")
    check(counts["api_calls"] > 0 and counts["external_correlations"] > 0,
          f"activity records: {counts}")
    check(len(trace.to_bytes()) > 0, f"trace bytes: {len(trace.to_bytes())}")
    check_memory(s["memory"])
    print(f"  {s['line']}")
    print(f"  plain iteration wall (median of {repetitions}): "
          f"{plain_wall / 1e6:.3f} ms; tracked region {capture_s * 1e3:.1f} ms; "
          f"assembly {assemble_s * 1e3:.1f} ms", flush=True)
    return {
        "name": name, "batch_size": batch, "file": os.path.basename(path),
        "summary": {k: v for k, v in s.items() if k not in ("line", "passes")},
        "activity_counts": counts, "plain_wall_ns_median": plain_wall,
        "tracked_region_s": capture_s, "assemble_s": assemble_s,
        "sum_vs_busy": gap, "warnings": tracker.warnings, **counter_case,
    }


def guarded(results, run):
    """Runs one capture; an exception is a failure, not the end of the test."""
    try:
        case = run()
    except Exception as e:  # noqa: BLE001 - reported, then carry on
        check(False, f"capture raised {type(e).__name__}: {e}")
        results["cases"].append({"error": f"{type(e).__name__}: {e}"})
        return None
    results["cases"].append(case)
    return case


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=os.environ.get("OUT", "/tmp/habitat_agent_gpu"))
    parser.add_argument("--resnet-batch", type=int, default=16)
    parser.add_argument("--skip-resnet", action="store_true")
    parser.add_argument("--skip-counters", action="store_true")
    parser.add_argument("--skip-reruns", action="store_true",
                        help="do not re-run ResNet-50's ops alone (measure_ops)")
    parser.add_argument("--resnet-counters", action="store_true",
                        help="also collect counters for ResNet-50 (slow)")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    check(_C.has_cupti, "extension built with CUPTI")
    dev = torch.device("cuda")
    results = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__,
               "cuda": torch.version.cuda, "cases": []}
    torch.manual_seed(0)

    small = torch.nn.Sequential(
        torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.BatchNorm2d(16),
        torch.nn.ReLU(), torch.nn.MaxPool2d(2), torch.nn.Flatten(),
        torch.nn.Linear(16 * 16 * 16, 10)).to(dev)
    x = torch.randn(8, 3, 32, 32, device=dev)
    y = torch.randint(0, 10, (8,), device=dev)
    opt = torch.optim.SGD(small.parameters(), lr=0.01, momentum=0.9)
    guarded(results, lambda: capture("smallcnn_b8_fp32",
                                     make_step(small, opt, x, y), 8, args.out))
    if not args.skip_counters:
        guarded(results, lambda: capture(
            "smallcnn_b8_fp32_counters", make_step(small, opt, x, y), 8,
            args.out, warmup=1, repetitions=3, counters=True))
        for dtype in (torch.float32, torch.bfloat16):
            guarded(results, lambda: matmul_case(dtype, 4096, args.out))

    if not args.skip_resnet:
        try:
            import torchvision
        except ImportError:
            check(False, "torchvision importable for ResNet-50")
        else:
            b = args.resnet_batch
            model = torchvision.models.resnet50().to(dev)
            x = torch.randn(b, 3, 224, 224, device=dev)
            y = torch.randint(0, 1000, (b,), device=dev)
            opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
            step = make_step(model, opt, x, y)
            guarded(results, lambda: capture(f"resnet50_b{b}_fp32", step, b, args.out,
                                             counters=args.resnet_counters,
                                             reruns=not args.skip_reruns))
            # A second capture in the same process: callbacks and CUPTI restart.
            first = results["cases"][-1].get("summary", {})
            again = guarded(results, lambda: capture(
                f"resnet50_b{b}_fp32_again", step, b, args.out, warmup=1,
                repetitions=3))
            if again and first:
                check(again["summary"]["kernels"] == first["kernels"],
                      f"repeat capture has the same kernel count "
                      f"({again['summary']['kernels']} vs {first['kernels']})")

    results["failures"] = failures
    with open(os.path.join(args.out, "agent_gpu_results.json"), "w") as f:
        json.dump(results, f, indent=1, default=str)
    print(f"{len(failures)} failed" if failures else "all checks passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
