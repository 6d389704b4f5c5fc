#!/usr/bin/env python3
"""Is the served kernel-varying model monotone in the target's hardware?

A GPU with more memory bandwidth (or more matmul throughput) and nothing
else changed must never be predicted slower. The roofline ratio, the floor
and the large-GEMM rule are monotone by construction; the trees' correction
is not constrained. This measures, per target GPU, how often the served
prediction of a pass gets slower when the target's streaming bandwidth (or
its sustained throughput in every mode) is raised by 20 %.

    /usr/bin/python3 models/monotonicity.py [--variants]

Passes: 1500 of our H100 SXM measurements (models/data, six families, fp32 /
TF32 / bf16, forward and backward; seed 1) moved from the H100 SXM in the
mode they ran in, to each GPU of data/devices.textproto that runs that mode
(mode changes are left out). Prediction = max(floor, min(ceiling, origin x
roofline ratio x 2^trees)), trees skipped on large GEMMs, as
train.predict_pairs serves it.

--variants also trains, in the production direction of train.py (origin
H100 SXM, each older GPU held out), the served features against versions of
them that make the trees monotone in the target's bandwidth with XGBoost's
monotone constraints, and reports their held-out MAPE per family (about 2
minutes per variant on the 2-core machine). Writes
models/kernel_varying/monotonicity.json for models/report.py.
"""
import argparse
import copy
import gzip
import json
import math
import random
import sys
from pathlib import Path

import numpy as np
import xgboost as xgb

sys.path.insert(0, str(Path(__file__).resolve().parent))
from habitat_models import data as data_lib  # noqa: E402
from habitat_models import features as feat  # noqa: E402
import train as T  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "models" / "kernel_varying"
ORIGIN = "H100-SXM"
SAMPLE = 1500
RAISE = 1.2
# Feature variants: (target side as compute and memory time instead of
# compute over memory and roofline, {feature: XGBoost monotone constraint}).
# A +1 constraint: the correction may not fall as the feature falls. With
# the target's memory time (or the roofline and roofline ratio, which fall
# with it) constrained so, more bandwidth can only lower a prediction.
VARIANTS = {
    "served": (False, {}),
    "compute and memory time, all three +1": (
        True, {"target_log2_compute_over_memory": 1, "target_log2_roofline_ns": 1,
               "log2_roofline_ratio": 1}),
    "compute and memory time, memory and ratio +1": (
        True, {"target_log2_roofline_ns": 1, "log2_roofline_ratio": 1}),
    "served features, compute/memory -1, roofline and ratio +1": (
        False, {"target_log2_compute_over_memory": -1, "target_log2_roofline_ns": 1,
                "log2_roofline_ratio": 1}),
}


def sides_compute_and_memory(family, c, mode, backward, device):
    """feat.sides with log2 compute time in the compute-over-memory slot and
    log2 memory time in the roofline slot (the variants' feature layout)."""
    flop, nbytes = feat.work(family, c, mode, backward)
    compute, memory = feat.sustained_ns(flop, nbytes, mode, device)
    batch, rows, cols, _ = feat.gemm_view(family, c)
    x = [math.log2(max(compute, 1e-3))]
    for tile in feat.TILES:
        w = feat.waves(batch, rows, cols, tile, device)
        x += [math.log2(w), w / math.ceil(w)]
    x += [math.log2(max(memory, 1e-3)), math.log2((nbytes + 1.0) / device["l2_cache_bytes"])]
    return max(compute, memory, 1.0), x


def served_ns(booster, manifest, row, target):
    _, family, config, mode, backward, _, origin_ns = row
    x, ratio = feat.features(family, config, mode, mode, backward, DEVICES[ORIGIN], target,
                             origin_ns)
    large = feat.large_gemm_roofline_ns(family, config, mode, backward, target)
    correction = 1.0 if large > 0 else 2.0 ** float(
        booster.predict(xgb.DMatrix(np.array([x], dtype=np.float32)))[0])
    raw = origin_ns * ratio * correction
    if large > 0:
        raw = min(raw, manifest["large_gemm_ceiling"] * large)
    return max(raw, feat.floor_ns(family, config, mode, backward, target))


