"""Features of the kernel-varying predictor (version 2).

The C++ server computes the same vector (core/kernel_varying/features.cc); the parity
test (core/kernel_varying/mlp_predictor_test.cc) checks both against
models/kernel_varying/parity_reference.json. Change both or neither, and bump
FEATURE_VERSION.

The prediction of one pass (forward or backward) of one operation moved from
an origin GPU, where it was measured, to a target GPU:

    target_ns = origin_ns * roofline_ratio * 2 ** model(features)

(then at least the target's floor_ns). A pass that runs in another math
mode on the target (no units of the origin's mode there) is moved as one in
the target's mode on both GPUs, from origin_ns + mode_change_extra_ns, and a
TF32 pass is never predicted slower than the same pass in fp32 (C++'s
VaryingPredictor). A large fp32 GEMM on the target
takes no model correction and is at most the manifest's large_gemm_ceiling
times large_gemm_roofline_ns; one in TF32 on the target, or one the origin
ran in another math mode, is the manifest's large_gemm_typical times it
(train.py's predict_pairs and C++'s VaryingPredictor).

roofline_ratio is the ratio of the two GPUs' rooflines for the op, each
max(FLOP / sustained throughput of the math mode the op runs in there,
DRAM bytes / streaming bandwidth): physics that carries to any GPU with a spec
entry. The model (gradient-boosted trees) learns only the correction, from
features that describe the op relative to each GPU (waves, wave
quantisation, compute against memory time, working set against L2) and how
far the op stayed from its roofline on the origin; no feature names a GPU,
so a GPU outside the training data is predicted from what it shares with
the measured ones.
"""
import math
import re
from pathlib import Path

FEATURE_VERSION = 2
FAMILIES = ("linear", "bmm", "conv2d", "conv_transpose2d", "lstm", "sdpa")
CONFIG_COLUMNS = ("b", "m", "n", "k", "c_in", "c_out", "kernel", "stride",
                  "padding", "size", "heads", "seq", "head_dim", "layers",
                  "causal", "bias")
# Math modes: fp32 on CUDA cores, TF32 / fp16 / bf16 on tensor cores.
MODES = ("fp32", "tf32", "fp16", "bf16")
# Output tile edges for wave counts: a large and a small cuBLAS/cuDNN tile.
TILES = (128, 64)
# Where a GPU has no measured sustained matmul throughput: this fraction of
# the datasheet peak (median of the measured fractions in
# docs/gpu_efficiency_sources.md); kDefaultSustainedFraction in C++.
DEFAULT_SUSTAINED_FRACTION = 0.75
# Where a GPU has no measured streaming bandwidth: this fraction of the
# datasheet bandwidth (kDefaultStreamingEfficiency, core/scaling).
DEFAULT_STREAMING_FRACTION = 0.82
# A large GEMM: a linear or bmm pass on fp32 tensors that is compute-bound (its
# arithmetic at the sustained throughput takes at least 4x its DRAM
# traffic), fills the GPU (at least 4 waves of 128x128 output tiles) and
# lasts at least 100 us at its sustained roofline. The sustained throughput
# is measured on such GEMMs, so they run close to it on every GPU measured;
# the served model moves them by the sustained roofline ratio alone, under
# its ceiling (LargeGemmRooflineNs in C++).
# On fp32 tensors only (CUDA cores or TF32): bf16 and fp16 passes of
# autocast traces also time the casts of their inputs.
LARGE_GEMM_FAMILIES = ("linear", "bmm")
LARGE_GEMM_MODES = ("fp32", "tf32")
LARGE_GEMM_MIN_COMPUTE_OVER_MEMORY = 4.0
LARGE_GEMM_MIN_WAVES = 4.0
LARGE_GEMM_MIN_ROOFLINE_NS = 1e5
DEVICE_FIELDS = ("sm_count", "boost_clock_mhz", "memory_bandwidth_gbps",
                 "l2_cache_bytes", "peak_fp32_tflops", "peak_tf32_tflops",
                 "peak_bf16_tensor_tflops", "peak_fp16_tensor_tflops",
                 "streaming_bandwidth_gbps", "measured_fp32_gemm_tflops",
                 "measured_tf32_gemm_tflops", "measured_fp16_gemm_tflops",
                 "measured_bf16_gemm_tflops", "measured_memory_bandwidth_gbps")


