#!/usr/bin/env python3
"""Writes the parity reference of the served kernel-varying model.

    /usr/bin/python3 models/export.py

Reads models/kernel_varying/{manifest.json, model.json.gz} (models/train.py)
and writes parity_reference.json: passes over every family, math mode
(including modes the target lacks, which fall back), pass direction and a
spread of GPU pairs, with the features, roofline ratio, floor, large-GEMM
roofline and model output the C++ side (core/kernel_varying, kernel_varying_model_test)
must reproduce.
The booster is read back from the gzipped file the server loads, so the
reference checks that file, not the in-memory model of training.
"""
import argparse
import gzip
import hashlib
import json
import random
import sys
from pathlib import Path

import numpy as np
import xgboost as xgb

sys.path.insert(0, str(Path(__file__).resolve().parent))
from habitat_models import features as feat  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
CONFIGS = {
    "linear": [dict(m=8 * 512, n=4096, k=1024, bias=1), dict(m=3, n=4097, k=35, bias=0),
               dict(m=65536, n=1024, k=4096, bias=1), dict(m=128, n=30522, k=768, bias=1)],
    "bmm": [dict(b=192, m=512, n=512, k=64), dict(b=1, m=4096, n=4096, k=4096),
            dict(b=64, m=77, n=77, k=80)],
    "conv2d": [dict(b=32, c_in=64, c_out=64, kernel=3, stride=1, padding=1, size=56, bias=0),
               dict(b=32, c_in=3, c_out=64, kernel=7, stride=2, padding=3, size=224, bias=0),
               dict(b=8, c_in=512, c_out=2048, kernel=1, stride=1, padding=0, size=7, bias=0)],
    "conv_transpose2d": [dict(b=16, c_in=256, c_out=128, kernel=4, stride=2, padding=1, size=16)],
    "lstm": [dict(b=64, seq=50, k=1024, n=1024, layers=2, bias=1),
             dict(b=8, seq=20, k=256, n=512, layers=1, bias=1)],
    "sdpa": [dict(b=8, heads=16, seq=1024, head_dim=64, causal=1),
             dict(b=2, heads=32, seq=4096, head_dim=128, causal=0)],
}
GPUS = ("H100-SXM", "H200", "A100-SXM-80GB", "V100-PCIE-32GB", "T4", "L4", "RTX3090", "P4",
        "B200")


def rows(devices, seed, typical):
    rng = random.Random(seed)
    out = []
    for family, configs in CONFIGS.items():
        for config in configs:
            c = {k: config.get(k, 0) for k in feat.CONFIG_COLUMNS}
            for mode in feat.MODES:
                origin = rng.choice(("H100-SXM", "H200"))
                target = rng.choice([g for g in GPUS if g != origin])
                backward = rng.random() < 0.5
                target_mode = feat.target_mode(mode, devices[target])
                origin_ns = float(rng.choice((25_000, 180_000, 2_500_000, 40_000_000)))
                x, ratio = feat.features(family, c, mode, target_mode, backward,
                                         devices[origin], devices[target], origin_ns)
                out.append({"family": family, "config": c, "origin_mode": mode,
                            "target_mode": target_mode, "backward": backward, "origin": origin,
                            "target": target, "origin_ns": origin_ns, "features": x,
                            "roofline_ratio": ratio,
                            "floor_ns": feat.floor_ns(family, c, target_mode, backward,
                                                      devices[target]),
                            "large_gemm_roofline_ns": feat.large_gemm_roofline_ns(
                                family, c, target_mode, backward, devices[target]),
                            "mode_change_extra_ns": feat.mode_change_extra_ns(
                                family, c, mode, target_mode, backward, devices[origin],
                                typical)})
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--devices", default=str(ROOT / "data" / "devices.textproto"))
    p.add_argument("--dir", default=str(ROOT / "models" / "kernel_varying"))
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args()
    out = Path(args.dir)
    manifest = json.loads((out / "manifest.json").read_text())
    model_path = out / manifest["model_file"]
    if hashlib.sha256(model_path.read_bytes()).hexdigest() != manifest["model_sha256"]:
        raise SystemExit(f"{model_path}: sha256 differs from the manifest")
    booster = xgb.Booster()
    booster.load_model(bytearray(gzip.decompress(model_path.read_bytes())))
    devices = feat.load_devices(args.devices)
    reference = rows(devices, args.seed, manifest["large_gemm_typical"])
    x = np.array([r["features"] for r in reference], dtype=np.float32)
    predicted = booster.inplace_predict(x)
    for r, value, row in zip(reference, predicted, x):
        r["features"] = [float(v) for v in row]
        r["log2_correction"] = float(value)
    (out / "parity_reference.json").write_text(json.dumps(reference, indent=1))
    print(f"wrote {out / 'parity_reference.json'}: {len(reference)} rows")
    return 0


if __name__ == "__main__":
    sys.exit(main())
