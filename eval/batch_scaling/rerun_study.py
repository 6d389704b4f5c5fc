#!/usr/bin/env python3
"""Would re-running the kernel-varying operations at the other batch, on
the origin GPU, meet the batch-scaling goal that per-kernel scaling misses?

cuBLAS and cuDNN pick other kernels at another batch (docs/batch_scaling_study.md),
so no per-kernel rule can foresee a GEMM's, convolution's or LSTM's time at
2x or 4x the batch. The agent can measure it instead: it already re-runs each
recorded operation alone (habitat/rerun.py); here each kernel-varying
operation is re-run with its batch dimension scaled, and its traced time is
multiplied by re-run(scaled) / re-run(traced). Everything else keeps the
engine's rule (`habitat predict --batch-size`).

    capture (on a GPU, with the agent built):
        python3 eval/batch_scaling/rerun_study.py capture --out DIR [--models ...]
      per model and precision: one tracked iteration at the base batch
      (DIR/<model>_b<b>_<precision>.trace.gz) and DIR/<...>.rerun.json.gz, the
      forward and backward re-run times of each kernel-varying operation at
      1/2, 1, 2 and 4 times the batch, by trace operation index.
    agent (on a GPU, with the agent built):
        python3 eval/batch_scaling/rerun_study.py agent --out DIR [--models ...]
      what a user runs: per model and precision, one tracked iteration with
      the agent's own re-runs at those batches (tracker.measure_batch_scaling)
      in the trace, DIR/<model>_b<b>_<precision>.trace.gz.
    engine (no GPU; needs build/client/habitat):
        /usr/bin/python3 eval/batch_scaling/rerun_study.py engine DIR --out OUT
      the engine's GPU time at those batches from either capture, with and
      without the re-runs, against batch_memory on the H100 and the H200.
    analyze (no GPU; needs build/client/habitat):
        /usr/bin/python3 eval/batch_scaling/rerun_study.py analyze DIR [--device H200]
      against batch_memory's summed GPU time at those batches (another
      process on the same kind of GPU).
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
# Base batch per model: batch_memory measured b/2, 2b and 4b of these.
ORIGIN = "H100-SXM"
# batch_memory's file per GPU the analysis can be run against.
MEMORY_FILES = {"H100-SXM": "h100", "H200": "h200"}
BASE = {"resnet50": 16, "inception_v3": 16, "transformer": 32, "gnmt": 32, "dcgan": 64,
        "gpt2": 8, "vit": 32}
FACTORS = (0.5, 1, 2, 4)
PRECISIONS = ("fp32", "bf16")


def tracked(model, precision):
    """One tracked iteration of `model` at its base batch after 3 warm-up
    steps: (batch, step, tracker)."""
    import torch
    import habitat_agent
    import capture_fixtures as cf

    batch = BASE[model]
    step = cf.build_step(model, batch, precision)
    for _ in range(3):
        step()
    torch.cuda.synchronize()
    tracker = habitat_agent.OperationTracker(model_name=model, batch_size=batch,
                                       precision="amp_bf16" if precision == "bf16" else "fp32",
                                       verbose=False)
    with tracker.track():
        step()
    return batch, step, tracker


def capture_case(model, precision, out_dir: Path, repetitions: int) -> dict:
    import torch
    from habitat_agent import _C, rerun

    batch, step, tracker = tracked(model, precision)
    name = f"{model}_b{batch}_{precision}"
    tracker.get_tracked_trace().save(str(out_dir / f"{name}.trace.gz"))
    events = tracker.recorded_ops()
    parameters = rerun.parameter_shapes(events)
    device = torch.device("cuda", torch.cuda.current_device())
    autocast = (torch.autocast("cuda", dtype=torch.bfloat16) if precision == "bf16"
                else torch.autocast("cuda", enabled=False))
    ops = {}
    started = time.time()
    with torch.enable_grad(), autocast:
        for index, (event, has_backward) in enumerate(rerun.forward_operations(events)):
            if not _C.is_kernel_varying(event["name"]):
                continue
            # Identical calls (same name, arguments, backward) share a key: the
            # analysis takes their median, as one disturbed re-run happens.
            row = {"name": event["name"], "times": {},
                   "signature": hashlib.sha256(repr(rerun._signature(
                       event["name"], event, has_backward)).encode()).hexdigest()[:16]}
            for factor in FACTORS:
                target = max(1, int(batch * factor))
                scaled = event if factor == 1 else rerun.scaled_event(event, batch, target,
                                                                      parameters)
                if scaled is None:
                    row["times"] = {}
                    row["skipped"] = "no input carries the batch"
                    break
                try:
                    fwd, bwd = rerun._measure_one(scaled, event["name"], has_backward, device,
                                                  repetitions, 2, lambda reason: None)
                except Exception as e:  # recorded, never fatal
                    row["skipped"] = f"{type(e).__name__}: {str(e)[:160]}"
                    row["times"] = {}
                    break
                row["times"][str(factor)] = [fwd, bwd]
            ops[str(index)] = row
    del step
    torch.cuda.empty_cache()
    result = {"model": model, "precision": precision, "batch": batch, "operations": ops,
              "seconds": round(time.time() - started, 1)}
    with gzip.open(out_dir / f"{name}.rerun.json.gz", "wt") as f:
        json.dump(result, f)
    return result


def agent_case(model, precision, out_dir: Path, repetitions: int) -> dict:
    """What a user runs: one tracked iteration at the base batch and the
    agent's own re-runs at the other batches (measure_batch_scaling), saved
    as one trace with Pass.batch_reruns."""
    import torch

    batch, step, tracker = tracked(model, precision)
    started = time.time()
    report = tracker.measure_batch_scaling(factors=[f for f in FACTORS if f != 1],
                                           repetitions=repetitions)
    tracker.get_tracked_trace().save(str(out_dir / f"{model}_b{batch}_{precision}.trace.gz"))
    del step
    torch.cuda.empty_cache()
    return dict(report, seconds=round(time.time() - started, 1))


def run_cases(args, case, describe) -> int:
    sys.path.insert(0, str(ROOT / "agent" / "python"))
    sys.path.insert(0, str(ROOT / "eval" / "capture"))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    deadline = time.time() + args.budget_s
    for model in args.models.split(","):
        for precision in PRECISIONS:
            if time.time() > deadline:
                print(f"stopped: budget spent before {model} {precision}", flush=True)
                return 0
            try:
                r = case(model, precision, out, args.repetitions)
                print(f"ok   {model} {precision}: {describe(r)}", flush=True)
            except Exception as e:
                print(f"FAIL {model} {precision}: {type(e).__name__}: {e}", flush=True)
    return 0


def cmd_capture(args) -> int:
    def describe(r):
        skipped = sum(1 for o in r["operations"].values() if "skipped" in o)
        return f"{len(r['operations'])} kernel-varying ops, {skipped} skipped, {r['seconds']} s"
    return run_cases(args, capture_case, describe)


def cmd_agent(args) -> int:
    def describe(r):
        return (f"{r['measured']} of {r['operations']} kernel-varying ops at {r['batches']} "
                f"({r['calls']} calls), skipped {r['skipped']}, failed batches "
                f"{r['batch_failed']}, {r['out_of_time']} out of time, {r['seconds']} s")
    return run_cases(args, agent_case, describe)


# ------------------------------------------------------------------ analyze

def predict_ops(trace: Path, batch: int | None, device: str = ORIGIN):
    cmd = [str(ROOT / "build" / "client" / "habitat"), "predict", str(trace), "--devices",
           device, "--format", "json", "--breakdown", "--top", "100000"]
    if batch:
        cmd += ["--batch-size", str(batch)]
    p = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
    pred = p["predictions"][0]
    return pred["gpu_time_ns"], {o["index"]: o for o in pred["operations"]}


def load_batch_memory(device=ORIGIN):
    name = MEMORY_FILES[device]
    with gzip.open(ROOT / "tests" / "testdata" / "batch_memory" / f"{name}.json.gz", "rt") as f:
        data = json.load(f)
    return {(c["model"], c["precision"], c["batch"]): c["gpu_time_ns_mean"]
            for c in data["cases"] if c.get("status") == "ok"}


def matched(rerun_ops, trace_ops, trace_name):
    """(trace operation index, re-run row) pairs: the k-th re-run operation of
    a name is the trace's k-th operation of that name (the re-run numbers
    forward operations only; the trace also holds AccumulateGrad and
    unlinked backward operations)."""
    by_name = {}
    for index in sorted(trace_ops):
        by_name.setdefault(trace_ops[index]["name"], []).append(index)
    seen = {}
    for key in sorted(rerun_ops, key=int):
        row = rerun_ops[key]
        k = seen.get(row["name"], 0)
        seen[row["name"]] = k + 1
        candidates = by_name.get(row["name"], [])
        if k >= len(candidates):
            raise ValueError(f"{trace_name}: {row['name']} #{k + 1} of the re-run is not in "
                             "the trace")
        yield candidates[k], row


# How a re-run moves a traced pass to the target batch. The re-run of a
# small operation carries a fixed part the iteration does not (its own
# launches, autograd.grad's set-up, fresh inputs): "ratio" scales the traced
# time by re-run(target) / re-run(traced) and so compresses a small
# operation's change; "delta" adds re-run(target) - re-run(traced), which
# keeps the fixed part out. "bounded" is "delta" except that a gain of the
# iteration over the re-run shrinks in proportion when the work does (a
# lone re-run from cold memory loses in proportion to its bytes).
ESTIMATORS = {
    "ratio": lambda traced, one, scaled: traced * scaled / one,
    "delta": lambda traced, one, scaled: max(0.0, traced + scaled - one),
    "bounded": lambda traced, one, scaled: bounded(traced, one, scaled),
}


def bounded(traced, one, scaled):
    """The engine's (ScalePassByReruns): what the iteration gains on the lone
    re-run shrinks with the work but never grows with it; a loss stays."""
    gain = one - traced
    return max(0.0, scaled - (gain * min(1.0, scaled / one) if gain > 0 else gain))


def denoised(rows):
    """Each re-run row's times replaced by the median, per factor and pass,
    over the rows of its signature (identical calls): one re-run of an
    attention call once took 1.2 ms against 27 us for its eleven twins."""
    groups = {}
    for row in rows.values():
        if row.get("times") and row.get("signature"):
            groups.setdefault(row["signature"], []).append(row["times"])
    out = {}
    for key, row in rows.items():
        twins = groups.get(row.get("signature"), [])
        if len(twins) > 1:
            row = dict(row, times={f: [statistics.median(t[f][i] for t in twins)
                                       for i in (0, 1)] for f in row["times"]})
        out[key] = row
    return out


def rerun_total(engine_total, origin_ops, device_ops, ops, pairs, factor, estimator):
    """The engine's GPU time at the target batch with each re-run pass of a
    kernel-varying operation replaced: the estimator moves the traced pass
    to the target batch on the origin, and the engine's own ratio for the
    pass between the two GPUs at the traced batch (device_ops: the same
    trace predicted on the target GPU) moves it there. Returns that time and
    the share of the kernel-varying traced time so replaced."""
    total, replaced, varying = engine_total, 0, 0
    for index, row in pairs:
        times = row.get("times", {})
        one, scaled = times.get("1"), times.get(str(factor))
        for pass_index, side in ((0, "forward_ns"), (1, "backward_ns")):
            traced = origin_ops[index]["origin_" + side]
            varying += traced
            if not (one and scaled and one[pass_index] > 0 and scaled[pass_index] > 0):
                continue
            replaced += traced
            moved = device_ops[index]["predicted_" + side] / traced if traced > 0 else 1.0
            total += (ESTIMATORS[estimator](traced, one[pass_index], scaled[pass_index]) * moved
                      - ops[index]["predicted_" + side])
    return total, replaced / max(varying, 1)


def analyze_case(rerun_path: Path, memory, device=ORIGIN):
    with gzip.open(rerun_path, "rt") as f:
        r = json.load(f)
    model, precision, batch = r["model"], r["precision"], r["batch"]
    trace = rerun_path.with_name(rerun_path.name.replace(".rerun.json.gz", ".trace.gz"))
    _, origin_ops = predict_ops(trace, None)
    base_total, device_ops = predict_ops(trace, None, device)
    pairs = list(matched(denoised(r["operations"]), origin_ops, trace.name))
    varying = sum(device_ops[i]["predicted_forward_ns"] + device_ops[i]["predicted_backward_ns"]
                  for i, _ in pairs)
    rows = []
    for factor in FACTORS:
        target = int(batch * factor)
        measured = memory.get((model, precision, target))
        if factor == 1 or not measured:
            continue
        total, ops = predict_ops(trace, target, device)
        row = {"model": model, "precision": precision, "batch": batch, "target": target,
               "factor": factor, "measured_ns": measured, "engine_ns": total,
               "trace_ns": base_total, "base_measured_ns": memory.get((model, precision, batch)),
               "varying_share": varying / base_total}
        for estimator in ESTIMATORS:
            row[estimator + "_ns"], row["covered"] = rerun_total(
                total, origin_ops, device_ops, ops, pairs, factor, estimator)
        rows.append(row)
    return rows


def cmd_analyze(args) -> int:
    memory = load_batch_memory(args.device)
    rows = []
    for path in sorted(Path(args.dir).glob("*.rerun.json.gz")):
        rows += analyze_case(path, memory, args.device)
    methods = ("engine",) + tuple(ESTIMATORS)
    print("| model | precision | b -> target | kernel-varying share | re-runs used | " +
          " | ".join(f"{m} %" for m in methods) + " | delta, offset removed % |")
    print("|---|---|---|---:|---:|" + "---:|" * (len(methods) + 1))
    errors = {m: {} for m in methods + ("delta, offset removed",)}
    for r in rows:
        signed = {m: 100 * (r[m + "_ns"] / r["measured_ns"] - 1) for m in methods}
        # The trace's iteration against batch_memory's at the base batch (two
        # processes): removing that offset leaves the scaling's own error.
        offset = r["base_measured_ns"] / r["trace_ns"] if r["base_measured_ns"] else 1.0
        signed["delta, offset removed"] = 100 * (r["delta_ns"] * offset / r["measured_ns"] - 1)
        for m, v in signed.items():
            errors[m].setdefault(r["factor"], []).append(abs(v))
        print(f"| {r['model']} | {r['precision']} | {r['batch']} -> {r['target']} | "
              f"{100 * r['varying_share']:.0f}% | {100 * r['covered']:.0f}% | " +
              " | ".join(f"{v:+.1f}" for v in signed.values()) + " |")
    print("\nMAPE % by factor (cases):\n")
    print("| method | " + " | ".join(f"{f}x" for f in sorted(errors["engine"])) + " | all |")
    print("|---|" + "---:|" * (len(errors["engine"]) + 1))
    for m, by in errors.items():
        every = [v for values in by.values() for v in values]
        print(f"| {m} | " + " | ".join(f"{sum(v) / len(v):.1f}" for _, v in sorted(by.items()))
              + f" | {sum(every) / len(every):.1f} |")
    return 0


# ------------------------------------------------------- through the engine

def trace_class():
    sys.path.insert(0, str(ROOT / "client" / "python"))
    from habitat_client import _messages
    return _messages.messages()["Trace"]


def inject(rerun_path: Path, out_dir: Path) -> Path:
    """The case's trace with each re-run pass's times at every measured batch
    (identical calls' median) as Pass.batch_reruns: what the agent is to
    record, for the engine to read."""
    with gzip.open(rerun_path, "rt") as f:
        r = json.load(f)
    trace_path = rerun_path.with_name(rerun_path.name.replace(".rerun.json.gz", ".trace.gz"))
    trace = trace_class().FromString(gzip.decompress(trace_path.read_bytes()))
    names = {i: {"name": op.name} for i, op in enumerate(trace.operations)}
    for index, row in matched(denoised(r["operations"]), names, trace_path.name):
        op = trace.operations[index]
        for pass_index, p in ((0, op.forward), (1, op.backward if op.HasField("backward")
                                                  else None)):
            if p is None:
                continue
            for factor, times in sorted(row.get("times", {}).items(), key=lambda x: float(x[0])):
                if times[pass_index] > 0:
                    rerun = p.batch_reruns.add()
                    rerun.batch_size = int(r["batch"] * float(factor))
                    rerun.rerun_time_ns = int(times[pass_index])
    out = out_dir / trace_path.name
    out.write_bytes(gzip.compress(trace.SerializeToString()))
    return out


def strip_reruns(trace_path: Path, out_dir: Path) -> Path:
    """The trace without Pass.batch_reruns: what the engine's rule alone
    predicts from it."""
    trace = trace_class().FromString(gzip.decompress(trace_path.read_bytes()))
    for op in trace.operations:
        del op.forward.batch_reruns[:]
        if op.HasField("backward"):
            del op.backward.batch_reruns[:]
    out = out_dir / trace_path.name.replace(".trace.gz", ".rule.trace.gz")
    out.write_bytes(gzip.compress(trace.SerializeToString()))
    return out


def engine_cases(directory: Path, out_dir: Path, write_in=None, strip=None):
    """(model, precision, batch, trace with re-runs, trace without) per case:
    the study's captures get their re-runs written in (write_in: inject); the
    agent's (no .rerun.json.gz beside them) carry their own and lose them for
    the rule (strip: strip_reruns)."""
    write_in = write_in or inject
    strip = strip or strip_reruns
    cases = []
    for path in sorted(directory.glob("*.trace.gz")):
        if path.name.endswith(".rule.trace.gz"):
            continue
        model, batch, precision = path.name[:-len(".trace.gz")].rsplit("_", 2)
        study = path.with_name(path.name.replace(".trace.gz", ".rerun.json.gz"))
        if study.exists():
            cases.append((model, precision, int(batch[1:]), write_in(study, out_dir), path))
        else:
            cases.append((model, precision, int(batch[1:]), path, strip(path, out_dir)))
    return cases


def cmd_engine(args) -> int:
    """The engine's own prediction from the traces with re-runs, against
    batch_memory on the H100 and the H200."""
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    cases = engine_cases(Path(args.dir), out_dir)
    print("| GPU | model | precision | b -> target | engine, rule only % | "
          "engine with re-runs % |")
    print("|---|---|---|---|---:|---:|")
    errors = {}
    for device in sorted(MEMORY_FILES):
        memory = load_batch_memory(device)
        for model, precision, batch, with_reruns, plain in cases:
            for factor in FACTORS:
                target = int(batch * factor)
                measured = memory.get((model, precision, target))
                if factor == 1 or not measured:
                    continue
                rule = 100 * (predict_ops(plain, target, device)[0] / measured - 1)
                rerun = 100 * (predict_ops(with_reruns, target, device)[0] / measured - 1)
                for k, v in (("rule", rule), ("re-runs", rerun)):
                    errors.setdefault((device, k), {}).setdefault(factor, []).append(abs(v))
                print(f"| {device} | {model} | {precision} | {batch} -> {target} | "
                      f"{rule:+.1f} | {rerun:+.1f} |")
    print("\n| GPU | method | " + " | ".join(f"{f}x" for f in FACTORS if f != 1) + " |")
    print("|---|---|" + "---:|" * (len(FACTORS) - 1))
    for (device, k), by in sorted(errors.items()):
        print(f"| {device} | {k} | " + " | ".join(
            f"{sum(v) / len(v):.1f}" for _, v in sorted(by.items())) + " |")
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawTextHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    for name, repetitions in (("capture", 5), ("agent", 7)):
        c = sub.add_parser(name)
        c.add_argument("--out", required=True)
        c.add_argument("--models", default=",".join(BASE))
        c.add_argument("--repetitions", type=int, default=repetitions)
        c.add_argument("--budget-s", type=float, default=420)
    e = sub.add_parser("engine")
    e.add_argument("dir")
    e.add_argument("--out", required=True, help="where the traces with re-runs are written")
    a = sub.add_parser("analyze")
    a.add_argument("dir")
    a.add_argument("--device", default=ORIGIN, choices=sorted(MEMORY_FILES),
                   help="predict on this GPU (from the H100 trace) and compare with its "
                        "batch_memory measurements")
    args = p.parse_args()
    return {"capture": cmd_capture, "agent": cmd_agent, "analyze": cmd_analyze,
            "engine": cmd_engine}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