def load_devices(path):
    """Parses data/devices.textproto: the scalar fields of each `devices`
    block; nested messages (interconnect) are skipped. Missing numeric fields
    read as 0, as in proto3."""
    devices, current, depth = {}, None, 0
    for line in Path(path).read_text().splitlines():
        line = line.strip()
        if line.startswith("devices {"):
            current, depth = {"driver_names": []}, 1
        elif current is None:
            continue
        elif line.endswith("{"):
            depth += 1
        elif line == "}":
            depth -= 1
            if depth == 0:
                for field in DEVICE_FIELDS:
                    current.setdefault(field, 0.0)
                devices[current["id"]] = current
                current = None
        elif depth == 1:
            match = re.match(r'(\w+):\s*(.*)$', line)
            if not match:
                continue
            key, value = match.groups()
            if value.startswith('"'):
                value = value.strip('"')
                if key == "driver_names":
                    current[key].append(value)
                    continue
            elif value in ("true", "false"):
                value = value == "true"
            else:
                value = float(value)
            current[key] = value
    return devices


def peak_tflops(device, mode):
    """Datasheet peak of the math mode; 0 where the GPU has no such units."""
    return {"fp32": device["peak_fp32_tflops"], "tf32": device["peak_tf32_tflops"],
            "fp16": device["peak_fp16_tensor_tflops"],
            "bf16": device["peak_bf16_tensor_tflops"]}[mode]


def sustained_tflops(device, mode):
    measured = device[f"measured_{mode}_gemm_tflops"]
    return measured if measured > 0 else DEFAULT_SUSTAINED_FRACTION * peak_tflops(device, mode)


def streaming_gbps(device):
    """StreamingBandwidthGbps in core/devices/device_rates.cc: the measured
    streaming bandwidth, else the measured copy bandwidth, else the default
    fraction of the datasheet."""
    if device["streaming_bandwidth_gbps"] > 0:
        return device["streaming_bandwidth_gbps"]
    if device.get("measured_memory_bandwidth_gbps", 0) > 0:
        return device["measured_memory_bandwidth_gbps"]
    return DEFAULT_STREAMING_FRACTION * device["memory_bandwidth_gbps"]


