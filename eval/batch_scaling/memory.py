"""Memory prediction and --fit through the product, against measurements.

Traces: tests/testdata/agent_suite/h100_memory/<model>_b<b>_<precision>.trace.gz
(the agent on an H100, with Trace.memory, one process per model). Ground
truth: tests/testdata/batch_memory/{h100,h200}.json.gz (peak allocated
memory, GPU time and wall time at b/2, b, 2b and 4b on each GPU; the largest
power-of-two batch that ran on the H100 and the first that ran out). Those
ran every model in one process, and DCGAN, which runs no matrix multiply,
came after four that did: its memory there includes about 67 MiB the
earlier models' libraries kept. Its memory is therefore judged on the H100
against h100_dcgan_own_process.json.gz (DCGAN alone in its process), and its
shared-process memory rows on the H200 are shown but left out of the MAPE.

1. Peak memory at b/2, 2b and 4b, predicted for the H100 and the H200 from
   the H100 trace at b, against max_memory_allocated measured there.
2. GPU time at 2b and 4b on the H200 from the H100 trace at b (cross-GPU plus
   batch), against the H200's summed kernel time; wall time beside it.
3. --fit on the H100 and the H200: the largest power-of-two batch predicted
   to fit, from the H100 trace, against the largest that ran
   (batch_memory/h100.json.gz's "largest"; h200_largest.json.gz, measured
   with batch_memory.py --largest-only --largest-from 16).

Run from the repository root after building:
    /usr/bin/python3 eval/batch_scaling/memory.py [--cli build/client/habitat]
        [--without-passes]

--without-passes predicts from copies of the traces with their per-pass
allocator readings (MemoryUsage.passes) removed: the model that has only the
start and the peak, for comparison on the same traces.
"""
import argparse
import gzip
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TRACES = os.path.join(ROOT, "tests", "testdata", "agent_suite", "h100_memory")
BATCH_MEMORY = os.path.join(ROOT, "tests", "testdata", "batch_memory")
DEVICE_IDS = {"h100": "H100-SXM", "h200": "H200"}


def ground_truth(gpu: str) -> dict:
    with gzip.open(os.path.join(BATCH_MEMORY, f"{gpu}.json.gz"), "rt") as f:
        return json.load(f)


def with_dcgan_alone(truth: dict) -> dict:
    """The H100 ground truth with DCGAN's cases measured in its own process."""
    with gzip.open(os.path.join(BATCH_MEMORY, "h100_dcgan_own_process.json.gz"), "rt") as f:
        alone = json.load(f)
    out = dict(truth)
    out["cases"] = [c for c in truth["cases"] if c["model"] != "dcgan"] + alone["cases"]
    return out


def cases_by_model(truth: dict) -> dict:
    grouped = {}
    for c in truth["cases"]:
        if c["status"] == "ok":
            grouped.setdefault((c["model"], c["precision"]), []).append(c)
    return {k: sorted(v, key=lambda c: c["batch"]) for k, v in grouped.items()}


def predict(cli: str, trace: str, devices: str, flags: list) -> dict:
    out = subprocess.run([cli, "predict", trace, "--devices", devices, "--catalog", "none",
                          "--format", "json", *flags],
                         capture_output=True, text=True, check=True, timeout=300).stdout
    return {p["device_id"]: p for p in json.loads(out)["predictions"]}


def trace_path(model: str, batch: int, precision: str) -> str:
    return os.path.join(TRACES, f"{model}_b{batch}_{precision}.trace.gz")


def without_passes(folder: str) -> None:
    """Copies every trace of TRACES into `folder` with MemoryUsage.passes
    cleared, and points trace_path there."""
    global TRACES
    sys.path.insert(0, os.path.join(ROOT, "client", "python"))
    from habitat_client import _messages
    trace_class = _messages.messages()["Trace"]
    for name in os.listdir(TRACES):
        if not name.endswith(".trace.gz"):
            continue
        with gzip.open(os.path.join(TRACES, name), "rb") as f:
            trace = trace_class.FromString(f.read())
        del trace.memory.passes[:]
        with gzip.open(os.path.join(folder, name), "wb") as f:
            f.write(trace.SerializeToString())
    TRACES = folder


def pct(predicted: float, measured: float) -> float:
    return 100 * (predicted - measured) / measured


def summary(label: str, errors: list) -> None:
    """`errors`: (batch ratio, percent error) pairs."""
    abs_errors = [abs(e) for _, e in errors]
    print(f"\n{label}: MAPE {statistics.mean(abs_errors):.1f}%, "
          f"worst {max(abs_errors):.1f}% over {len(errors)} cases")
    for ratio in sorted({r for r, _ in errors}):
        at = [abs(e) for r, e in errors if r == ratio]
        print(f"- at {ratio:g}x the traced batch: MAPE {statistics.mean(at):.1f}%, "
              f"worst {max(at):.1f}% ({len(at)} cases)")
    print()


