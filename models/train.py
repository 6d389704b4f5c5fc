#!/usr/bin/env python3
"""Trains the kernel-varying predictor, and evaluates it leave-one-GPU-out.

    python3 models/train.py [--neusight_dir ../shared/data/neusight] [--eval]

Reproducible: fixed seeds and data order. Runs on a CUDA GPU when there is
one (minutes on an H100; the 2-core CPU machine takes hours), else on CPU.

Writes models/kernel_varying/: weights.npz (the trained parameters, portable
across torch versions) and manifest.json (feature order, version, data
provenance, training metrics). models/export.py then turns weights.npz into
the TorchScript file the server loads, with the torch the server links
(Debian's 1.13), plus the parity reference. With --eval also the
leave-one-GPU-out results (eval_results.json) that models/report.py turns
into the docs table.
"""
import argparse
import hashlib
import json
import math
import os
import random
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

# Deterministic cuBLAS (must be set before CUDA initialises).
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
import torch  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from habitat_models import data as data_lib  # noqa: E402
from habitat_models import features as feat  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
GPU_GROUPS = {"A100-PCIE-40GB": "A100", "A100-PCIE-80GB": "A100"}
HIDDEN = (256, 256, 256, 256)
MAX_TRAIN_PAIRS_PER_SOURCE_FAMILY = 60_000
EPOCHS = 60
ARCH = "structured"
LEARNING_RATE = 2e-3


def group(device_id):
    return GPU_GROUPS.get(device_id, device_id)


# Positions in features.feature_names(): what describes the op and the
# origin GPU (the context), and (origin, target) feature pairs whose
# difference says how the target differs from the origin.
CONTEXT = list(range(0, 33)) + [39, 42, 44, 46]
DELTAS = [(27, 33), (28, 34), (29, 35), (30, 36), (31, 37), (32, 38), (39, 40), (44, 45)]


class Predictor(torch.nn.Module):
    """log2(target/origin) = sum_i w_i(context) * (target_i - origin_i).

    "structured" (the default): the network sees the op and the origin GPU
    only, and outputs one weight per spec difference (peak FLOPS, bandwidth,
    SMs, L2, clock, architecture, roofline time, wave quantisation). The
    target GPU enters only through those differences, so a GPU that is not
    in the training data is predicted from its specs the way measured GPUs
    are, rather than by a network that never saw anything like it; and a
    target equal to the origin gets ratio 1 by construction.
    "free": a plain MLP over all features (the paper's kind of model), kept
    for comparison. Normalisation is part of the module so the server feeds
    raw features."""

    def __init__(self, mean, std, hidden, arch="structured"):
        super().__init__()
        self.structured = arch == "structured"
        context = CONTEXT if self.structured else list(range(len(mean)))
        self.register_buffer("context", torch.tensor(context, dtype=torch.long))
        self.register_buffer("delta_origin", torch.tensor([o for o, _ in DELTAS], dtype=torch.long))
        self.register_buffer("delta_target", torch.tensor([t for _, t in DELTAS], dtype=torch.long))
        self.register_buffer("mean", torch.tensor(mean, dtype=torch.float32)[context])
        self.register_buffer("std", torch.tensor(std, dtype=torch.float32)[context])
        layers, width = [], len(context)
        for h in hidden:
            layers += [torch.nn.Linear(width, h), torch.nn.ReLU()]
            width = h
        layers.append(torch.nn.Linear(width, len(DELTAS) if self.structured else 1))
        self.mlp = torch.nn.Sequential(*layers)

    def forward(self, x):
        out = self.mlp((x.index_select(1, self.context) - self.mean) / self.std)
        if self.structured:
            delta = x.index_select(1, self.delta_target) - x.index_select(1, self.delta_origin)
            return (out * delta).sum(-1)
        return out.squeeze(-1)


def featurize(pair_rows, devices):
    x = np.array([feat.features(p["family"], p["config"], p["precision"], p["backward"],
                                devices[p["origin"]], devices[p["target"]], p["origin_ns"])
                  for p in pair_rows], dtype=np.float32)
    y = np.array([math.log2(p["target_ns"] / p["origin_ns"]) for p in pair_rows],
                 dtype=np.float32)
    return x, y


def subsample(indices, pair_rows, seed):
    """At most MAX_TRAIN_PAIRS_PER_SOURCE_FAMILY pairs per (source, family),
    so NeuSight's 350k bmm pairs do not drown the rest."""
    by = defaultdict(list)
    for i in indices:
        by[(pair_rows[i]["source"], pair_rows[i]["family"])].append(i)
    rng = random.Random(seed)
    out = []
    for key in sorted(by):
        rows = by[key]
        if len(rows) > MAX_TRAIN_PAIRS_PER_SOURCE_FAMILY:
            rows = rng.sample(rows, MAX_TRAIN_PAIRS_PER_SOURCE_FAMILY)
        out += rows
    return np.array(sorted(out), dtype=np.int64)