def conv_out(size, kernel, stride, padding):
    return max(1, (size + 2 * padding - kernel) // stride + 1)


def element_bytes(mode):
    return 2 if mode in ("fp16", "bf16") else 4


def gemm_view(family, c):
    """(batch, rows, cols, reduction) of the GEMM the op amounts to: output
    rows x cols, `batch` times, each output summing `reduction` products."""
    g = lambda key: float(c.get(key, 0))
    if family == "linear":
        return 1.0, g("m"), g("n"), g("k")
    if family == "bmm":
        return g("b"), g("m"), g("n"), g("k")
    if family == "conv2d":
        o = conv_out(int(g("size")), int(g("kernel")), int(g("stride")), int(g("padding")))
        return 1.0, g("b") * o * o, g("c_out"), g("c_in") * g("kernel") * g("kernel")
    if family == "conv_transpose2d":
        return 1.0, g("b") * g("size") * g("size"), g("c_out"), g("c_in") * g("kernel") * g("kernel")
    if family == "lstm":
        return max(1.0, g("layers")) * g("seq"), g("b"), 4 * g("n"), g("k") + g("n")
    if family == "sdpa":
        return g("b") * g("heads"), g("seq"), g("seq"), g("head_dim")
    raise ValueError(family)


def work(family, c, mode, backward):
    """(FLOP, DRAM bytes) of one pass: the minimum the op must do, not what
    its kernels happen to do."""
    elem = element_bytes(mode)
    g = lambda key: float(c.get(key, 0))
    if family == "linear":
        m, n, k = g("m"), g("n"), g("k")
        flop, words = 2 * m * n * k, m * k + k * n + m * n
    elif family == "bmm":
        b, m, n, k = g("b"), g("m"), g("n"), g("k")
        flop, words = 2 * b * m * n * k, b * (m * k + k * n + m * n)
    elif family in ("conv2d", "conv_transpose2d"):
        b, ci, co, kk, s = g("b"), g("c_in"), g("c_out"), g("kernel"), g("size")
        if family == "conv2d":
            o = conv_out(int(s), int(kk), int(g("stride")), int(g("padding")))
            flop = 2 * b * co * o * o * ci * kk * kk
        else:
            o = max(1.0, (s - 1) * g("stride") - 2 * g("padding") + kk)
            flop = 2 * b * ci * s * s * co * kk * kk
        words = b * ci * s * s + b * co * o * o + ci * co * kk * kk
    elif family == "lstm":
        b, t, i, h, layers = g("b"), g("seq"), g("k"), g("n"), max(1.0, g("layers"))
        flop = t * 8 * b * h * ((i + h) + (layers - 1) * 2 * h)
        words = t * b * (i + 4 * h * layers) + 4 * h * (i + h + (layers - 1) * 2 * h)
    elif family == "sdpa":
        b, heads, l, d = g("b"), g("heads"), g("seq"), g("head_dim")
        frac = 0.5 if g("causal") else 1.0
        flop = 4 * b * heads * l * l * d * frac
        words = 4 * b * heads * l * d
    else:
        raise ValueError(family)
    if backward:
        flop, words = 2 * flop, 2 * words
    return flop, words * elem


def min_arithmetic_flop(family, c, flop):
    """A lower bound on the arithmetic of a convolution, below the direct
    count: Winograd F(4x4, 3x3) needs 1/4 of the multiplies of a stride-1
    3x3 convolution, and FFT methods fewer still for larger kernels (bounded
    here at kernel^2 / 2). Other families do what their FLOP count says."""
    if family not in ("conv2d", "conv_transpose2d") or int(c.get("stride", 1)) != 1:
        return flop
    kernel = float(c.get("kernel", 1))
    if kernel < 3:
        return flop
    return flop / (4.0 if kernel == 3 else kernel * kernel / 2.0)


def floor_ns(family, c, mode, backward, device):
    """The hard limit: no pass can take less than its minimum arithmetic at
    the datasheet peak of its math mode, nor less than its DRAM bytes at the
    datasheet bandwidth. Returns 0 when the mode has no units on the GPU."""
    flop, nbytes = work(family, c, mode, backward)
    peak = peak_tflops(device, mode)
    if peak <= 0:
        return 0.0
    return max(min_arithmetic_flop(family, c, flop) / (peak * 1e3),
               nbytes / device["memory_bandwidth_gbps"])


def sustained_ns(flop, nbytes, mode, device):
    """(arithmetic at the sustained throughput, DRAM bytes at the streaming
    bandwidth) of a pass, in ns."""
    return flop / (sustained_tflops(device, mode) * 1e3), nbytes / streaming_gbps(device)


def mode_change_extra_ns(family, c, origin_mode, mode, backward, origin, typical):
    """What a pass the origin ran in origin_mode would take longer there in
    `mode` (a target without origin_mode's units runs `mode`): its extra
    arithmetic at the sustained throughputs, times the typical multiple of
    the roofline that large GEMMs reach (manifest large_gemm_typical). The
    predictor adds it to the origin time and moves the sum as a pass in
    `mode` on both GPUs; the origin's distance from its roofline in another
    mode (tensor cores, casts) says little of CUDA cores (models/mode_change.py
    measures both rules)."""
    compute_mode, _ = sustained_ns(*work(family, c, mode, backward), mode, origin)
    compute_origin, _ = sustained_ns(*work(family, c, origin_mode, backward), origin_mode, origin)
    return typical * max(compute_mode - compute_origin, 0.0)


def waves(batch, rows, cols, tile, device):
    """Waves of tile x tile output tiles (at least one tile) over the SMs."""
    return max(1.0, batch * math.ceil(rows / tile) * math.ceil(cols / tile)) / device["sm_count"]


def sides(family, c, mode, backward, device):
    """(roofline ns, per-GPU features) of one pass on one GPU."""
    flop, nbytes = work(family, c, mode, backward)
    compute, memory = sustained_ns(flop, nbytes, mode, device)
    roofline = max(compute, memory, 1.0)
    batch, rows, cols, _ = gemm_view(family, c)
    x = [math.log2(max(compute, 1e-3) / max(memory, 1e-3))]
    for tile in TILES:
        w = waves(batch, rows, cols, tile, device)
        x += [math.log2(w), w / math.ceil(w)]
    x += [math.log2(roofline), math.log2((nbytes + 1.0) / device["l2_cache_bytes"])]
    return roofline, x


def large_gemm_roofline_ns(family, c, mode, backward, device):
    """The sustained roofline of a pass that is a large GEMM on fp32 tensors
    on this GPU (see LARGE_GEMM_FAMILIES), else 0."""
    if family not in LARGE_GEMM_FAMILIES or mode not in LARGE_GEMM_MODES:
        return 0.0
    compute, memory = sustained_ns(*work(family, c, mode, backward), mode, device)
    batch, rows, cols, _ = gemm_view(family, c)
    if (compute < LARGE_GEMM_MIN_COMPUTE_OVER_MEMORY * memory
            or waves(batch, rows, cols, TILES[0], device) < LARGE_GEMM_MIN_WAVES
            or compute < LARGE_GEMM_MIN_ROOFLINE_NS):
        return 0.0
    return compute


def feature_names():
    names = [f"family_{f}" for f in FAMILIES] + ["backward"]
    names += [f"origin_mode_{m}" for m in MODES] + [f"target_mode_{m}" for m in MODES]
    names += ["log2p_batch", "log2p_rows", "log2p_cols", "log2p_reduction"]
    for side in ("origin", "target"):
        names += [f"{side}_{x}" for x in (
            "log2_compute_over_memory", "log2_waves_128", "wave_quant_128", "log2_waves_64",
            "wave_quant_64", "log2_roofline_ns", "log2_bytes_over_l2")]
    names += ["log2_origin_over_roofline", "log2_roofline_ratio"]
    return names


def roofline_ratio(family, c, origin_mode, target_mode, backward, origin, target):
    ro, _ = sides(family, c, origin_mode, backward, origin)
    rt, _ = sides(family, c, target_mode, backward, target)
    return rt / ro


def family_features(family, backward):
    """One-hot family, then whether the pass is the backward one."""
    return [1.0 if family == f else 0.0 for f in FAMILIES] + [1.0 if backward else 0.0]


def mode_features(mode):
    return [1.0 if mode == m else 0.0 for m in MODES]


def gemm_features(family, c):
    return [math.log2(1.0 + v) for v in gemm_view(family, c)]


def features(family, c, origin_mode, target_mode, backward, origin, target, origin_ns):
    """The feature vector and the roofline ratio of one pass."""
    ro, xo = sides(family, c, origin_mode, backward, origin)
    rt, xt = sides(family, c, target_mode, backward, target)
    x = family_features(family, backward) + mode_features(origin_mode)
    x += mode_features(target_mode) + gemm_features(family, c)
    x += xo + xt
    x += [math.log2(max(origin_ns, 1.0) / ro), math.log2(rt / ro)]
    return x, rt / ro


def target_mode(origin_mode, device):
    """The math mode the target GPU runs an op in that ran in `origin_mode`:
    TF32 falls back to fp32 CUDA cores without TF32 units (before Ampere),
    bf16 to fp32 without bf16 tensor cores (PyTorch computes bf16 matmuls
    through fp32 there), fp16 to fp32 without fp16 tensor cores (Pascal)."""
    if origin_mode != "fp32" and peak_tflops(device, origin_mode) <= 0:
        return "fp32"
    return origin_mode
