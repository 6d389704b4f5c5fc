#!/usr/bin/env python3
"""Two designs tried against the served one, on the same held-out rows
(origin H100 SXM, fp32 forward, each older GPU held out of training):

- ratio (served): target = origin x roofline ratio x 2^trees (train.py);
- absolute: target = the target's sustained roofline x 2^trees, trees fitted
  on (configuration, GPU) rows of the other GPUs, no origin time at all
  (the design the issue suggested);
- blend: the geometric mean of the two.

Per held-out GPU and family it prints MAPE, the time-weighted signed error
(sum predicted / sum measured - 1: the bias a whole model inherits when its
per-op errors are independent) and the median signed error. With --ceiling
it also fits the absolute model with every GPU in training and 20% of
configurations held out: what these features explain of a GPU they have seen.
With --large_gemms it also compares, on linear and bmm, the served ratio model
(no trees on large fp32 GEMMs, features.large_gemm_roofline_ns: such passes
moved by the sustained roofline ratio alone, i.e. trusting that the target
runs them as far from its measured throughput as the origin did) with the
rule served before it, the trees there too.
With --training_variants it retrains the served model two other ways: each
training GPU's fp32 throughput lowered to what its own large GEMMs reached
(data_throughput; the held-out GPU and the evaluation keep the spec entries),
and the P100 and P4 left out of training.

    /usr/bin/python3 models/alternatives.py [--ceiling] [--large_gemms] [--training_variants]

About 5 minutes on the 2-core machine (--ceiling: 1 more, --large_gemms: 2,
--training_variants: 4).
"""
import argparse
import collections
import math
import sys
from pathlib import Path

import numpy as np
import xgboost as xgb

sys.path.insert(0, str(Path(__file__).resolve().parent))
import train as T  # noqa: E402
from habitat_models import data as data_lib  # noqa: E402
from habitat_models import features as feat  # noqa: E402

FAMILIES = ("linear", "bmm", "conv2d")
ABSOLUTE_PARAMS = dict(T.TREE_PARAMS, max_depth=4, min_child_weight=50)


def absolute_features(family, config, mode, backward, device):
    """(sustained roofline ns, features) of one pass on one GPU: the served
    model's configuration and per-GPU features without the origin side."""
    roofline, per_gpu = feat.sides(family, config, mode, backward, device)
    return roofline, (feat.family_features(family, backward) + feat.mode_features(mode)
                      + feat.gemm_features(family, config) + per_gpu)


def absolute_rows(rows, devices):
    rows = [r for r in rows if r[6] >= data_lib.MIN_NS]
    x, y = [], []
    for _, family, config, mode, backward, device, ns in rows:
        roofline, features = absolute_features(family, config, mode, backward, devices[device])
        x.append(features)
        y.append(math.log2(ns / roofline))
    # Every (GPU, family, mode, pass) weighs alike, as train.py's subsample.
    count = collections.Counter((T.group(r[5]), r[1], r[3], r[4]) for r in rows)
    weight = [1e4 / count[(T.group(r[5]), r[1], r[3], r[4])] for r in rows]
    return rows, np.array(x, np.float32), np.array(y, np.float32), np.array(weight)


def fit_absolute(x, y, weight, keep):
    model = xgb.XGBRegressor(random_state=1, **ABSOLUTE_PARAMS)
    model.fit(x[keep], y[keep], sample_weight=weight[keep])
    return model


def summary(predicted, measured):
    ratio = predicted / measured
    return (round(100 * float(np.mean(np.abs(ratio - 1))), 1),
            round(100 * float(predicted.sum() / measured.sum() - 1), 1),
            round(100 * float(np.exp(np.median(np.log(ratio))) - 1), 1))


def ratio_model(pair_rows, x, y, excluded):
    """The served ratio model trained without the GPU groups in `excluded`
    (as origin or target)."""
    train_index = [i for i, p in enumerate(pair_rows)
                   if T.group(p["origin"]) not in excluded and T.group(p["target"]) not in excluded]
    index = T.subsample(train_index, pair_rows, 1)
    return T.train(x[index], y[index], 1)


