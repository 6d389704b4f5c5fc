#!/usr/bin/env python3
"""How much the held-out error of the kernel-varying predictor depends on
chance: the same training run as models/train.py, repeated with other seeds
(which pairs are subsampled, and XGBoost's row and column sampling), and an
ensemble that averages K such models.

    /usr/bin/python3 models/stability.py [--held A100 T4 ...] [--seeds 1 2 3]
        [--ensemble 4] [--ensemble_seeds 1 2] [--harness_floor_factor 1.5]
        [--threads 1]

Writes models/kernel_varying/stability.json, which models/report.py adds
to docs/kernel_varying_accuracy.md. Origin H100, target held out, fp32
forward (the only public data off Hopper). About 40 s per model on the
2-core machine.
"""
import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import train  # noqa: E402
from habitat_models import data as data_lib  # noqa: E402
from habitat_models import features as feat  # noqa: E402


class Ensemble:
    """Averages the log2 corrections of several boosters."""

    def __init__(self, models):
        self.models = models

    def predict(self, x):
        return np.mean([m.predict(x) for m in self.models], axis=0)


def held_out_split(pair_rows, held):
    train_index = [i for i, p in enumerate(pair_rows)
                   if train.group(p["origin"]) != held and train.group(p["target"]) != held]
    test_index = np.array([i for i, p in enumerate(pair_rows) if train.group(p["target"]) == held
                           and p["origin"] == "H100-SXM"], dtype=np.int64)
    return train_index, test_index


def fit(train_index, pair_rows, x_all, y_all, seeds):
    models = []
    for seed in seeds:
        index = train.subsample(train_index, pair_rows, seed)
        models.append(train.train(x_all[index], y_all[index], seed))
    return models[0] if len(models) == 1 else Ensemble(models)


def mape_by_family(model, test_index, x_all, ratio_all, pair_rows, devices, ceiling):
    predicted, _, _ = train.predict_pairs(model, test_index, x_all, ratio_all, pair_rows,
                                          devices, ceiling)
    result = train.evaluate({"ours": predicted}, test_index, pair_rows)
    return {family: round(m["ours"]["mape"], 1) for family, m in result.items()}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--held", nargs="+", default=["A100", "V100-PCIE-32GB", "T4"])
    p.add_argument("--seeds", nargs="+", type=int, default=[1, 2, 3])
    p.add_argument("--ensemble", type=int, default=4)
    p.add_argument("--ensemble_seeds", nargs="+", type=int, default=[1, 2])
    p.add_argument("--harness_floor_factor", type=float,
                   default=data_lib.DEFAULT_HARNESS_FLOOR_FACTOR)
    p.add_argument("--neusight_dir", default=str(train.ROOT.parent / "shared" / "data" / "neusight"))
    p.add_argument("--threads", type=int, default=train.TREE_PARAMS["n_jobs"],
                   help="XGBoost threads (1 beside another CPU-heavy job: OpenMP spins)")
    p.add_argument("--out", default=str(train.ROOT / "models" / "kernel_varying" / "stability.json"))
    args = p.parse_args()
    train.TREE_PARAMS["n_jobs"] = args.threads
    devices = feat.load_devices(train.ROOT / "data" / "devices.textproto")
    rows = data_lib.measurements(args.neusight_dir, train.ROOT / "models" / "data", devices,
                                 args.harness_floor_factor)
    pair_rows = data_lib.pairs(rows, train.group)
    x_all, y_all, ratio_all = train.featurize(pair_rows, devices)
    out = {"ensemble_size": args.ensemble, "harness_floor_factor": args.harness_floor_factor,
           "tree_params": train.TREE_PARAMS, "held_out": {}}
    for held in args.held:
        started = time.time()
        train_index, test_index = held_out_split(pair_rows, held)
        ceiling = train.large_gemm_ceiling(rows, devices, held)
        runs = {"single": {}, "ensemble": {}}
        for seed in args.seeds:
            model = fit(train_index, pair_rows, x_all, y_all, [seed])
            runs["single"][str(seed)] = mape_by_family(model, test_index, x_all, ratio_all,
                                                       pair_rows, devices, ceiling)
        for seed in args.ensemble_seeds:
            seeds = [1000 * seed + k for k in range(args.ensemble)]
            model = fit(train_index, pair_rows, x_all, y_all, seeds)
            runs["ensemble"][str(seed)] = mape_by_family(model, test_index, x_all, ratio_all,
                                                         pair_rows, devices, ceiling)
        out["held_out"][held] = runs
        print(f"[held out {held}] {json.dumps(runs)} ({time.time() - started:.0f}s)", flush=True)
        Path(args.out).write_text(json.dumps(out, indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
