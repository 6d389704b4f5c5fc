#!/usr/bin/env python3
"""Predicted against measured data-parallel step times on the H100 or H200.

For each measured DDP case of measure_ddp.py's runs (results/*.json.gz:
model, precision, N GPUs, bucket size), asks the habitat CLI for the step
on that GPU at that N and bucket from the single-GPU agent trace of the
same model taken in the same run (results/<run>_agent/), and prints
Markdown tables:

- absolute: the predicted step against the measured one;
- scaled: the predicted step over the predicted single-GPU wall time, times
  the measured N = 1 step of the same run, which takes out the difference
  between the trace's own iteration and the harness's N = 1 step (another
  process) and leaves the data-parallel part of the model;
- added time per step over N = 1: measured against predicted;
- where the measured added time goes (rank 0's profiled steps, first bucket
  size only): GPU busy, compute, exposed communication, extra kernels, and
  the rest of the added step, time the GPU sat idle (negative where the
  N = 1 and N > 1 steps' host noise exceeds it).

GPU-bound cases (the run's N = 1 GPU busy / step >= 0.9, as
eval/multi_gpu/README.md classifies them) are the ones the goal (10 %)
applies to.

    /usr/bin/python3 eval/multi_gpu/compare.py [--gpu h100|h200|h200-host]
        [--habitat build/client/habitat]

Needs the built CLI; about 20 s on the 2-core machine.
"""
import argparse
import gzip
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
# Per set: the measure_ddp.py runs, the directory of the agent traces the
# predictions start from, and the device predicted.
SETS = {
    "h100": (("h100x2_2026-11-26", "h100x4_2026-11-26"), "h100x2_2026-11-26_agent", "H100-SXM"),
    "h200": (("h200x4_2026-11-27",), "h200x4_2026-11-27_agent", "H200"),
    "h200-host": (("h200x4_host_2026-11-28",), "h200x4_2026-11-27_agent", "H200"),
}
GPU_BOUND_SHARE = 0.9
GOAL_PERCENT = 10.0


def busy_median(case):
    """Rank 0's median profiled step (busy, compute, communication ns,
    kernels) of a case; None where it was not profiled."""
    return (case.get("busy_rank0") or {}).get("median")


def measured_cases(run):
    """{(model, batch, precision): {"n1": step ns, "gpu_bound": bool,
    "ddp": {(N, bucket MB): step ns}, "n1_case": the N = 1 case,
    "ddp_cases": {(N, bucket MB): case}}} of one measure_ddp.py output."""
    out = {}
    for case in run["train"]:
        if case.get("status") != "ok":
            continue
        key = (case["model"], case["batch"], case["precision"])
        entry = out.setdefault(key, {"n1": None, "gpu_bound": False, "ddp": {}, "n1_case": None,
                                     "ddp_cases": {}})
        step = case["step_ns"]["median"]
        if case["world_size"] == 1:
            entry["n1"], entry["n1_case"] = step, case
            entry["gpu_bound"] = (busy_median(case) or {}).get("busy_ns", 0) / step >= \
                GPU_BOUND_SHARE
        elif case["ddp"]:
            config = (case["world_size"], case["bucket_cap_mb"])
            entry["ddp"][config], entry["ddp_cases"][config] = step, case
    return {k: v for k, v in out.items() if v["n1"] is not None and v["ddp"]}


def with_host_link(devices_text, device, busbw):
    """devices.textproto's text with `device`'s interconnect replaced by a
    PCIe link of `busbw` GB/s and no NVLink SHARP (one figure: no low end)."""
    lines = devices_text.split("\n")
    start = lines.index(f'  id: "{device}"')
    first = next(i for i in range(start, len(lines)) if lines[i] == "  interconnect {")
    last = next(i for i in range(first, len(lines)) if lines[i] == "  }")
    link = ["  interconnect {", '    link: "through the host (NCCL_P2P_DISABLE=1)"',
            "    nvlink: false", "    max_gpus_per_node: 8", f"    allreduce_busbw_gbps: {busbw}",
            '    source: "eval/multi_gpu/compare.py: the run\'s own sweep"', "  }"]
    return "\n".join(lines[:first] + link + lines[last + 1:])


