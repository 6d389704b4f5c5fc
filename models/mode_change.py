#!/usr/bin/env python3
"""How the served model moves a pass whose math mode changes: measured in
bf16 or TF32 on one Hopper GPU, predicted in fp32 on the other (what a V100,
T4 or P100 target asks of a bf16 or TF32 trace), against the fp32 time
measured there.

    /usr/bin/python3 models/mode_change.py

Origins and targets are the H100 SXM and the H200, the only GPUs with both
modes measured: bf16 (autocast) in models/data on both; TF32 linear and bmm
on the H100 in models/data/tf32_check (collect_ops.py --precisions tf32,fp32
on the configurations of models/data, 2026-11-27; kept out of training). The
served model was trained on both GPUs' fp32 rows, so this checks the
mode-change step, not generalisation to an unseen GPU. Rules, each after the
target's floor:
  * trees across modes (served before 2026-11-27): origin time x the ratio
    of the two rooflines (origin in bf16, target in fp32) x the trees with
    those modes as features, a combination no training pair has;
  * fp32-equivalent origin (served since): the origin time plus the extra
    arithmetic fp32 costs on the origin times large_gemm_typical
    (features.mode_change_extra_ns), moved as an fp32 pass on both GPUs;
  * typical x sustained fp32 roofline of the target, with no origin time.
Large GEMMs (features.large_gemm_roofline_ns on the target) take the typical
multiple of their roofline in the first two rules, as served.

Writes models/kernel_varying/mode_change.json, which models/report.py adds
to docs/kernel_varying_accuracy.md. A few seconds on the 2-core machine.
"""
import gzip
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "models"))
from habitat_models import data as data_lib  # noqa: E402
from habitat_models import features as feat  # noqa: E402

RESULTS = ROOT / "models" / "kernel_varying"
GPUS = ("H100-SXM", "H200")
ORIGIN_MODES, TARGET_MODE = ("bf16", "tf32"), "fp32"
RULES = ("trees across modes", "fp32-equivalent origin", "typical x sustained roofline")
SERVED = RULES[1]


def joined(rows):
    """{(family, config, backward): {(mode, device): (ns, config)}}."""
    by = defaultdict(dict)
    for _, family, config, mode, backward, device, ns in rows:
        if device in GPUS:
            key = (family, tuple(config[c] for c in feat.CONFIG_COLUMNS), backward)
            by[key][(mode, device)] = (ns, config)
    return by


def cases(by, origin_mode):
    """(family, config, backward, origin, target, origin ns, target ns) where
    both times are at least data.MIN_NS."""
    for (family, _, backward), m in by.items():
        for origin in GPUS:
            for target in GPUS:
                o, t = m.get((origin_mode, origin)), m.get((TARGET_MODE, target))
                if origin == target or o is None or t is None:
                    continue
                if o[0] >= data_lib.MIN_NS and t[0] >= data_lib.MIN_NS:
                    yield family, o[1], backward, origin, target, o[0], t[0]


def predictions(case_list, origin_mode, booster, devices, typical):
    """Per case, {rule: predicted target ns}."""
    import numpy as np
    import xgboost as xgb
    rows, extra = [], []
    for family, config, backward, origin, target, origin_ns, _ in case_list:
        o, t = devices[origin], devices[target]
        x, ratio = feat.features(family, config, origin_mode, TARGET_MODE, backward, o, t,
                                 origin_ns)
        more = feat.mode_change_extra_ns(family, config, origin_mode, TARGET_MODE, backward, o,
                                         typical)
        x2, ratio2 = feat.features(family, config, TARGET_MODE, TARGET_MODE, backward, o, t,
                                   origin_ns + more)
        rows += [x, x2]
        extra.append((ratio, ratio2, more))
    corrections = np.exp2(booster.predict(xgb.DMatrix(np.array(rows, dtype=np.float32))))
    out = []
    for i, (family, config, backward, _, target, origin_ns, _) in enumerate(case_list):
        t = devices[target]
        ratio, ratio2, more = extra[i]
        large = feat.large_gemm_roofline_ns(family, config, TARGET_MODE, backward, t)
        flop, nbytes = feat.work(family, config, TARGET_MODE, backward)
        roofline = max(feat.sustained_ns(flop, nbytes, TARGET_MODE, t))
        floor = feat.floor_ns(family, config, TARGET_MODE, backward, t)
        values = {
            RULES[0]: typical * large if large else origin_ns * ratio * corrections[2 * i],
            RULES[1]: typical * large if large else
            (origin_ns + more) * ratio2 * corrections[2 * i + 1],
            RULES[2]: typical * roofline,
        }
        out.append({k: max(v, floor) for k, v in values.items()})
    return out


