#!/usr/bin/env python3
"""Turns trained weights into the file the server loads.

    /usr/bin/python3 models/export.py [--dir models/kernel_varying]

Run with the torch the server links (Debian's python3-torch 1.13, matching
libtorch-dev 1.13): TorchScript written by a newer torch may not load in an
older LibTorch. Reads weights.npz + manifest.json (models/train.py), writes
model.pt, adds its sha256 to manifest.json, and writes parity_reference.json:
real configurations and origin times from models/data paired with GPUs from
the spec database, with the features and outputs of this exact model, which
the C++ parity test (core/mlp) must reproduce.
"""
import argparse
import gzip
import hashlib
import json
import random
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from habitat_models import data as data_lib  # noqa: E402
from habitat_models import features as feat  # noqa: E402
import train  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
PARITY_ROWS = 96


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--dir", default=str(ROOT / "models" / "kernel_varying"))
    p.add_argument("--devices", default=str(ROOT / "data" / "devices.textproto"))
    p.add_argument("--own_dir", default=str(ROOT / "models" / "data"))
    p.add_argument("--neusight_dir", default=str(ROOT.parent / "shared" / "data" / "neusight"))
    args = p.parse_args()
    out = Path(args.dir)
    manifest = json.loads((out / "manifest.json").read_text())
    weights = np.load(out / "weights.npz")
    if manifest["feature_version"] != feat.FEATURE_VERSION:
        raise SystemExit("weights were trained on another feature version; retrain")
    state = {k: torch.from_numpy(weights[k]) for k in weights.files
             if k not in ("hidden_layers", "arch")}
    arch = str(weights["arch"])
    # Placeholders of the right length; load_state_dict sets the real ones.
    width = state["mlp.0.weight"].shape[1] if arch == "free" else len(feat.feature_names())
    model = train.Predictor([0.0] * width, [1.0] * width,
                            tuple(int(h) for h in weights["hidden_layers"]), arch)
    model.load_state_dict(state)
    model.eval()
    scripted = torch.jit.script(model)
    scripted.save(str(out / "model.pt"))
    manifest["torchscript_sha256"] = hashlib.sha256((out / "model.pt").read_bytes()).hexdigest()
    # What the server evaluates: the same parameters as plain JSON (float32
    # values written exactly), run by core/mlp's own forward pass. LibTorch
    # 1.13 in the server process stops prometheus-cpp's HTTP server from
    # starting (docs/kernel_varying_accuracy.md), so the server does not
    # link it; the parity test holds the two to the same outputs.
    layers = []
    for i in range(0, len(model.mlp), 2):
        linear = model.mlp[i]
        layers.append({"weight": [[float(v) for v in row] for row in linear.weight.tolist()],
                       "bias": [float(v) for v in linear.bias.tolist()]})
    served = {"arch": arch, "context": model.context.tolist(),
              "delta_origin": model.delta_origin.tolist(),
              "delta_target": model.delta_target.tolist(),
              "mean": model.mean.tolist(), "std": model.std.tolist(), "layers": layers}
    # gzip with a fixed mtime: the same weights give the same bytes (and sha).
    with open(out / "model.json.gz", "wb") as raw:
        with gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as f:
            f.write(json.dumps(served, separators=(",", ":")).encode())
    manifest["model_file"] = "model.json.gz"
    manifest["model_sha256"] = hashlib.sha256((out / "model.json.gz").read_bytes()).hexdigest()
    manifest["exported_with_torch"] = torch.__version__
    # Which GPUs the training data covers per family and precision, so the
    # server can say when a prediction extrapolates to an unseen GPU.
    devices = feat.load_devices(args.devices)
    coverage = {}
    for _, family, _, precision, _, device, _ in data_lib.measurements(
            args.neusight_dir, args.own_dir, devices):
        coverage.setdefault(family, {}).setdefault(precision, set()).add(device)
    manifest["coverage"] = {f: {p: sorted(g) for p, g in sorted(c.items())}
                            for f, c in sorted(coverage.items())}
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1))

    pairs = data_lib.pairs(list(data_lib.load_own(args.own_dir)))
    rng = random.Random(7)
    chosen = rng.sample(pairs, PARITY_ROWS)
    others = sorted(devices)
    for i, pair in enumerate(chosen):
        if i % 2:  # exercise every kind of GPU spec, not only the two measured
            pair["target"] = others[rng.randrange(len(others))]
    x = np.array([feat.features(c["family"], c["config"], c["precision"], c["backward"],
                                devices[c["origin"]], devices[c["target"]], c["origin_ns"])
                  for c in chosen], dtype=np.float32)
    loaded = torch.jit.load(str(out / "model.pt"))
    with torch.no_grad():
        log2_ratio = loaded(torch.from_numpy(x)).numpy()
    reference = [{"family": c["family"], "config": c["config"], "precision": c["precision"],
                  "backward": c["backward"], "origin": c["origin"], "target": c["target"],
                  "origin_ns": c["origin_ns"], "features": [float(v) for v in row],
                  "log2_ratio": float(r), "predicted_ratio": float(2.0 ** r)}
                 for c, row, r in zip(chosen, x, log2_ratio)]
    (out / "parity_reference.json").write_text(json.dumps(reference, indent=1))
    print(f"wrote {out / 'model.json.gz'} ({manifest['model_sha256'][:12]}), model.pt and "
          f"{len(reference)} parity rows")
    return 0


if __name__ == "__main__":
    sys.exit(main())
