#!/usr/bin/env python3
"""Predicted FSDP steps and peak memory per GPU against measured ones.

Each model's N = 1 agent trace is predicted on its own GPU with `habitat
predict --parallel fsdp --gpus N --fsdp-units U` (U = the model's
transformer blocks, as it was wrapped), against:

- `--results DIR` of measure_fsdp_one_gpu.py (one GPU, a fake process
  group): the peak `max_memory_allocated` of rank 0 at each N; no steps
  (the fake process group moves no data);
- `--measured DIR` of measure_fsdp.py (N real GPUs, NCCL): the step (rank
  0's median) and the largest peak over the ranks, with the N = 1 traces
  from `--results`. A step is host-bound where rank 0's traced GPU busy
  time is under 85 % of it (the predictor's own rule).

Run from the repository root after building:
    python3 eval/fsdp/compare.py \
        --results eval/fsdp/results/h200_fakepg_2026-11-29 [--gpu H200] [--md OUT]
    python3 eval/fsdp/compare.py --results eval/fsdp/results/h200_fakepg_2026-11-29 \
        --measured eval/fsdp/results/h200x2_2026-11-29 [--md OUT]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
GIB = 2**30


def cases(results: Path) -> dict:
    """{(model, precision): {world_size: line}} of the ok lines."""
    out = {}
    for line in (results / "fsdp_one_gpu.jsonl").read_text().splitlines():
        r = json.loads(line)
        if r.get("status") == "ok":
            out.setdefault((r["model"], r["precision"]), {})[r["world_size"]] = r
    return out


def predicted_configs(cli: str, trace: Path, gpu: str, worlds: list, units: int) -> dict:
    """{N: the predicted FSDP configuration (JSON)} for each N of `worlds`;
    `units` 0 lets the trace's modules cut them (its repeated block)."""
    out = {}
    for n in worlds:
        cmd = [cli, "predict", str(trace), "--devices", gpu, "--catalog", "none",
               "--format", "json", "-q", "--parallel", "fsdp", "--gpus", str(n)]
        if units > 0:
            cmd += ["--fsdp-units", str(units)]
        got = json.loads(subprocess.run(cmd, capture_output=True, text=True,
                                        check=True).stdout)
        (prediction,) = got["predictions"]
        (config,) = [p for p in prediction.get("parallel", [])
                     if int(p.get("gpus_per_node", 0)) == n]
        out[n] = config
    return out


def predicted_peaks(cli: str, trace: Path, gpu: str, worlds: list, units: int) -> dict:
    """{N: predicted peak bytes per GPU} for each N of `worlds`."""
    return {n: int(c.get("peak_memory_bytes_per_gpu", 0))
            for n, c in predicted_configs(cli, trace, gpu, worlds, units).items()}


def error_pct(predicted: int, measured: int) -> float:
    return 100.0 * (predicted - measured) / measured


def rows(args) -> list:
    results = Path(args.results)
    out = []
    for (model, precision), by_n in sorted(cases(results).items()):
        plain = by_n.get(1)
        if plain is None or "trace" not in plain:
            continue
        worlds = sorted(n for n in by_n if n > 1)
        peaks = predicted_peaks(args.cli, results / plain["trace"], args.gpu, worlds,
                                plain["blocks"])
        for n in worlds:
            measured = by_n[n]["peak_allocated_bytes"]
            out.append({"model": model, "precision": precision, "gpus": n,
                        "measured_gib": measured / GIB, "predicted_gib": peaks[n] / GIB,
                        "err_pct": error_pct(peaks[n], measured)})
    return out


HOST_BOUND_BUSY_SHARE = 0.85  # as kHostBoundIdleShare in core/predict/host_replay.h


def run_lines(folder: Path):
    """Every line of each fsdp_n<N>.jsonl of a measure_fsdp.py run, parsed,
    in file order."""
    for path in sorted(folder.glob("fsdp_n*.jsonl")):
        for line in path.read_text().splitlines():
            yield json.loads(line)


def first_traced_ok(folder: Path, mode: str, key) -> dict:
    """{key(line): the first traced ok line of `mode`} of a run."""
    out = {}
    for r in run_lines(folder):
        if r.get("status") == "ok" and r.get("mode") == mode and r.get("traced"):
            out.setdefault(key(r), r)
    return out


def measured_cases(measured: Path) -> dict:
    """{(model, precision, N): the first traced ok FSDP line} of every
    fsdp_n<N>.jsonl under `measured`."""
    return first_traced_ok(measured, "fsdp",
                           lambda r: (r["model"], r["precision"], r["world_size"]))