def host_link_busbw(run):
    """For a run whose GPUs met through the host (NCCL_P2P_DISABLE=1 in its
    environment: as on a PCIe node without peer-to-peer), the all-reduce bus
    bandwidth its own fp32 sweep measured on all its GPUs at the largest
    size, GB/s, which the prediction takes as the device's link (a PCIe
    link of that one figure) instead of its NVLink; None for other runs."""
    variables = run.get("environment", {}).get("host", {}).get("variables", {})
    if variables.get("NCCL_P2P_DISABLE") != "1":
        return None
    sweep = [e for e in run["allreduce_sweep"] if e["dtype"] == "fp32"]
    world = max(e["world_size"] for e in sweep)
    return max((e for e in sweep if e["world_size"] == world), key=lambda e: e["bytes"])[
        "busbw_GBps"]


def data_dir(device, busbw, work):
    """The data directory the predictions read: the repository's, or with
    `busbw` a copy in `work` whose `device` has that host-carried link."""
    if busbw is None:
        return ROOT / "data"
    work.mkdir()
    (work / "catalogs").symlink_to(ROOT / "data" / "catalogs")
    (work / "devices.textproto").write_text(
        with_host_link((ROOT / "data" / "devices.textproto").read_text(), device, busbw))
    return work


def predict(habitat, trace, gpus, bucket_mb, device, nvls, data):
    """(predicted single-GPU wall ns, predicted step ns, the step's expected
    error %) on `device`, with NVLink SHARP allowed or not as the measured
    run had it, from the data directory `data`."""
    out = subprocess.run(
        [habitat, "predict", str(trace), "--devices", device, "--gpus", str(gpus),
         "--bucket-mb", f"{bucket_mb:g}", "--catalog", "none", "--format", "json",
         "--data-dir", str(data), "--models-dir", str(ROOT / "models")]
        + ([] if nvls else ["--no-nvls"]),
        check=True, capture_output=True, text=True).stdout
    prediction = json.loads(out)["predictions"][0]
    parallel = prediction["parallel"][0]
    if parallel.get("unavailable"):
        raise RuntimeError(f"{trace}: {parallel['unavailable']}")
    return (prediction["wall_ns"], parallel["step_ns"],
            parallel.get("expected_error_percent", 0.0))


def rows(habitat, runs, traces, device, work):
    out = []
    for name, run in runs:
        data = data_dir(device, host_link_busbw(run), work / name)
        # measure_ddp.py turns NVLS off unless --allow-nvls (the lent machines).
        nvls = bool(run.get("config", {}).get("allow_nvls"))
        for (model, batch, precision), entry in sorted(measured_cases(run).items()):
            trace = traces / f"{model}_b{batch}_{precision}.trace.gz"
            if not trace.exists():
                continue
            for (gpus, bucket), step in sorted(entry["ddp"].items()):
                single, predicted, expected = predict(habitat, trace, gpus, bucket, device,
                                                      nvls, data)
                out.append({"run": name, "case": f"{model}_b{batch}_{precision}", "gpus": gpus,
                            "bucket_mb": bucket, "gpu_bound": entry["gpu_bound"],
                            "measured_n1": entry["n1"], "measured": step,
                            "predicted_n1": single, "predicted": predicted,
                            "expected_error": expected,
                            "scaled": predicted / single * entry["n1"]})
    return out


def error(predicted, measured):
    return 100.0 * (predicted - measured) / measured


def mape(rows, key="predicted"):
    """Mean absolute percentage error of rows' `key` steps; 0 for none."""
    return statistics.fmean(abs(error(r[key], r["measured"])) for r in rows) if rows else 0.0


def summary(table):
    """Markdown lines: MAPE of the absolute and scaled steps by N, GPU-bound
    cases, the others and all."""
    lines = ["| N GPUs | cases | GPU-bound | absolute MAPE % (GPU-bound / other / all) | "
             "scaled MAPE % (GPU-bound / other / all) | met (GPU-bound, absolute) |",
             "|---:|---:|---:|---|---|---|"]
    for gpus in sorted({r["gpus"] for r in table}):
        cases = [r for r in table if r["gpus"] == gpus]
        bound = [r for r in cases if r["gpu_bound"]]
        other = [r for r in cases if not r["gpu_bound"]]

        def split(key):
            return " / ".join(f"{mape(rs, key):.1f}" for rs in (bound, other, cases))
        met = "yes" if bound and mape(bound) <= GOAL_PERCENT else "**no**"
        lines.append(f"| {gpus} | {len(cases)} | {len(bound)} | {split('predicted')} | "
                     f"{split('scaled')} | {met} |")
    return lines


