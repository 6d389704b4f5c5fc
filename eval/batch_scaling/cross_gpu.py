"""Batch scaling through the product (`habitat predict --batch-size`):
1. same GPU: each Kineto fixture at its first batch b predicted at b/2, 2b
   and 4b on its own GPU, against batch_memory's summed kernel time there;
2. cross-GPU plus batch: each H100 fixture predicted on the H200 at its
   sibling fixture's batch, against that H200 fixture's own GPU time.

Run from the repository root after building: /usr/bin/python3
eval/batch_scaling/cross_gpu.py [--cli build/client/habitat]."""
import argparse
import gzip
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
KINETO = os.path.join(ROOT, "tests", "testdata", "kineto")
BATCH_MEMORY = os.path.join(ROOT, "tests", "testdata", "batch_memory")
DEVICE_IDS = {"h100": "H100-SXM", "h200": "H200"}
PAIRS = (("resnet50", 16, 64), ("inception_v3", 16, 64), ("transformer", 32, 64),
         ("gnmt", 32, 64), ("dcgan", 64, 128))


def fixture(gpu: str, model: str, batch: int, precision: str) -> str:
    return os.path.join(KINETO, gpu, f"{model}_b{batch}_{precision}.json.gz")


def measured_gpu_ns(cli: str, path: str) -> int:
    """The H200 fixture's own GPU time: predicted on its origin GPU at its
    own batch, the CLI gives the measured time (method "measured")."""
    return predicted_gpu_ns(cli, path, 0, "H200")


def predict(cli: str, path: str, batch: int, device: str, wall_ns: int = 0) -> dict:
    """The CLI's prediction for `device` (a DevicePrediction as JSON)."""
    flags = ["--batch-size", str(batch)] if batch else []
    if wall_ns:
        flags += ["--wall-ns", str(wall_ns)]
    out = subprocess.run([cli, "predict", path, *flags, "--devices", device,
                          "--catalog", "none", "--format", "json"],
                         capture_output=True, text=True, check=True, timeout=300).stdout
    return json.loads(out)["predictions"][0]


def predicted_gpu_ns(cli: str, path: str, batch: int, device: str) -> int:
    return int(predict(cli, path, batch, device)["gpu_time_ns"])


def measured_wall_ns(gpu: str) -> dict:
    """Median wall time of each fixture, measured without the profiler."""
    with open(os.path.join(ROOT, "tests", "testdata", "measurements", f"{gpu}.json")) as f:
        return {c["case"]: c["wall_ns_median"] for c in json.load(f)["cases"]
                if "wall_ns_median" in c}


def batch_memory(gpu: str, quantity: str = "gpu_time_ns_mean") -> dict:
    with gzip.open(os.path.join(BATCH_MEMORY, f"{gpu}.json.gz"), "rt") as f:
        cases = json.load(f)["cases"]
    return {(c["model"], c["precision"], c["batch"]): c[quantity]
            for c in cases if c["status"] == "ok"}


def print_case(case: str, predicted: int, measured: int) -> float:
    error = 100 * (predicted - measured) / measured
    print(f"{case:<40} {predicted / 1e6:>12.3f} {measured / 1e6:>12.3f} {error:>+6.1f}%")
    return error


def same_gpu(cli: str) -> None:
    """GPU time and wall time at the other batches on the traced GPU, against
    batch_memory's summed kernel time and median CUDA-event time per
    iteration. One prediction per case: --wall-ns (the trace's measured wall
    time) calibrates the host model and leaves the GPU time alone."""
    rows = {"gpu_time_ns": [], "wall_time_ns": []}
    for gpu in ("h100", "h200"):
        gpu_ns, wall_ns = batch_memory(gpu), batch_memory(gpu, "wall_ns_median")
        walls = measured_wall_ns(gpu)
        for model, small, _ in PAIRS:
            for precision in ("fp32", "bf16"):
                for ratio in (0.5, 2, 4):
                    target = int(small * ratio)
                    p = predict(cli, fixture(gpu, model, small, precision), target,
                                DEVICE_IDS[gpu], walls[f"{model}_b{small}_{precision}"])
                    case = f"{gpu} {model} {precision} b{small} -> b{target}"
                    key = (model, precision, target)
                    rows["gpu_time_ns"].append((ratio, case, p["gpu_time_ns"], gpu_ns[key]))
                    rows["wall_time_ns"].append((ratio, case, p["wall_time_ns"], wall_ns[key]))
    for quantity, title in (("gpu_time_ns", "same GPU, vs batch_memory"),
                            ("wall_time_ns", "same GPU wall time, vs batch_memory")):
        print(f"{title:<40} {'predicted ms':>12} {'measured ms':>12} {'error':>7}")
        by_ratio = {0.5: [], 2: [], 4: []}
        for ratio, case, predicted, measured in rows[quantity]:
            by_ratio[ratio].append(abs(print_case(case, int(predicted), measured)))
        label = "MAPE" if quantity == "gpu_time_ns" else "wall MAPE"
        for ratio, errors in by_ratio.items():
            print(f"{label} at r = {ratio}: {sum(errors) / len(errors):.1f}% ({len(errors)} cases)")
        print()


def cross_gpu(cli: str) -> None:
    print(f"{'H100 trace -> H200 fixture':<40} {'predicted ms':>12} {'measured ms':>12} {'error':>7}")
    errors = []
    for model, small, large in PAIRS:
        for precision in ("fp32", "bf16"):
            for source, target in ((small, large), (large, small), (small, small)):
                predicted = predicted_gpu_ns(cli, fixture("h100", model, source, precision),
                                             target, "H200")
                measured = measured_gpu_ns(cli, fixture("h200", model, target, precision))
                error = print_case(f"{model} {precision} H100 b{source} -> H200 b{target}",
                                   predicted, measured)
                if source != target:
                    errors.append(abs(error))
    print(f"MAPE over {len(errors)} cases with another batch: {sum(errors) / len(errors):.1f}%")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cli", default=os.path.join(ROOT, "build", "client", "habitat"))
    args = parser.parse_args()
    same_gpu(args.cli)
    cross_gpu(args.cli)
    return 0


if __name__ == "__main__":
    sys.exit(main())