def summarise(case_list, predicted, devices):
    """{family: {'rows', 'large', rule: [MAPE %, median signed error %]}}."""
    import numpy as np
    groups = defaultdict(lambda: defaultdict(list))
    large_rows = defaultdict(int)
    for (family, config, backward, _, target, _, target_ns), p in zip(case_list, predicted):
        large_rows[family] += feat.large_gemm_roofline_ns(
            family, config, TARGET_MODE, backward, devices[target]) > 0
        for rule, value in p.items():
            groups[family][rule].append(value / target_ns - 1)
    out = {}
    for family, per_rule in sorted(groups.items()):
        errors = {rule: [round(100 * float(np.mean(np.abs(e))), 1),
                         round(100 * float(np.median(e)), 1)] for rule, e in per_rule.items()}
        out[family] = {"rows": len(per_rule[RULES[0]]), "large": large_rows[family], **errors}
    return out


def large_over_roofline(rows, devices):
    """Rows, and the 10th, 50th and 90th percentiles of time / sustained
    roofline, of the passes that are large GEMMs on their GPU."""
    ratios = []
    for _, family, config, mode, backward, device, ns in rows:
        roofline = feat.large_gemm_roofline_ns(family, config, mode, backward, devices[device])
        if roofline > 0:
            ratios.append(ns / roofline)
    if not ratios:
        return {"rows": 0}
    # numpy.percentile's default (linear) interpolation; the tests run
    # without numpy.
    deciles = statistics.quantiles(ratios * 2 if len(ratios) == 1 else ratios, n=10,
                                   method="inclusive")
    return {"rows": len(ratios), "p10": round(deciles[0], 2), "median": round(deciles[4], 2),
            "p90": round(deciles[8], 2)}


def evaluate(booster, devices, typical, own_dir=ROOT / "models" / "data"):
    """The study's results: per origin mode and family, each rule's errors;
    the large TF32 GEMMs' distance from their roofline."""
    rows = list(data_lib.load_neusight_configs(Path(own_dir) / "neusight_configs"))
    rows += list(data_lib.load_own(own_dir))
    tf32 = [r for r in data_lib.load_own(Path(own_dir) / "tf32_check") if r[3] == "tf32"]
    by = joined(rows + tf32)
    result = {"target_mode": TARGET_MODE, "gpus": list(GPUS), "rules": list(RULES),
              "origin_modes": {}}
    for origin_mode in ORIGIN_MODES:
        case_list = list(cases(by, origin_mode))
        predicted = predictions(case_list, origin_mode, booster, devices, typical)
        result["origin_modes"][origin_mode] = summarise(case_list, predicted, devices)
    result["large_tf32_over_roofline"] = large_over_roofline(tf32, devices)
    return result


def served_errors(result):
    """The manifest's expected_error.mode_change: the served rule's MAPE per
    origin mode and family, and the worst of them for the rest."""
    by_mode = {mode: {family: r[SERVED][0] for family, r in families.items()}
               for mode, families in result["origin_modes"].items()}
    worst = max(v for families in by_mode.values() for v in families.values())
    return {"default_percent": worst, "by_origin_mode": by_mode}


def main():
    devices = feat.load_devices(str(ROOT / "data" / "devices.textproto"))
    manifest = json.loads((RESULTS / "manifest.json").read_text())
    import xgboost as xgb
    booster = xgb.Booster()
    booster.load_model(bytearray(gzip.open(RESULTS / manifest["model_file"]).read()))
    result = evaluate(booster, devices, manifest["large_gemm_typical"])
    result["model_sha256"] = manifest["model_sha256"]
    for origin_mode, families in result["origin_modes"].items():
        for family, r in families.items():
            print(origin_mode, family, r)
    print("large TF32 GEMMs, time / sustained roofline:", result["large_tf32_over_roofline"])
    (RESULTS / "mode_change.json").write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