def h100_rows(pair_rows, held, families=None):
    """Indices of the pairs from the H100 SXM to the held-out GPU group."""
    return np.array([i for i, p in enumerate(pair_rows)
                     if T.group(p["target"]) == held and p["origin"] == "H100-SXM"
                     and (families is None or p["family"] in families)])


def featurized_pairs(rows, devices):
    """(pair rows, features, targets, roofline ratios) as train.py builds
    them; built once and shared by the sections that train ratio models."""
    pair_rows = data_lib.pairs(rows, T.group)
    return (pair_rows, *T.featurize(pair_rows, devices))


def held_out(rows, devices, pairs):
    pair_rows, x_all, y_all, ratio_all = pairs
    abs_rows, ax, ay, aw = absolute_rows(rows, devices)
    print("| target (held out) | family | ratio (served): MAPE / time-weighted / median % "
          "| absolute | blend |", "|---|---|---|---|---|", sep="\n")
    for held in T.HELD_OUT:
        model = ratio_model(pair_rows, x_all, y_all, {held})
        test = h100_rows(pair_rows, held)
        ratio_pred, _, _ = T.predict_pairs(model, test, x_all, ratio_all, pair_rows,
                                           devices, T.large_gemm_ceiling(rows, devices, held))
        absolute = fit_absolute(ax, ay, aw, np.array([T.group(r[5]) != held for r in abs_rows]))
        rooflines, features = zip(*(absolute_features(
            pair_rows[i]["family"], pair_rows[i]["config"], pair_rows[i]["mode"],
            pair_rows[i]["backward"], devices[pair_rows[i]["target"]]) for i in test))
        abs_pred = np.maximum(np.array(rooflines) * np.exp2(
            absolute.predict(np.array(features, np.float32)).astype(np.float64)),
            T.floors(pair_rows, test, devices))
        measured = np.array([pair_rows[i]["target_ns"] for i in test])
        family = np.array([pair_rows[i]["family"] for i in test])
        for f in FAMILIES:
            k = family == f
            cells = [summary(p[k], measured[k]) for p in
                     (ratio_pred, abs_pred, np.sqrt(ratio_pred * abs_pred))]
            print(f"| {held} | {f} | " + " | ".join(" / ".join(str(v) for v in c)
                                                     for c in cells) + " |", flush=True)


def ceiling(rows, devices):
    """The absolute model with every GPU in training, 20% of configurations
    held out (by train.py's hash): MAPE on the older GPUs' held-out rows."""
    abs_rows, ax, ay, aw = absolute_rows(rows, devices)
    held = np.array([T.held_out_config({"family": r[1], "config": r[2]}) for r in abs_rows])
    model = fit_absolute(ax, ay, aw, ~held)
    error = np.abs(np.exp2(model.predict(ax[held]).astype(np.float64) - ay[held]) - 1)
    by = collections.defaultdict(list)
    for e, r in zip(error, (r for r, h in zip(abs_rows, held) if h)):
        if r[0] == "neusight" and T.group(r[5]) in T.HELD_OUT:
            by[(T.group(r[5]), r[1])].append(e)
    print("\n| GPU (in training) | " + " | ".join(FAMILIES) + " |",
          "|---|" + "---:|" * len(FAMILIES), sep="\n")
    for gpu in T.HELD_OUT:
        print(f"| {gpu} | " + " | ".join(f"{100 * np.mean(by[(gpu, f)]):.1f}"
                                         for f in FAMILIES) + " |")


