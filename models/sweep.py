#!/usr/bin/env python3
"""The tree-size sweep behind train.py's TREE_PARAMS.

    /usr/bin/python3 models/sweep.py [--out models/kernel_varying/tree_sweep.json]

For each candidate (depth, minimum leaf weight, trees), the same held-out
evaluation as `train.py --eval` in the direction users run: each of the older
GPUs is held out of training entirely, and its passes are predicted from the
H100 (floored at the target's roofline). Reports the MAPE per held-out GPU and
family and the mean over them. The candidates were chosen, and the served
model picked, by this mean: the held-out GPUs are thus also the selection set
(there are only five architectures to hold out), which docs/kernel_varying_accuracy.md
says beside the numbers. ~100 s per candidate on 2 cores.
"""
import argparse
import json
import random
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
import xgboost as xgb

sys.path.insert(0, str(Path(__file__).resolve().parent))
import train as T  # noqa: E402
from habitat_models import data as data_lib  # noqa: E402
from habitat_models import features as feat  # noqa: E402

# (max_depth, min_child_weight, n_estimators); the first is the depth the
# version-2 model was first trained with, cut to 150 trees for time.
CANDIDATES = ((6, 5, 150), (4, 50, 150), (4, 50, 300), (3, 100, 150), (3, 300, 150),
              (2, 200, 300))
FAMILIES = ("linear", "bmm", "conv2d")


def held_out_mape(params, rows, pair_rows, x, y, ratio, devices, seed):
    out = {}
    for held in T.HELD_OUT:
        train_index = [i for i, p in enumerate(pair_rows)
                       if T.group(p["origin"]) != held and T.group(p["target"]) != held]
        index = T.subsample(train_index, pair_rows, seed)
        model = xgb.XGBRegressor(random_state=seed, **params).fit(x[index], y[index])
        test = np.array([i for i, p in enumerate(pair_rows)
                         if T.group(p["target"]) == held and p["origin"] == "H100-SXM"],
                        dtype=np.int64)
        predicted, _, _ = T.predict_pairs(model, test, x, ratio, pair_rows, devices,
                                          T.large_gemm_ceiling(rows, devices, held))
        ape = defaultdict(list)
        for i, value in zip(test, predicted):
            p = pair_rows[i]
            ape[p["family"]].append(abs(value - p["target_ns"]) / p["target_ns"])
        out[held] = {f: round(100 * statistics.fmean(ape[f]), 1) for f in FAMILIES if ape[f]}
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--neusight_dir", default=str(T.ROOT.parent / "shared" / "data" / "neusight"))
    p.add_argument("--devices", default=str(T.ROOT / "data" / "devices.textproto"))
    p.add_argument("--own_dir", default=str(T.ROOT / "models" / "data"))
    p.add_argument("--out", default=str(T.ROOT / "models" / "kernel_varying" / "tree_sweep.json"))
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args()
    random.seed(args.seed)
    np.random.seed(args.seed)
    devices = feat.load_devices(args.devices)
    rows = data_lib.measurements(args.neusight_dir, args.own_dir, devices)
    pair_rows = data_lib.pairs(rows, T.group)
    x, y, ratio = T.featurize(pair_rows, devices)
    results = []
    for depth, leaf, trees in CANDIDATES:
        started = time.time()
        params = dict(T.TREE_PARAMS, max_depth=depth, min_child_weight=leaf, n_estimators=trees)
        per_gpu = held_out_mape(params, rows, pair_rows, x, y, ratio, devices, args.seed)
        mean = round(statistics.fmean(v for g in per_gpu.values() for v in g.values()), 1)
        results.append({"max_depth": depth, "min_child_weight": leaf, "n_estimators": trees,
                        "mape_by_held_out_gpu": per_gpu, "mean_mape": mean})
        print(f"depth {depth} leaf {leaf} trees {trees}: mean {mean} % "
              f"({time.time() - started:.0f}s)", flush=True)
    Path(args.out).write_text(json.dumps({
        "origin": "H100-SXM", "seed": args.seed, "xgboost": xgb.__version__,
        "feature_version": feat.FEATURE_VERSION, "served": {
            k: T.TREE_PARAMS[k] for k in ("max_depth", "min_child_weight", "n_estimators")},
        "candidates": results,
        "command": "/usr/bin/python3 models/sweep.py"}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
