"""Baselines the kernel-varying predictor is evaluated against, on the same
(origin, target) pairs:

- peak_flops: origin time x ratio of the datasheet peaks of the math mode.
- roofline_datasheet: origin time x ratio of the datasheet rooflines.
- roofline_sustained: origin time x ratio of our rooflines (sustained
  throughput, streaming bandwidth): our model without its trees.
- paper_mlp: the Habitat paper's kind of predictor (Yu et al., ATC'21,
  section 3.3): an MLP from the op's configuration and the target GPU's
  specs to the target time, trained on the other GPUs' measurements; it
  does not see the origin time.
- structured_v1: the predictor this project served before (an MLP over GPU
  spec differences, models/baselines/structured_v1), with its own features.
"""
import math

import numpy as np

from . import features as feat
from . import legacy_v1_features as v1

V1_DIR = __import__("pathlib").Path(__file__).resolve().parent.parent / "baselines" / "structured_v1"


def _datasheet_roofline(family, config, mode, backward, device):
    flop, nbytes = feat.work(family, config, mode, backward)
    return max(flop / (feat.peak_tflops(device, mode) * 1e3),
               nbytes / device["memory_bandwidth_gbps"], 1.0)


def ratio_baselines(index, pair_rows, devices):
    out = {"peak_flops": [], "roofline_datasheet": [], "roofline_sustained": []}
    for i in index:
        p = pair_rows[i]
        o, t = devices[p["origin"]], devices[p["target"]]
        args = (p["family"], p["config"], p["mode"], p["backward"])
        out["peak_flops"].append(p["origin_ns"] * feat.peak_tflops(o, p["mode"]) /
                                 feat.peak_tflops(t, p["mode"]))
        out["roofline_datasheet"].append(p["origin_ns"] * _datasheet_roofline(*args, t) /
                                         _datasheet_roofline(*args, o))
        out["roofline_sustained"].append(p["origin_ns"] * feat.roofline_ratio(
            p["family"], p["config"], p["mode"], p["mode"], p["backward"], o, t))
    return {k: np.array(v) for k, v in out.items()}


def _paper_row(family, config, mode, backward, device):
    flop, nbytes = feat.work(family, config, mode, backward)
    x = [1.0 if family == f else 0.0 for f in feat.FAMILIES] + [float(backward)]
    x += [math.log2(1.0 + float(config.get(c, 0))) for c in feat.CONFIG_COLUMNS]
    x += [math.log2(1.0 + flop), math.log2(1.0 + nbytes)]
    x += [math.log2(device["memory_bytes"]), math.log2(device["memory_bandwidth_gbps"]),
          math.log2(device["sm_count"]), math.log2(feat.peak_tflops(device, mode))]
    return x


def paper_mlp(rows, held, group, test_index, pair_rows, devices, seed):
    """Trained on absolute measurements of every GPU but `held`, in the
    modes the test rows use; predicts the target time directly."""
    from sklearn.neural_network import MLPRegressor
    modes = {pair_rows[i]["mode"] for i in test_index}
    families = {pair_rows[i]["family"] for i in test_index}
    train = [r for r in rows if group(r[5]) != held and r[3] in modes and r[1] in families
             and r[6] >= 20_000]
    rng = np.random.default_rng(seed)
    if len(train) > 60_000:
        train = [train[i] for i in sorted(rng.choice(len(train), 60_000, replace=False))]
    x = np.array([_paper_row(r[1], r[2], r[3], r[4], devices[r[5]]) for r in train])
    y = np.log2([r[6] for r in train])
    mean, std = x.mean(0), x.std(0) + 1e-6
    model = MLPRegressor(hidden_layer_sizes=(128, 128, 128), max_iter=40, random_state=seed,
                         early_stopping=True)
    model.fit((x - mean) / std, y)
    test = np.array([_paper_row(pair_rows[i]["family"], pair_rows[i]["config"],
                                pair_rows[i]["mode"], pair_rows[i]["backward"],
                                devices[pair_rows[i]["target"]]) for i in test_index])
    return np.exp2(model.predict((test - mean) / std))


def structured_v1(index, pair_rows, devices):
    """The previously served model, evaluated with numpy on its own
    (version 1) features; it knew fp32 and bf16 only."""
    w = np.load(V1_DIR / "weights.npz")
    legacy = {k: {**d, **{f: d.get(f, 0.0) for f in v1.DEVICE_FIELDS}} for k, d in devices.items()}
    x = np.array([v1.features(pair_rows[i]["family"], pair_rows[i]["config"],
                              "bf16" if pair_rows[i]["mode"] in ("bf16", "fp16") else "fp32",
                              pair_rows[i]["backward"], legacy[pair_rows[i]["origin"]],
                              legacy[pair_rows[i]["target"]], pair_rows[i]["origin_ns"])
                  for i in index], dtype=np.float32)
    h = (x[:, w["context"]] - w["mean"]) / w["std"]
    layers = sorted({int(k.split(".")[1]) for k in w.files if k.startswith("mlp.")})
    for n, layer in enumerate(layers):
        h = h @ w[f"mlp.{layer}.weight"].T + w[f"mlp.{layer}.bias"]
        if n < len(layers) - 1:
            h = np.maximum(h, 0)
    delta = x[:, w["delta_target"]] - x[:, w["delta_origin"]]
    ratio = np.exp2((h * delta).sum(-1).astype(np.float64))
    return np.array([pair_rows[i]["origin_ns"] for i in index]) * ratio