def large_gemms(rows, devices, pairs):
    """Served ratio model (no trees on large fp32 GEMMs) against the rule
    served before, the trees there too; MAPE / time-weighted signed error /
    median signed error %."""
    pair_rows, x_all, y_all, ratio_all = pairs
    print("\n| target (held out) | family | served: no trees on large GEMMs "
          "| before: trees there too |", "|---|---|---|---|", sep="\n")
    for held in T.HELD_OUT:
        model = ratio_model(pair_rows, x_all, y_all, {held})
        test = h100_rows(pair_rows, held, feat.LARGE_GEMM_FAMILIES)
        ceiling = T.large_gemm_ceiling(rows, devices, held)
        served, _, _ = T.predict_pairs(model, test, x_all, ratio_all, pair_rows, devices, ceiling)
        before, _, _ = T.predict_pairs(model, test, x_all, ratio_all, pair_rows, devices, ceiling,
                                       trees_on_large_gemms=True)
        measured = np.array([pair_rows[i]["target_ns"] for i in test])
        family = np.array([pair_rows[i]["family"] for i in test])
        for f in feat.LARGE_GEMM_FAMILIES:
            k = family == f
            cells = [summary(p[k], measured[k]) for p in (served, before)]
            print(f"| {held} | {f} | " + " | ".join(" / ".join(str(v) for v in c)
                                                     for c in cells) + " |", flush=True)


def data_throughput(rows, devices):
    """Per device, the 90th percentile of the fp32 TFLOP/s its large GEMMs
    (features.large_gemm_roofline_ns) reached in the data."""
    achieved = collections.defaultdict(list)
    for _, family, config, mode, backward, device, ns in rows:
        if feat.large_gemm_roofline_ns(family, config, mode, backward, devices[device]) > 0:
            achieved[device].append(feat.work(family, config, mode, backward)[0] / ns / 1e3)
    return {d: float(np.percentile(v, 90)) for d, v in achieved.items()}


def training_variants(rows, devices, pairs):
    """Per-family held-out MAPE / time-weighted signed error
    of the served training against the two variants."""
    pair_rows, x_all, y_all, ratio_all = pairs
    lowered = {d: dict(spec) for d, spec in devices.items()}
    for device, tflops in data_throughput(rows, devices).items():
        spec = lowered[device]
        spec["measured_fp32_gemm_tflops"] = min(spec["measured_fp32_gemm_tflops"], tflops)
    x_lowered, y_lowered, _ = T.featurize(pair_rows, lowered)
    variants = {"served": (x_all, y_all, ()), "lowered": (x_lowered, y_lowered, ()),
                "without P100, P4": (x_all, y_all, ("P100", "P4"))}
    print("\n| target (held out) | family | " + " | ".join(variants) + " |",
          "|---|---|" + "---|" * len(variants), sep="\n")
    for held in T.HELD_OUT:
        test = h100_rows(pair_rows, held)
        cells = []
        for x, y, left_out in variants.values():
            model = ratio_model(pair_rows, x, y, {held, *left_out})
            kept = [r for r in rows if T.group(r[5]) not in left_out]
            predicted, _, _ = T.predict_pairs(model, test, x_all, ratio_all, pair_rows, devices,
                                              T.large_gemm_ceiling(kept, devices, held))
            cells.append(T.evaluate({"m": predicted}, test, pair_rows))
        for f in FAMILIES:
            print(f"| {held} | {f} | " + " | ".join(
                f"{c[f]['m']['mape']:.1f} / {c[f]['m']['bias']:+.1f}" for c in cells) + " |",
                flush=True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--neusight_dir", default=str(T.ROOT.parent / "shared" / "data" / "neusight"))
    p.add_argument("--ceiling", action="store_true")
    p.add_argument("--large_gemms", action="store_true")
    p.add_argument("--training_variants", action="store_true")
    args = p.parse_args()
    devices = feat.load_devices(T.ROOT / "data" / "devices.textproto")
    rows = data_lib.measurements(args.neusight_dir, T.ROOT / "models" / "data", devices)
    pairs = featurized_pairs(rows, devices)
    held_out(rows, devices, pairs)
    if args.ceiling:
        ceiling(rows, devices)
    if args.large_gemms:
        large_gemms(rows, devices, pairs)
    if args.training_variants:
        training_variants(rows, devices, pairs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