def measured_plain(measured: Path) -> dict:
    """{(model, precision): the first ok plain line} of a measure_fsdp.py run
    (with "trace" where it traced the plain step)."""
    return first_traced_ok(measured, "plain", lambda r: (r["model"], r["precision"]))


def gpu_busy_ns(trace: Path) -> int:
    """The trace's iteration_gpu_busy_ns (habitat.v1.Trace, gzip)."""
    import gzip
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
    files = descriptor_pb2.FileDescriptorSet()
    files.ParseFromString((ROOT / "client/python/habitat_client/habitat_v1.desc").read_bytes())
    pool = descriptor_pool.DescriptorPool()
    for f in files.file:
        pool.Add(f)
    cls = message_factory.MessageFactory(pool).GetPrototype(
        pool.FindMessageTypeByName("habitat.v1.Trace"))
    t = cls()
    t.ParseFromString(gzip.open(trace).read())
    return t.iteration_gpu_busy_ns


def host_bound(busy_ns: int, step_ns: int) -> bool:
    return busy_ns < HOST_BOUND_BUSY_SHARE * step_ns


def step_rows(args) -> list:
    """Measured against predicted step and peak of each real FSDP run."""
    singles = cases(Path(args.results))
    measured = Path(args.measured)
    out = []
    for (model, precision, n), r in sorted(measured_cases(measured).items()):
        row = {"model": model, "precision": precision, "gpus": n,
               "measured_ms": r["step_ns_median"] / 1e6,
               "measured_gib": r["peak_allocated_bytes"] / GIB,
               "host_bound": host_bound(gpu_busy_ns(measured / r["trace"]), r["step_ns_median"])}
        # The run's own single-GPU trace where it traced one, else the
        # one-GPU run's (--by-modules: always, its traces name their modules).
        own = None if args.by_modules else measured_plain(measured).get((model, precision))
        if own is not None and "trace" not in own:
            own = None
        plain = own if own is not None else singles.get((model, precision), {}).get(1)
        folder = measured if own is not None else Path(args.results)
        if plain is not None and "batch" in plain and "batch" in r and plain["batch"] != r["batch"]:
            plain = None  # a trace of another batch would predict another step
        if plain is not None and "trace" in plain:
            units = 0 if args.by_modules else r["blocks"]
            (config,) = predicted_configs(args.cli, folder / plain["trace"],
                                          args.gpu, [n], units).values()
            row["predicted_ms"] = int(config["step_ns"]) / 1e6
            row["predicted_gib"] = int(config.get("peak_memory_bytes_per_gpu", 0)) / GIB
            row["err_step_pct"] = error_pct(int(config["step_ns"]), r["step_ns_median"])
            row["expected_pct"] = float(config.get("expected_error_percent", 0))
            row["err_mem_pct"] = error_pct(int(config.get("peak_memory_bytes_per_gpu", 0)),
                                           r["peak_allocated_bytes"])
        out.append(row)
    return out


def rank_rows(args) -> list:
    """Each real run's rank-0 trace predicted back: the FSDP step at its own
    N, and (where measured) the plain single-GPU step, against both."""
    singles = cases(Path(args.results))
    measured = Path(args.measured)
    plain = measured_plain(measured)
    out = []
    # --rank-run: the rank-0 traces of another run (another N) predict
    # this run's N instead of its own.
    source = Path(args.rank_run) if args.rank_run else measured
    traces = {(m, p): (source / t["trace"])
              for (m, p, _), t in measured_cases(source).items()}
    for (model, precision, n), r in sorted(measured_cases(measured).items()):
        if (model, precision) not in traces:
            continue
        cmd = [args.cli, "predict", str(traces[(model, precision)]), "--devices", args.gpu,
               "--catalog", "none", "--format", "json", "-q", "--parallel", "fsdp",
               "--gpus", str(n), "--fsdp-units", str(r["blocks"])]
        (prediction,) = json.loads(subprocess.run(cmd, capture_output=True, text=True,
                                                  check=True).stdout)["predictions"]
        (config,) = prediction["parallel"]
        row = {"model": model, "precision": precision, "gpus": n,
               "measured_ms": r["step_ns_median"] / 1e6,
               "predicted_ms": int(config["step_ns"]) / 1e6,
               "err_step_pct": error_pct(int(config["step_ns"]), r["step_ns_median"]),
               "single_predicted_ms": int(prediction["wall_time_ns"]) / 1e6}
        peak = int(config.get("peak_memory_bytes_per_gpu", 0))
        if peak > 0:
            row["predicted_gib"] = peak / GIB
            row["measured_gib"] = r["peak_allocated_bytes"] / GIB
            row["err_mem_pct"] = error_pct(peak, r["peak_allocated_bytes"])
        one = plain.get((model, precision)) or singles.get((model, precision), {}).get(1)
        if one is not None:
            row["single_measured_ms"] = one["step_ns_median"] / 1e6
            row["err_single_pct"] = error_pct(int(prediction["wall_time_ns"]),
                                              one["step_ns_median"])
        out.append(row)
    return out


