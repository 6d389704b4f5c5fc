"""Cross-GPU plus batch: each H100 Kineto fixture predicted on the H200 at
its sibling fixture's batch by `habitat predict --batch-size`, against that
H200 fixture's summed kernel time (the quantity the predictor predicts).

Run from the repository root after building: /usr/bin/python3
eval/batch_scaling/cross_gpu.py [--cli build/client/habitat]."""
import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
KINETO = os.path.join(ROOT, "tests", "testdata", "kineto")
PAIRS = (("resnet50", 16, 64), ("inception_v3", 16, 64), ("transformer", 32, 64),
         ("gnmt", 32, 64), ("dcgan", 64, 128))


def fixture(gpu: str, model: str, batch: int, precision: str) -> str:
    return os.path.join(KINETO, gpu, f"{model}_b{batch}_{precision}.json.gz")


def measured_gpu_ns(cli: str, path: str) -> int:
    """The H200 fixture's own GPU time: predicted on its origin GPU at its
    own batch, the CLI gives the measured time (method "measured")."""
    return predicted_gpu_ns(cli, path, 0, "H200")


def predicted_gpu_ns(cli: str, path: str, batch: int, device: str) -> int:
    batch_flags = ["--batch-size", str(batch)] if batch else []
    out = subprocess.run([cli, "predict", path, *batch_flags, "--devices", device,
                          "--catalog", "none", "--format", "json"],
                         capture_output=True, text=True, check=True, timeout=300).stdout
    return int(json.loads(out)["predictions"][0]["gpu_time_ns"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cli", default=os.path.join(ROOT, "build", "client", "habitat"))
    args = parser.parse_args()
    errors = []
    print(f"{'case':<34} {'predicted ms':>12} {'measured ms':>12} {'error':>7}")
    for model, small, large in PAIRS:
        for precision in ("fp32", "bf16"):
            for source, target in ((small, large), (large, small), (small, small)):
                predicted = predicted_gpu_ns(args.cli, fixture("h100", model, source, precision),
                                             target, "H200")
                measured = measured_gpu_ns(args.cli, fixture("h200", model, target, precision))
                error = 100 * (predicted - measured) / measured
                if source != target:
                    errors.append(abs(error))
                case = f"{model} {precision} H100 b{source} -> H200 b{target}"
                print(f"{case:<34} {predicted / 1e6:>12.3f} {measured / 1e6:>12.3f} {error:>+6.1f}%")
    print(f"MAPE over {len(errors)} cases with another batch: {sum(errors) / len(errors):.1f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
