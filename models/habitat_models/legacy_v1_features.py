"""Features of the kernel-varying predictor.

The C++ server computes the same vector (core/kernel_varying/features.cc); the parity
test (core/kernel_varying/mlp_predictor_test.cc) checks both against
models/kernel_varying/parity_reference.json. Change both or neither, and bump
FEATURE_VERSION.

The model predicts log2(target time / origin time) of one pass (forward or
backward) of one operation, from the operation's configuration, the two GPUs'
specifications (data/devices.textproto) and the measured origin time.
"""
import math
from pathlib import Path

from .features import load_devices as load_spec_database

FEATURE_VERSION = 1
FAMILIES = ("linear", "bmm", "conv2d", "conv_transpose2d", "lstm", "sdpa")
CONFIG_COLUMNS = ("b", "m", "n", "k", "c_in", "c_out", "kernel", "stride",
                  "padding", "size", "heads", "seq", "head_dim", "layers",
                  "causal", "bias")
# Families whose fp32 math runs on TF32 tensor cores by PyTorch's default
# (torch.backends.cudnn.allow_tf32 = True; matmul TF32 is off by default).
CUDNN_FAMILIES = ("conv2d", "conv_transpose2d", "lstm")
TILE = 128                     # output tile edge assumed for wave counts
DEVICE_FIELDS = ("sm_count", "boost_clock_mhz", "memory_bandwidth_gbps",
                 "l2_cache_bytes", "peak_fp32_tflops", "peak_tf32_tflops",
                 "peak_bf16_tensor_tflops", "peak_fp16_tensor_tflops",
                 "compute_capability_major", "compute_capability_minor")


def load_devices(path):
    """The spec database with the fields this model reads (0 where absent)."""
    devices = load_spec_database(path)
    for device in devices.values():
        for field in DEVICE_FIELDS:
            device.setdefault(field, 0.0)
    return devices


def peak_tflops(device, family, precision):
    if precision == "bf16":
        peak = device["peak_bf16_tensor_tflops"] or device["peak_fp16_tensor_tflops"]
        return peak or device["peak_fp32_tflops"]
    if family in CUDNN_FAMILIES and device["peak_tf32_tflops"] > 0:
        return device["peak_tf32_tflops"]
    return device["peak_fp32_tflops"]


def conv_out(size, kernel, stride, padding):
    return max(1, (size + 2 * padding - kernel) // stride + 1)


def work(family, c, precision, backward):
    """(FLOP, DRAM bytes, output tiles) of one pass: the minimum the op must
    do, not what its kernels happen to do."""
    elem = 2 if precision == "bf16" else 4
    g = lambda key: float(c.get(key, 0))
    if family == "linear":
        m, n, k = g("m"), g("n"), g("k")
        flop, words, tiles = 2 * m * n * k, m * k + k * n + m * n, _tiles(m, n)
    elif family == "bmm":
        b, m, n, k = g("b"), g("m"), g("n"), g("k")
        flop = 2 * b * m * n * k
        words, tiles = b * (m * k + k * n + m * n), b * _tiles(m, n)
    elif family in ("conv2d", "conv_transpose2d"):
        b, ci, co, kk, s = g("b"), g("c_in"), g("c_out"), g("kernel"), g("size")
        if family == "conv2d":
            o = conv_out(int(s), int(kk), int(g("stride")), int(g("padding")))
            flop = 2 * b * co * o * o * ci * kk * kk
            rows = b * o * o
        else:
            o = max(1.0, (s - 1) * g("stride") - 2 * g("padding") + kk)
            flop = 2 * b * ci * s * s * co * kk * kk
            rows = b * s * s
        words = b * ci * s * s + b * co * o * o + ci * co * kk * kk
        tiles = _tiles(rows, co)
    elif family == "lstm":
        b, t, i, h, layers = g("b"), g("seq"), g("k"), g("n"), max(1.0, g("layers"))
        flop = t * 8 * b * h * ((i + h) + (layers - 1) * 2 * h)
        words = t * b * (i + 4 * h * layers) + 4 * h * (i + h + (layers - 1) * 2 * h)
        tiles = _tiles(b, 4 * h)
    elif family == "sdpa":
        b, heads, l, d = g("b"), g("heads"), g("seq"), g("head_dim")
        frac = 0.5 if g("causal") else 1.0
        flop = 4 * b * heads * l * l * d * frac
        words, tiles = 4 * b * heads * l * d, b * heads * math.ceil(l / TILE)
    else:
        raise ValueError(family)
    if backward:
        flop, words = 2 * flop, 2 * words
    return flop, words * elem, max(1.0, tiles)


def _tiles(rows, cols):
    return math.ceil(rows / TILE) * math.ceil(cols / TILE)


def _log2p(x):
    return math.log2(1.0 + max(0.0, x))


def device_features(device, family, precision):
    return [math.log2(peak_tflops(device, family, precision)),
            math.log2(device["memory_bandwidth_gbps"]),
            math.log2(device["sm_count"]),
            math.log2(device["l2_cache_bytes"] / 2**20),
            math.log2(device["boost_clock_mhz"]),
            device["compute_capability_major"] + device["compute_capability_minor"] / 10]


def roofline_ns(device, family, precision, flop, nbytes):
    compute = flop / (peak_tflops(device, family, precision) * 1e3)
    memory = nbytes / device["memory_bandwidth_gbps"]
    return max(compute, memory, 1.0)


def feature_names():
    names = [f"family_{f}" for f in FAMILIES] + ["backward", "bf16"]
    names += [f"log2p_{c}" for c in CONFIG_COLUMNS]
    names += ["log2p_flop", "log2p_bytes", "log2_intensity"]
    for side in ("origin", "target"):
        names += [f"{side}_{x}" for x in ("log2_peak_tflops", "log2_bandwidth_gbps",
                                          "log2_sm_count", "log2_l2_mib",
                                          "log2_clock_mhz", "compute_capability")]
    names += ["log2_roofline_origin_ns", "log2_roofline_target_ns", "log2_roofline_ratio"]
    names += ["log2_waves_origin", "log2_waves_target", "wave_quant_origin", "wave_quant_target"]
    names += ["log2_origin_ns"]
    return names


def features(family, config, precision, backward, origin, target, origin_ns):
    flop, nbytes, tiles = work(family, config, precision, backward)
    x = [1.0 if family == f else 0.0 for f in FAMILIES]
    x += [1.0 if backward else 0.0, 1.0 if precision == "bf16" else 0.0]
    x += [_log2p(float(config.get(c, 0))) for c in CONFIG_COLUMNS]
    x += [_log2p(flop), _log2p(nbytes), math.log2((flop + 1.0) / (nbytes + 1.0))]
    x += device_features(origin, family, precision)
    x += device_features(target, family, precision)
    ro = roofline_ns(origin, family, precision, flop, nbytes)
    rt = roofline_ns(target, family, precision, flop, nbytes)
    x += [math.log2(ro), math.log2(rt), math.log2(rt / ro)]
    for device in (origin, target):
        x.append(math.log2(tiles / device["sm_count"]))
    for device in (origin, target):
        waves = tiles / device["sm_count"]
        x.append(math.ceil(waves) / waves)
    x.append(math.log2(max(origin_ns, 1.0)))
    return x