def train(x, y, seed, epochs, device, log_prefix=""):
    torch.manual_seed(seed)
    np_rng = np.random.default_rng(seed)
    mean = x.mean(axis=0)
    std = x.std(axis=0)
    std[std < 1e-6] = 1.0
    model = Predictor(mean.tolist(), std.tolist(), HIDDEN, ARCH).to(device)
    xt, yt = torch.from_numpy(x).to(device), torch.from_numpy(y).to(device)
    batch = 2048
    steps_per_epoch = max(1, len(x) // batch)
    optimizer = torch.optim.Adam(model.parameters(), lr=LEARNING_RATE)
    schedule = torch.optim.lr_scheduler.OneCycleLR(
        optimizer, max_lr=LEARNING_RATE, total_steps=epochs * steps_per_epoch)
    started = time.time()
    for epoch in range(epochs):
        order = torch.from_numpy(np_rng.permutation(len(x))).to(device)
        total = torch.zeros((), device=device)
        for step in range(steps_per_epoch):
            index = order[step * batch:(step + 1) * batch]
            # L1 in log space: the median of |log ratio|, robust to the
            # occasional bad measurement, and close to MAPE for small errors.
            loss = (model(xt[index]) - yt[index]).abs().mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            schedule.step()
            total += loss.detach()
        if epoch == epochs - 1 or epoch % 10 == 0:
            print(f"{log_prefix}epoch {epoch} loss {total.item() / steps_per_epoch:.4f} "
                  f"({time.time() - started:.0f}s)", flush=True)
    model.eval()
    return model.cpu()


def predict_ratio(model, x):
    with torch.no_grad():
        out = []
        for start in range(0, len(x), 65536):
            out.append(model(torch.from_numpy(x[start:start + 65536])).numpy())
        return np.exp2(np.concatenate(out)) if out else np.zeros(0)


def ape(predicted, measured):
    return abs(predicted - measured) / measured


def evaluate(model, test_index, pair_rows, x_all, devices):
    """Per-family absolute percentage errors of the model and the baselines."""
    ratio = predict_ratio(model, x_all[test_index])
    errors = defaultdict(lambda: defaultdict(list))
    for i, r in zip(test_index, ratio):
        p = pair_rows[i]
        o, t = devices[p["origin"]], devices[p["target"]]
        family = p["family"] + ("/bwd" if p["backward"] else "") + \
            ("/bf16" if p["precision"] == "bf16" else "")
        measured, origin = p["target_ns"], p["origin_ns"]
        errors[family]["mlp"].append(ape(origin * r, measured))
        errors[family]["bandwidth"].append(
            ape(origin * o["memory_bandwidth_gbps"] / t["memory_bandwidth_gbps"], measured))
        po = feat.peak_tflops(o, p["family"], p["precision"])
        pt = feat.peak_tflops(t, p["family"], p["precision"])
        errors[family]["peak_flops"].append(ape(origin * po / pt, measured))
    return {fam: {method: {"mape": 100 * statistics.fmean(v), "rows": len(v)}
                  for method, v in methods.items()}
            for fam, methods in sorted(errors.items())}


def leave_one_gpu_out(pair_rows, x_all, y_all, devices, seed, epochs, device):
    results = {}
    groups = sorted({group(p["target"]) for p in pair_rows})
    for held in groups:
        train_index = [i for i, p in enumerate(pair_rows)
                       if group(p["origin"]) != held and group(p["target"]) != held]
        test_index = [i for i, p in enumerate(pair_rows) if group(p["target"]) == held]
        if not train_index or not test_index:
            continue
        index = subsample(train_index, pair_rows, seed)
        model = train(x_all[index], y_all[index], seed, epochs, device,
                      log_prefix=f"[held out {held}] ")
        results[held] = evaluate(model, test_index, pair_rows, x_all, devices)
        print(json.dumps({held: {f: round(m["mlp"]["mape"], 1) for f, m in results[held].items()}}),
              flush=True)
    return results


def held_out_config(p):
    """~20% of our own configurations, chosen by a hash of the configuration."""
    digest = hashlib.sha256(json.dumps([p["family"], sorted(p["config"].items())]).encode())
    return p["source"] == "habitat" and digest.digest()[0] < 52


def own_config_split(pair_rows, x_all, y_all, devices, seed, epochs, device):
    """H100 <-> H200 with 20% of our configurations held out (both GPUs
    are in training; those configurations are not)."""
    train_index = [i for i, p in enumerate(pair_rows) if not held_out_config(p)]
    index = subsample(train_index, pair_rows, seed)
    model = train(x_all[index], y_all[index], seed, epochs, device,
                  log_prefix="[configs held out] ")
    out = {}
    for origin, target in (("H100-SXM", "H200"), ("H200", "H100-SXM")):
        test_index = [i for i, p in enumerate(pair_rows) if held_out_config(p)
                      and p["origin"] == origin and p["target"] == target]
        out[f"{origin}->{target}"] = evaluate(model, test_index, pair_rows, x_all, devices)
    return out


def sha256_file(path):
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def save_weights(model, path):
    state = {k: v.numpy() for k, v in model.state_dict().items()}
    np.savez_compressed(path, hidden_layers=np.array(HIDDEN), arch=np.array(ARCH), **state)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--neusight_dir", default=str(ROOT.parent / "shared" / "data" / "neusight"))
    p.add_argument("--devices", default=str(ROOT / "data" / "devices.textproto"))
    p.add_argument("--own_dir", default=str(ROOT / "models" / "data"))
    p.add_argument("--out", default=str(ROOT / "models" / "kernel_varying"))
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--epochs", type=int, default=EPOCHS)
    p.add_argument("--eval", action="store_true", help="also run the leave-one-GPU-out evaluation")
    p.add_argument("--eval_only", action="store_true")
    p.add_argument("--arch", choices=("structured", "free"), default="structured")
    args = p.parse_args()
    global ARCH
    ARCH = args.arch
    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.set_num_threads(2)
    torch.use_deterministic_algorithms(True, warn_only=True)
    random.seed(args.seed)
    devices = feat.load_devices(args.devices)
    rows = data_lib.measurements(args.neusight_dir, args.own_dir, devices)
    pair_rows = data_lib.pairs(rows, group)
    started = time.time()
    x_all, y_all = featurize(pair_rows, devices)
    print(f"{len(rows)} measurements, {len(pair_rows)} GPU pairs, features in "
          f"{time.time() - started:.0f}s, training on {device}", flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.eval or args.eval_only:
        results = {
            "leave_one_gpu_out": leave_one_gpu_out(pair_rows, x_all, y_all, devices, args.seed,
                                                   args.epochs, device),
            "h100_h200_configs_held_out": own_config_split(pair_rows, x_all, y_all, devices,
                                                           args.seed, args.epochs, device),
            "min_ns": data_lib.MIN_NS, "epochs": args.epochs, "seed": args.seed,
            "hidden_layers": list(HIDDEN), "arch": ARCH, "torch": torch.__version__,
            "trained_on": device}
        (out / "eval_results.json").write_text(json.dumps(results, indent=1, sort_keys=True))
        if args.eval_only:
            return 0
    index = subsample(range(len(pair_rows)), pair_rows, args.seed)
    model = train(x_all[index], y_all[index], args.seed, args.epochs, device, log_prefix="[final] ")
    train_error = statistics.fmean(np.abs(predict_ratio(model, x_all[index]) /
                                          np.exp2(y_all[index]) - 1)) * 100
    save_weights(model, out / "weights.npz")
    manifest = {
        "name": "kernel_varying", "feature_version": feat.FEATURE_VERSION,
        "feature_names": feat.feature_names(), "families": list(feat.FAMILIES),
        "output": "log2(target pass time / origin pass time)",
        "min_origin_ns": data_lib.MIN_NS, "hidden_layers": list(HIDDEN), "arch": ARCH,
        "trained_gpus": sorted({p["origin"] for p in pair_rows}),
        "trained_precisions": {f: sorted({p["precision"] for p in pair_rows if p["family"] == f})
                               for f in feat.FAMILIES},
        "training_pairs": int(len(index)), "training_mape_percent": round(train_error, 2),
        "seed": args.seed, "epochs": args.epochs, "learning_rate": LEARNING_RATE,
        "trained_with_torch": torch.__version__, "trained_on": device,
        "data": {"neusight": "../shared/data/neusight (github.com/sitar-lab/NeuSight, MIT): "
                             "linear, bmm, conv fp32 forward on P4, P100, T4, V100, A100",
                 "own": {path.name: sha256_file(path)
                         for path in sorted(Path(args.own_dir).glob("*.csv.gz"))},
                 "devices": "data/devices.textproto"},
        "command": "python3 models/train.py --eval && python3 models/export.py",
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1))
    print(f"wrote {out}: training MAPE {train_error:.2f}% on {len(index)} pairs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