def peak_memory(cli: str, truth: dict) -> None:
    print("## Peak allocated memory, predicted from the H100 trace at b\n")
    print("| case | GPU | batch | predicted GiB | measured GiB | error |")
    print("| --- | --- | --- | --- | --- | --- |")
    errors = []
    memory_truth = {"h100": with_dcgan_alone(truth["h100"]), "h200": truth["h200"]}
    for gpu in ("h100", "h200"):
        for (model, precision), cases in cases_by_model(memory_truth[gpu]).items():
            shared = gpu == "h200" and model == "dcgan"
            traced = cases_by_model(truth["h100"])[(model, precision)][1]["batch"]
            path = trace_path(model, traced, precision)
            if not os.path.exists(path):
                print(f"| {model} {precision} | missing trace {os.path.basename(path)} |")
                continue
            for c in cases:
                if c["batch"] == traced:
                    continue
                p = predict(cli, path, DEVICE_IDS[gpu], ["--batch-size", str(c["batch"])])
                predicted = p[DEVICE_IDS[gpu]]["memory"]["peak_allocated_bytes"]
                e = pct(predicted, c["peak_allocated_bytes"])
                if not shared:
                    errors.append((c["batch"] / traced, e))
                print(f"| {model} b{traced} {precision} | {DEVICE_IDS[gpu]} | {c['batch']} | "
                      f"{predicted / 2**30:.2f} | {c['peak_allocated_bytes'] / 2**30:.2f} | "
                      f"{e:+.1f}%{' (shared process, not counted)' if shared else ''} |")
    summary("Peak memory", errors)


def cross_gpu_time(cli: str, truth: dict) -> None:
    print("## H100 trace at b predicted on the H200 at 2b and 4b\n")
    print("| case | batch | GPU ms predicted | measured | error | wall ms predicted | "
          "measured | error |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    gpu_errors, wall_errors = [], []
    h100 = cases_by_model(truth["h100"])
    for (model, precision), cases in cases_by_model(truth["h200"]).items():
        traced = h100[(model, precision)][1]["batch"]
        path = trace_path(model, traced, precision)
        if not os.path.exists(path):
            continue
        for c in cases:
            if c["batch"] <= traced:
                continue
            p = predict(cli, path, "H200", ["--batch-size", str(c["batch"])])["H200"]
            g = pct(int(p["gpu_time_ns"]), c["gpu_time_ns_mean"])
            w = pct(int(p["wall_time_ns"]), c["wall_ns_median"])
            gpu_errors.append((c["batch"] / traced, g))
            wall_errors.append((c["batch"] / traced, w))
            print(f"| {model} b{traced} {precision} | {c['batch']} | "
                  f"{int(p['gpu_time_ns']) / 1e6:.2f} | {c['gpu_time_ns_mean'] / 1e6:.2f} | "
                  f"{g:+.1f}% | {int(p['wall_time_ns']) / 1e6:.2f} | "
                  f"{c['wall_ns_median'] / 1e6:.2f} | {w:+.1f}% |")
    summary("GPU time", gpu_errors)
    summary("Wall time", wall_errors)


def largest_fit(cli: str, truth: dict, gpu: str, largest: list) -> None:
    device = DEVICE_IDS[gpu]
    print(f"## Largest power-of-two batch that fits the {device} (--fit)\n")
    print("| case | traced at | predicted | ran | first out of memory | verdict |")
    print("| --- | --- | --- | --- | --- | --- |")
    h100 = cases_by_model(truth["h100"])
    verdicts = {}
    for entry in largest:
        model, precision = entry["model"], entry["precision"]
        traced = h100[(model, precision)][1]["batch"]
        path = trace_path(model, traced, precision)
        if not os.path.exists(path):
            continue
        p = predict(cli, path, device, ["--fit"])[device]
        predicted = p["batch_size"]
        ran, oom = entry["largest_fitting_batch"], entry.get("first_oom_batch")
        verdict = ("exact" if predicted == ran else
                   "would run out of memory" if predicted > ran else
                   f"cautious ({ran // predicted}x smaller)")
        verdicts[verdict] = verdicts.get(verdict, 0) + 1
        print(f"| {model} {precision} | {traced} | {predicted} | {ran} | {oom or '-'} | "
              f"{verdict} |")
    print("\n" + ", ".join(f"{k}: {v}" for k, v in sorted(verdicts.items())) + "\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cli", default=os.path.join(ROOT, "build", "client", "habitat"))
    parser.add_argument("--without-passes", action="store_true",
                        help="predict from the traces with their per-pass readings removed")
    args = parser.parse_args()
    if not os.path.exists(args.cli):
        print(f"no habitat CLI at {args.cli}: build first", file=sys.stderr)
        return 2
    truth = {gpu: ground_truth(gpu) for gpu in ("h100", "h200")}
    with tempfile.TemporaryDirectory() as folder:
        if args.without_passes:
            without_passes(folder)
        peak_memory(args.cli, truth)
        cross_gpu_time(args.cli, truth)
        largest_fit(args.cli, truth, "h100", truth["h100"]["largest"])
        with gzip.open(os.path.join(BATCH_MEMORY, "h200_largest.json.gz"), "rt") as f:
            largest_fit(args.cli, truth, "h200", json.load(f)["largest"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