def raised(device, knob):
    out = copy.deepcopy(device)
    if knob == "bandwidth":
        out["streaming_bandwidth_gbps"] = feat.streaming_gbps(device) * RAISE
        out["memory_bandwidth_gbps"] *= RAISE
    else:
        for mode in feat.MODES:
            out[f"measured_{mode}_gemm_tflops"] = feat.sustained_tflops(device, mode) * RAISE
            key = {"fp32": "peak_fp32_tflops", "tf32": "peak_tf32_tflops",
                   "fp16": "peak_fp16_tensor_tflops", "bf16": "peak_bf16_tensor_tflops"}[mode]
            out[key] *= RAISE
    return out


def served_check():
    booster = xgb.Booster()
    booster.load_model(bytearray(gzip.open(RESULTS / "model.json.gz").read()))
    manifest = json.loads((RESULTS / "manifest.json").read_text())
    rows = [r for r in data_lib.load_own(ROOT / "models" / "data") if r[5] == ORIGIN
            and r[6] >= data_lib.MIN_NS]
    rows = random.Random(1).sample(rows, SAMPLE)
    out = {}
    for gpu, device in DEVICES.items():
        if gpu == ORIGIN:
            continue
        out[gpu] = {}
        for knob in ("bandwidth", "throughput"):
            better = raised(device, knob)
            change = [served_ns(booster, manifest, r, better) /
                      served_ns(booster, manifest, r, device) - 1
                      for r in rows if feat.peak_tflops(device, r[3]) > 0]
            change = np.array(change)
            out[gpu][knob] = {"passes": int(len(change)),
                              "slower_percent": round(100 * float(np.mean(change > 1e-6)), 1),
                              "worst_percent": round(100 * float(change.max()), 1),
                              "median_percent": round(100 * float(np.median(change)), 1)}
        print(gpu, out[gpu], flush=True)
    return out


def variant_eval(name, new_layout, constraints, rows, pair_rows):
    served_sides = feat.sides
    if new_layout:
        feat.sides = sides_compute_and_memory
    try:
        x_all, y_all, ratio_all = T.featurize(pair_rows, DEVICES)
    finally:
        feat.sides = served_sides
    names = feat.feature_names()
    cons = [0] * len(names)
    for feature, sign in constraints.items():
        cons[names.index(feature)] = sign
    params = dict(T.TREE_PARAMS, monotone_constraints="(" + ",".join(map(str, cons)) + ")")
    out = {}
    for held in T.HELD_OUT:
        train_index = [i for i, p in enumerate(pair_rows)
                       if T.group(p["origin"]) != held and T.group(p["target"]) != held]
        test_index = np.array([i for i, p in enumerate(pair_rows) if T.group(p["target"]) == held
                               and p["origin"] == ORIGIN], dtype=np.int64)
        keep = T.subsample(train_index, pair_rows, 1)
        model = xgb.XGBRegressor(random_state=1, **params)
        model.fit(x_all[keep], y_all[keep])
        ours, _, _ = T.predict_pairs(model, test_index, x_all, ratio_all, pair_rows, DEVICES,
                                     T.large_gemm_ceiling(rows, DEVICES, held))
        errors = T.evaluate({"ours": ours}, test_index, pair_rows)
        out[held] = {f: round(m["ours"]["mape"], 1) for f, m in errors.items()}
        print(name, held, out[held], flush=True)
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--neusight_dir", default=str(ROOT.parent / "shared" / "data" / "neusight"))
    p.add_argument("--variants", action="store_true")
    args = p.parse_args()
    result = {"raise": RAISE, "origin": ORIGIN, "sample": SAMPLE, "served": served_check()}
    out = RESULTS / "monotonicity.json"
    if args.variants:
        rows = data_lib.measurements(args.neusight_dir, ROOT / "models" / "data", DEVICES)
        pair_rows = data_lib.pairs(rows, T.group)
        result["variants"] = {name: variant_eval(name, layout, constraints, rows, pair_rows)
                              for name, (layout, constraints) in VARIANTS.items()}
    elif out.exists():
        # The variants retrain on the held-out targets and do not read the
        # served check's GPUs: without --variants the last run's stay.
        last = json.loads(out.read_text())
        if "variants" in last:
            result["variants"] = last["variants"]
    out.write_text(json.dumps(result, indent=1))
    return 0


DEVICES = feat.load_devices(ROOT / "data" / "devices.textproto")

if __name__ == "__main__":
    sys.exit(main())