def coverage(table):
    """Markdown lines: how many steps the prediction's own expected error
    (ParallelPrediction.expected_error_percent) covers, by what it
    expected."""
    lines = ["| expected error % | cases | measured within it | MAPE % |", "|---:|---:|---:|---:|"]
    for expected in sorted({round(r["expected_error"], 1) for r in table}):
        rs = [r for r in table if round(r["expected_error"], 1) == expected]
        within = sum(abs(error(r["predicted"], r["measured"])) <= r["expected_error"] for r in rs)
        lines.append(f"| {expected:.1f} | {len(rs)} | {within} | {mape(rs):.1f} |")
    return lines


def detail(table):
    lines = ["| run | case | N | bucket MB | GPU-bound | measured N=1 ms | measured ms | "
             "predicted ms | error % | scaled error % | added ms measured / predicted |",
             "|---|---|---:|---:|---|---:|---:|---:|---:|---:|---|"]
    for r in table:
        lines.append(
            f"| {r['run']} | {r['case']} | {r['gpus']} | {r['bucket_mb']:g} | "
            f"{'yes' if r['gpu_bound'] else 'no'} | {r['measured_n1'] / 1e6:.2f} | "
            f"{r['measured'] / 1e6:.2f} | {r['predicted'] / 1e6:.2f} | "
            f"{error(r['predicted'], r['measured']):+.1f} | "
            f"{error(r['scaled'], r['measured']):+.1f} | "
            f"{(r['measured'] - r['measured_n1']) / 1e6:.2f} / "
            f"{(r['predicted'] - r['predicted_n1']) / 1e6:.2f} |")
    return lines


def breakdown(runs):
    """Markdown lines: the measured step, GPU busy and compute time DDP adds
    over N = 1, its exposed communication, and the kernels it adds."""
    lines = ["| run | case | N | added step ms | added busy ms | added compute ms | "
             "exposed comm ms | added idle ms | added kernels (NCCL) |",
             "|---|---|---:|---:|---:|---:|---:|---:|---|"]
    for name, run in runs:
        for (model, batch, precision), entry in sorted(measured_cases(run).items()):
            busy1 = busy_median(entry["n1_case"])
            for config, case in sorted(entry["ddp_cases"].items()):
                busy = busy_median(case)
                if not busy1 or not busy:
                    continue
                added = entry["ddp"][config] - entry["n1"]
                added_busy = busy["busy_ns"] - busy1["busy_ns"]
                lines.append(
                    f"| {name} | {model}_b{batch}_{precision} | {config[0]} | "
                    f"{added / 1e6:.2f} | {added_busy / 1e6:.2f} | "
                    f"{(busy['compute_busy_ns'] - busy1['compute_busy_ns']) / 1e6:.2f} | "
                    f"{busy['exposed_comm_ns'] / 1e6:.2f} | {(added - added_busy) / 1e6:.2f} | "
                    f"{busy['kernels'] - busy1['kernels']} ({busy['comm_kernels']}) |")
    return lines


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--habitat", default=str(ROOT / "build" / "client" / "habitat"))
    p.add_argument("--gpu", default="h100", choices=sorted(SETS),
                   help="which runs: the 2 x and 4 x H100 ones, the 4 x H200 one, or the "
                        "4 x H200 one through the host")
    args = p.parse_args()
    names, traces, device = SETS[args.gpu]
    runs = [(name, json.load(gzip.open(HERE / "results" / f"{name}.json.gz"))) for name in names]
    with tempfile.TemporaryDirectory() as work:
        table = rows(args.habitat, runs, HERE / "results" / traces, device, Path(work))
    print("\n".join(summary(table) + [""] + coverage(table) + [""] + detail(table) + [""]
                    + breakdown(runs)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