def rank_report(rs: list, whose: str = "its own rank") -> list:
    lines = [f"| model | precision | N | FSDP measured ms | from {whose} ms | error % | "
             "1 GPU measured ms | from the rank ms | error % | peak GiB measured | "
             "from the rank | error % |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rs:
        single = (f"{r['single_measured_ms']:.1f} | {r['single_predicted_ms']:.1f} | "
                  f"{r['err_single_pct']:+.1f}" if "err_single_pct" in r
                  else f"— | {r['single_predicted_ms']:.1f} | —")
        memory = (f"{r['measured_gib']:.2f} | {r['predicted_gib']:.2f} | {r['err_mem_pct']:+.1f}"
                  if "err_mem_pct" in r else "— | — | —")
        lines.append(f"| {r['model']} | {r['precision']} | {r['gpus']} | "
                     f"{r['measured_ms']:.1f} | {r['predicted_ms']:.1f} | "
                     f"{r['err_step_pct']:+.1f} | {single} | {memory} |")
    lines.append("")
    lines.append(summary(f"FSDP step from {whose}", [r["err_step_pct"] for r in rs], 8))
    lines.append(summary("Peak memory per rank from the rank",
                         [r["err_mem_pct"] for r in rs if "err_mem_pct" in r], 5))
    lines.append(summary("Single-GPU step from a rank", [r["err_single_pct"] for r in rs
                                                          if "err_single_pct" in r], 8))
    return lines


def world_size_of(lines) -> int:
    """The N of a case's lines; 0 if the run's budget skipped them all (a
    skipped line carries no world size)."""
    return max((r.get("world_size", 0) for r in lines), default=0)


def fit_rows(args) -> list:
    """The sharded fit (`--fit --gpus N --parallel fsdp`) of each single-GPU
    trace against a measure_fsdp.py --fit-batches run: whether the predicted
    batch ran and the next batch ran out of memory, and the peak there."""
    singles = cases(Path(args.results))
    runs = {}
    for r in run_lines(Path(args.fit_run)):
        runs.setdefault((r["model"], r["precision"]), {})[r["batch"]] = r
    out = []
    for (model, precision), by_batch in sorted(runs.items()):
        plain = singles[(model, precision)][1]
        n = world_size_of(by_batch.values())
        if not n:
            continue
        cmd = [args.cli, "predict", str(Path(args.results) / plain["trace"]), "--devices",
               args.gpu, "--catalog", "none", "--format", "json", "-q", "--fit", "--gpus",
               str(n), "--parallel", "fsdp", "--fsdp-units", str(plain["blocks"])]
        (prediction,) = json.loads(subprocess.run(cmd, capture_output=True, text=True,
                                                  check=True).stdout)["predictions"]
        (config,) = prediction["parallel"]
        batch = int(config["largest_fitting_batch"])
        at, above = by_batch.get(batch, {}), by_batch.get(2 * batch, {})
        out.append({"model": model, "precision": precision, "gpus": n, "batch": batch,
                    "ran": at.get("status"), "next_ran": above.get("status"),
                    "predicted_gib": int(config["peak_memory_bytes_per_gpu"]) / GIB,
                    "measured_gib": at.get("peak_allocated_bytes", 0) / GIB})
    return out


def fit_report(rs: list) -> list:
    lines = ["| model | precision | N | predicted batch | it ran | twice it | "
             "peak GiB predicted | measured |", "|---|---|---|---|---|---|---|---|"]
    for r in rs:
        lines.append(f"| {r['model']} | {r['precision']} | {r['gpus']} | {r['batch']} | "
                     f"{r['ran']} | {r['next_ran']} | {r['predicted_gib']:.1f} | "
                     f"{r['measured_gib']:.1f} |")
    exact = sum(r["ran"] == "ok" and r["next_ran"] == "oom" for r in rs)
    lines += ["", f"{len(rs)} fits: exact (the batch ran, twice it ran out of memory) {exact}."]
    return lines


def summary(label: str, errs: list, within: float) -> str:
    if not errs:
        return f"{label}: none."
    errs = [abs(e) for e in errs]
    return (f"{label}: {len(errs)} cases, MAPE {statistics.mean(errs):.1f} %, worst "
            f"{max(errs):.1f} %, within {within:g} %: {sum(e <= within for e in errs)}.")


def step_report(rs: list) -> list:
    lines = ["| model | precision | N | bound | measured ms | predicted ms | error % | "
             "measured GiB | predicted GiB | error % |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rs:
        bound = "host" if r["host_bound"] else "GPU"
        if "predicted_ms" in r:
            lines.append(f"| {r['model']} | {r['precision']} | {r['gpus']} | {bound} | "
                         f"{r['measured_ms']:.1f} | {r['predicted_ms']:.1f} | "
                         f"{r['err_step_pct']:+.1f} | {r['measured_gib']:.2f} | "
                         f"{r['predicted_gib']:.2f} | {r['err_mem_pct']:+.1f} |")
        else:
            lines.append(f"| {r['model']} | {r['precision']} | {r['gpus']} | {bound} | "
                         f"{r['measured_ms']:.1f} | — | — | {r['measured_gib']:.2f} | — | — |")
    done = [r for r in rs if "predicted_ms" in r]
    lines.append("")
    lines.append(summary("Step, GPU-bound", [r["err_step_pct"] for r in done
                                             if not r["host_bound"]], 8))
    lines.append(summary("Step, host-bound", [r["err_step_pct"] for r in done
                                              if r["host_bound"]], 8))
    lines.append(summary("Peak memory per rank", [r["err_mem_pct"] for r in done], 5))
    lines.append(coverage([r for r in done if "expected_pct" in r]))
    return lines


def coverage(rs: list) -> str:
    """How many predicted steps lie inside their own expected error, and the
    errors they carry (kFsdpHostBoundErrorPercent's where the prediction
    called the step host-bound)."""
    inside = sum(abs(r["err_step_pct"]) <= r["expected_pct"] for r in rs)
    spans = sorted({round(r["expected_pct"]) for r in rs})
    return (f"Inside their ±err: {inside} of {len(rs)} "
            f"(±err {', '.join(f'{e} %' for e in spans)}).")


def report(rs: list) -> list:
    lines = ["| model | precision | N | measured GiB | predicted GiB | error % |",
             "|---|---|---|---|---|---|"]
    for r in rs:
        lines.append(f"| {r['model']} | {r['precision']} | {r['gpus']} | "
                     f"{r['measured_gib']:.2f} | {r['predicted_gib']:.2f} | "
                     f"{r['err_pct']:+.1f} |")
    errs = [abs(r["err_pct"]) for r in rs]
    lines.append("")
    lines.append(f"{len(rs)} cases: MAPE {statistics.mean(errs):.1f} %, "
                 f"worst {max(errs):.1f} %, within 5 %: {sum(e <= 5 for e in errs)}.")
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--results", required=True)
    ap.add_argument("--cli", default=str(ROOT / "build" / "client" / "habitat"))
    ap.add_argument("--measured", default="",
                    help="a measure_fsdp.py run: compare steps and peaks of real N-GPU runs")
    ap.add_argument("--fit-run", default="",
                    help="a measure_fsdp.py --fit-batches run: check the sharded fit")
    ap.add_argument("--from-rank", action="store_true",
                    help="with --measured: predict from each run's rank-0 trace instead")
    ap.add_argument("--rank-run", default="",
                    help="with --from-rank: predict from this run's rank-0 traces (another N)")
    ap.add_argument("--by-modules", action="store_true",
                    help="with --measured: units from the traces' modules, not the block count")
    ap.add_argument("--gpu", default="H200")
    ap.add_argument("--md", default="")
    args = ap.parse_args()
    if args.from_rank and not args.measured:
        ap.error("--from-rank needs --measured")
    if args.rank_run and not args.from_rank:
        ap.error("--rank-run needs --from-rank")
    if args.fit_run:
        rs, render = fit_rows(args), fit_report
    elif args.from_rank:
        whose = (f"the rank of {Path(args.rank_run).name}" if args.rank_run
                 else "its own rank")
        rs, render = rank_rows(args), lambda rows: rank_report(rows, whose)
    elif args.measured:
        rs, render = step_rows(args), step_report
    else:
        rs, render = rows(args), report
    if not rs:
        sys.exit(f"no comparable cases under {args.measured or args.results}")
    text = "\n".join(render(rs)) + "\n"
    if args.md:
        Path(args.md).write_text(text)
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
