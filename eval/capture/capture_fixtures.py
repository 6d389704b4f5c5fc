#!/usr/bin/env python3
"""Captures the real-GPU fixtures under tests/testdata/ (see README.md here).

For each training case (model x batch size x precision) on the GPU at hand:
  * times >= 30 whole iterations with CUDA events (median, p10, p90, in ns);
  * profiles 5 active iterations with torch.profiler (Kineto), computes the
    GPU-busy time of each (union of its kernel/memcpy/memset intervals, the
    GPU events found through the correlation ids of the launches made inside
    that iteration's ProfilerStep range);
  * shrinks the exported Chrome trace to one representative step and writes
    it gzip -9 compressed.

Sub-commands:
  all      run every case, one child process per model, then `merge`
  run      run the cases of some models in this process (used by `all`)
  smoke    one small case with few repetitions, into a scratch folder
  devprops write device_properties/<gpu>.json (torch + CUDA program output)
  merge    build measurements/<gpu>.json from the per-case results (no torch)

Only `run`, `smoke` and `devprops` import torch; the trace analysis and
`merge` are plain Python so they can be checked on a machine without a GPU.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import gc
import gzip
import json
import math
import os
import platform
import re
import socket
import statistics
import subprocess
import sys
import time
import traceback
from collections import defaultdict
from decimal import ROUND_HALF_EVEN, Decimal
from pathlib import Path

MODELS = ("resnet50", "inception_v3", "transformer", "gnmt", "dcgan")
BATCHES = {
    "resnet50": (16, 64),
    "inception_v3": (16, 64),
    "transformer": (32, 64),
    "gnmt": (32, 64),
    "dcgan": (64, 128),
    # A decoder-only LM and a vision transformer: today's common shapes.
    "gpt2": (8, 16),
    "vit": (32, 64),
}
PRECISIONS = ("fp32", "bf16")
# Captured on request only (capture_agent.py --precisions): TF32 matmuls,
# and fp16 autocast with a gradient scaler.
EXTRA_PRECISIONS = ("tf32", "fp16")

WARMUP_ITERS = 10
REPETITIONS = 30
PROFILER_WAIT = 1
PROFILER_WARMUP = 2
PROFILER_ACTIVE = 5

# Raw (unshrunk) traces of these cases are also written under raw/ so the
# shrinking can be re-checked off the GPU machine; they are not committed.
RAW_KEEP = ("dcgan_b64_fp32", "resnet50_b16_fp32")

# A case is not started when less than this is left of the budget.
MIN_CASE_S = 12.0

KEEP_CATS = {
    "cpu_op", "user_annotation", "cuda_runtime", "cuda_driver", "kernel",
    "gpu_memcpy", "gpu_memset", "gpu_user_annotation", "ac2g",
}
CPU_CATS = {"cpu_op", "user_annotation", "cuda_runtime", "cuda_driver"}
LAUNCH_CATS = {"cuda_runtime", "cuda_driver"}
GPU_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}
STEP_RE = re.compile(r"^ProfilerStep#(\d+)$")


def case_name(model: str, batch: int, precision: str) -> str:
    return f"{model}_b{batch}_{precision}"


def all_cases(models=MODELS):
    for model in models:
        for batch in BATCHES[model]:
            for precision in PRECISIONS:
                yield model, batch, precision


def utc_now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime(
        "%Y-%m-%dT%H:%M:%SZ")


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


# ---------------------------------------------------------------------------
# Trace analysis (no torch).
# ---------------------------------------------------------------------------

def to_ns(us) -> int:
    """Kineto writes microseconds with a nanosecond fraction.

    Its timestamps carry ~16 significant digits, at the edge of a double, so
    the conversion goes through the shortest decimal form (which gives back
    the text Kineto wrote) instead of multiplying the double by 1000.
    """
    if isinstance(us, int):
        return us * 1000
    return int((Decimal(repr(float(us))) * 1000).to_integral_value(
        rounding=ROUND_HALF_EVEN))


def union_ns(intervals) -> int:
    """Total length of the union of [start, end) intervals."""
    total = 0
    cur_start = cur_end = None
    for start, end in sorted(intervals):
        if cur_end is None or start > cur_end:
            if cur_end is not None:
                total += cur_end - cur_start
            cur_start, cur_end = start, end
        elif end > cur_end:
            cur_end = end
    if cur_end is not None:
        total += cur_end - cur_start
    return total


def _corr(event):
    args = event.get("args")
    if not isinstance(args, dict):
        return None
    return args.get("correlation")


def analyze_steps(events):
    """Per ProfilerStep: CPU range, its GPU events and GPU-busy time."""
    steps = sorted(
        (e for e in events
         if e.get("ph") == "X" and e.get("cat") != "gpu_user_annotation"
         and STEP_RE.match(str(e.get("name", "")))),
        key=lambda e: to_ns(e["ts"]))
    launches = sorted(
        ((to_ns(e["ts"]), _corr(e)) for e in events
         if e.get("ph") == "X" and e.get("cat") in LAUNCH_CATS
         and _corr(e) is not None),
        key=lambda t: t[0])
    gpu_by_corr = defaultdict(list)
    for e in events:
        if e.get("ph") == "X" and e.get("cat") in GPU_CATS:
            c = _corr(e)
            if c is not None:
                gpu_by_corr[c].append(e)
    results = []
    for step in steps:
        start = to_ns(step["ts"])
        end = start + to_ns(step["dur"])
        corrs = {c for t, c in launches if start <= t <= end}
        gpu = [g for c in corrs for g in gpu_by_corr.get(c, ())]
        intervals = [(to_ns(g["ts"]), to_ns(g["ts"]) + to_ns(g["dur"]))
                     for g in gpu]
        results.append({
            "name": step["name"],
            "cpu_start_ns": start,
            "cpu_end_ns": end,
            "cpu_duration_ns": end - start,
            "correlations": corrs,
            "launch_count": len(corrs),
            "gpu_event_count": len(gpu),
            "kernel_count": sum(1 for g in gpu if g.get("cat") == "kernel"),
            "memcpy_count": sum(1 for g in gpu if g.get("cat") == "gpu_memcpy"),
            "memset_count": sum(1 for g in gpu if g.get("cat") == "gpu_memset"),
            "gpu_busy_ns": union_ns(intervals),
            "gpu_start_ns": min((s for s, _ in intervals), default=None),
            "gpu_end_ns": max((e for _, e in intervals), default=None),
        })
    return results


def pick_representative(steps):
    """The active step whose GPU-busy time is the median one."""
    with_work = [s for s in steps if s["kernel_count"] > 0]
    if not with_work:
        raise ValueError("no ProfilerStep with kernels in the trace")
    ordered = sorted(with_work, key=lambda s: s["gpu_busy_ns"])
    return ordered[len(ordered) // 2]


def shrink_trace(trace: dict, step: dict) -> dict:
    """Keeps one step's events, every ProfilerStep annotation, metadata."""
    lo, hi = step["cpu_start_ns"], step["cpu_end_ns"]
    corrs = step["correlations"]
    glo, ghi = step["gpu_start_ns"], step["gpu_end_ns"]
    kept = []
    for e in trace.get("traceEvents", []):
        ph = e.get("ph")
        cat = e.get("cat")
        if ph == "M":  # process/thread names: tiny, and real traces have them
            kept.append(e)
            continue
        if cat not in KEEP_CATS:
            continue
        if (cat in ("user_annotation", "gpu_user_annotation")
                and STEP_RE.match(str(e.get("name", "")))):
            kept.append(e)
        elif cat in CPU_CATS:
            if "ts" in e and lo <= to_ns(e["ts"]) <= hi:
                kept.append(e)
        elif cat in GPU_CATS:
            if _corr(e) in corrs:
                kept.append(e)
        elif cat == "gpu_user_annotation":
            if glo is not None and "ts" in e and glo <= to_ns(e["ts"]) <= ghi:
                kept.append(e)
        elif cat == "ac2g":
            if e.get("id") in corrs:
                kept.append(e)
    out = {k: v for k, v in trace.items() if k != "traceEvents"}
    out["traceEvents"] = kept
    return out


def write_json_gz(path: Path, obj) -> int:
    """gzip -9 with a fixed mtime so re-runs give identical bytes."""
    data = json.dumps(obj, separators=(",", ":")).encode("utf-8")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    with open(tmp, "wb") as f:
        with gzip.GzipFile(filename="", mode="wb", fileobj=f, compresslevel=9,
                           mtime=0) as gz:
            gz.write(data)
    os.replace(tmp, path)
    return path.stat().st_size


def percentile_int(values, q: float) -> int:
    """Linear interpolation between closest ranks (numpy's default)."""
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = math.ceil(pos)
    return int(round(ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)))


def process_trace(raw_path: Path, fixture_path: Path, raw_keep_path=None):
    """Analyses the exported trace, writes the shrunk fixture."""
    with open(raw_path, "r", encoding="utf-8") as f:
        trace = json.load(f)
    events = trace.get("traceEvents", [])
    steps = analyze_steps(events)
    if len(steps) < PROFILER_ACTIVE:
        raise ValueError(f"expected {PROFILER_ACTIVE} ProfilerSteps in "
                         f"{raw_path}, found {len(steps)}")
    kept = pick_representative(steps)
    small = shrink_trace(trace, kept)
    size = write_json_gz(fixture_path, small)
    if raw_keep_path is not None:
        write_json_gz(raw_keep_path, trace)
    # Re-analyse what was written: the fixture must reproduce the numbers.
    re_steps = {s["name"]: s for s in analyze_steps(small["traceEvents"])}
    re_kept = re_steps.get(kept["name"])
    if re_kept is None or re_kept["gpu_busy_ns"] != kept["gpu_busy_ns"]:
        raise ValueError(f"shrunk trace {fixture_path} does not reproduce the "
                         f"busy time of {kept['name']}")
    cats = defaultdict(int)
    for e in small["traceEvents"]:
        cats[e.get("cat", "(ph=" + str(e.get("ph")) + ")")] += 1
    busy = [s["gpu_busy_ns"] for s in steps]
    return {
        "active_steps": [s["name"] for s in steps],
        "gpu_busy_ns_per_step": busy,
        "gpu_busy_ns_median": int(round(statistics.median(busy))),
        "profiled_step_cpu_ns_per_step": [s["cpu_duration_ns"] for s in steps],
        "kept_step": kept["name"],
        "kept_step_gpu_busy_ns": kept["gpu_busy_ns"],
        "kept_step_cpu_duration_ns": kept["cpu_duration_ns"],
        "kept_step_kernel_count": kept["kernel_count"],
        "kept_step_memcpy_count": kept["memcpy_count"],
        "kept_step_memset_count": kept["memset_count"],
        "kept_step_launch_count": kept["launch_count"],
        "fixture_event_counts": dict(sorted(cats.items())),
        "fixture_bytes": size,
        "raw_trace_events": len(events),
    }


# ---------------------------------------------------------------------------
# Models and iterations (torch imported lazily).
# ---------------------------------------------------------------------------

def _sinusoid(max_len: int, d_model: int):
    import torch
    pos = torch.arange(max_len, dtype=torch.float32).unsqueeze(1)
    div = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float32)
                    * (-math.log(10000.0) / d_model))
    pe = torch.zeros(max_len, d_model)
    pe[:, 0::2] = torch.sin(pos * div)
    pe[:, 1::2] = torch.cos(pos * div)
    return pe


def _vision_step(model: str, batch: int, dev, amp):
    """ResNet-50 or Inception-v3 on random images, SGD with momentum."""
    import torch
    import torch.nn as nn
    import torchvision

    if model == "resnet50":
        net = torchvision.models.resnet50(weights=None)
        size = 224
    else:
        net = torchvision.models.inception_v3(
            weights=None, aux_logits=True, init_weights=False)
        size = 299
    net = net.to(dev).train()
    x = torch.randn(batch, 3, size, size, device=dev)
    y = torch.randint(0, 1000, (batch,), device=dev)
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    crit = nn.CrossEntropyLoss()

    def step():
        opt.zero_grad(set_to_none=True)
        with amp():
            out = net(x)
            if model == "inception_v3":
                loss = crit(out.logits, y) + 0.4 * crit(out.aux_logits, y)
            else:
                loss = crit(out, y)
        amp.backward(loss)
        amp.step(opt)
    return step


def _seq2seq_step(net, vocab: int, batch: int, length: int, dev, amp, lr: float):
    """One Adam training step of a token seq2seq model (net(src, tgt_in) ->
    logits) on random ids: the Transformer's and GNMT's shared loop."""
    import torch
    import torch.nn as nn

    src = torch.randint(0, vocab, (batch, length), device=dev)
    tgt_in = torch.randint(0, vocab, (batch, length), device=dev)
    tgt_out = torch.randint(0, vocab, (batch, length), device=dev)
    opt = torch.optim.Adam(net.parameters(), lr=lr)
    crit = nn.CrossEntropyLoss()

    def step():
        opt.zero_grad(set_to_none=True)
        with amp():
            logits = net(src, tgt_in)
            loss = crit(logits.reshape(-1, vocab), tgt_out.reshape(-1))
        amp.backward(loss)
        amp.step(opt)
    return step


def _transformer_step(model: str, batch: int, dev, amp):
    """The original Transformer (base) on random token ids, Adam."""
    import torch.nn as nn

    vocab, d_model, length = 32000, 512, 50

    class Seq2SeqTransformer(nn.Module):
        def __init__(self):
            super().__init__()
            self.src_embed = nn.Embedding(vocab, d_model)
            self.tgt_embed = nn.Embedding(vocab, d_model)
            self.register_buffer("pos", _sinusoid(length, d_model),
                                 persistent=False)
            self.register_buffer(
                "tgt_mask",
                nn.Transformer.generate_square_subsequent_mask(length),
                persistent=False)
            self.transformer = nn.Transformer(
                d_model=d_model, nhead=8, num_encoder_layers=6,
                num_decoder_layers=6, dim_feedforward=2048,
                batch_first=True)
            self.generator = nn.Linear(d_model, vocab)
            self.scale = math.sqrt(d_model)

        def forward(self, src, tgt):
            s = self.src_embed(src) * self.scale + self.pos
            t = self.tgt_embed(tgt) * self.scale + self.pos
            h = self.transformer(s, t, tgt_mask=self.tgt_mask)
            return self.generator(h)

    net = Seq2SeqTransformer().to(dev).train()
    return _seq2seq_step(net, vocab, batch, length, dev, amp, lr=1e-4)


def _gnmt_step(model: str, batch: int, dev, amp):
    """GNMT-like LSTM seq2seq on random token ids, Adam."""
    import torch
    import torch.nn as nn

    vocab, hidden, length = 32000, 1024, 50

    class GNMT(nn.Module):
        """GNMT-like: bidirectional first encoder layer, residuals from
        the third layer on, attention after the first decoder layer whose
        context feeds the later decoder layers (as in MLPerf's GNMT),
        but with plain dot-product attention."""

        def __init__(self):
            super().__init__()
            self.src_embed = nn.Embedding(vocab, hidden)
            self.tgt_embed = nn.Embedding(vocab, hidden)
            self.enc = nn.ModuleList([
                nn.LSTM(hidden, hidden, batch_first=True,
                        bidirectional=True),
                nn.LSTM(2 * hidden, hidden, batch_first=True),
                nn.LSTM(hidden, hidden, batch_first=True),
                nn.LSTM(hidden, hidden, batch_first=True),
            ])
            self.dec = nn.ModuleList([
                nn.LSTM(hidden, hidden, batch_first=True),
                nn.LSTM(2 * hidden, hidden, batch_first=True),
                nn.LSTM(2 * hidden, hidden, batch_first=True),
                nn.LSTM(2 * hidden, hidden, batch_first=True),
            ])
            self.classifier = nn.Linear(hidden, vocab)

        def forward(self, src, tgt):
            x, _ = self.enc[0](self.src_embed(src))
            x, _ = self.enc[1](x)
            for layer in self.enc[2:]:
                y, _ = layer(x)
                x = x + y
            enc = x
            q, _ = self.dec[0](self.tgt_embed(tgt))
            scores = torch.bmm(q, enc.transpose(1, 2))
            ctx = torch.bmm(torch.softmax(scores, dim=-1), enc)
            x, _ = self.dec[1](torch.cat([q, ctx], dim=-1))
            for layer in self.dec[2:]:
                y, _ = layer(torch.cat([x, ctx], dim=-1))
                x = x + y
            return self.classifier(x)

    net = GNMT().to(dev).train()
    return _seq2seq_step(net, vocab, batch, length, dev, amp, lr=1e-3)


def _dcgan_step(model: str, batch: int, dev, amp):
    """DCGAN: one discriminator and one generator update, Adam."""
    import torch
    import torch.nn as nn

    nz, ngf, ndf, nc = 100, 64, 64, 3
    gen = nn.Sequential(
        nn.ConvTranspose2d(nz, ngf * 8, 4, 1, 0, bias=False),
        nn.BatchNorm2d(ngf * 8), nn.ReLU(True),
        nn.ConvTranspose2d(ngf * 8, ngf * 4, 4, 2, 1, bias=False),
        nn.BatchNorm2d(ngf * 4), nn.ReLU(True),
        nn.ConvTranspose2d(ngf * 4, ngf * 2, 4, 2, 1, bias=False),
        nn.BatchNorm2d(ngf * 2), nn.ReLU(True),
        nn.ConvTranspose2d(ngf * 2, ngf, 4, 2, 1, bias=False),
        nn.BatchNorm2d(ngf), nn.ReLU(True),
        nn.ConvTranspose2d(ngf, nc, 4, 2, 1, bias=False),
        nn.Tanh()).to(dev).train()
    # The final Sigmoid is folded into BCEWithLogitsLoss: same function,
    # and plain BCELoss is refused under autocast.
    disc = nn.Sequential(
        nn.Conv2d(nc, ndf, 4, 2, 1, bias=False),
        nn.LeakyReLU(0.2, inplace=True),
        nn.Conv2d(ndf, ndf * 2, 4, 2, 1, bias=False),
        nn.BatchNorm2d(ndf * 2), nn.LeakyReLU(0.2, inplace=True),
        nn.Conv2d(ndf * 2, ndf * 4, 4, 2, 1, bias=False),
        nn.BatchNorm2d(ndf * 4), nn.LeakyReLU(0.2, inplace=True),
        nn.Conv2d(ndf * 4, ndf * 8, 4, 2, 1, bias=False),
        nn.BatchNorm2d(ndf * 8), nn.LeakyReLU(0.2, inplace=True),
        nn.Conv2d(ndf * 8, 1, 4, 1, 0, bias=False)).to(dev).train()
    real = torch.randn(batch, nc, 64, 64, device=dev)
    ones = torch.ones(batch, device=dev)
    zeros = torch.zeros(batch, device=dev)
    opt_d = torch.optim.Adam(disc.parameters(), lr=2e-4, betas=(0.5, 0.999))
    opt_g = torch.optim.Adam(gen.parameters(), lr=2e-4, betas=(0.5, 0.999))
    crit = nn.BCEWithLogitsLoss()

    def step():
        # Discriminator on real, then on fake.
        opt_d.zero_grad(set_to_none=True)
        with amp():
            err_real = crit(disc(real).view(-1), ones)
        amp.backward(err_real)
        noise = torch.randn(batch, nz, 1, 1, device=dev)
        with amp():
            fake = gen(noise)
            err_fake = crit(disc(fake.detach()).view(-1), zeros)
        amp.backward(err_fake)
        amp.step(opt_d)
        # Generator.
        opt_g.zero_grad(set_to_none=True)
        with amp():
            err_g = crit(disc(fake).view(-1), ones)
        amp.backward(err_g)
        amp.step(opt_g)
    return step


def _gpt2_step(model: str, batch: int, dev, amp):
    """GPT-2 small language modelling on random token ids, AdamW."""
    import torch

    # GPT-2 small (124M) from its config: random weights, no download.
    from transformers import GPT2Config, GPT2LMHeadModel
    config = GPT2Config(n_positions=1024)  # attention: torch SDPA (the default)
    net = GPT2LMHeadModel(config).to(dev).train()
    ids = torch.randint(0, config.vocab_size, (batch, 256), device=dev)
    opt = torch.optim.AdamW(net.parameters(), lr=1e-4)

    def step():
        opt.zero_grad(set_to_none=True)
        with amp():
            loss = net(input_ids=ids, labels=ids).loss
        amp.backward(loss)
        amp.step(opt)
    return step


def _vit_step(model: str, batch: int, dev, amp):
    """ViT-B/16 on random images, AdamW."""
    import torch
    import torch.nn as nn
    import torchvision

    net = torchvision.models.vit_b_16(weights=None).to(dev).train()
    x = torch.randn(batch, 3, 224, 224, device=dev)
    y = torch.randint(0, 1000, (batch,), device=dev)
    opt = torch.optim.AdamW(net.parameters(), lr=1e-4)
    crit = nn.CrossEntropyLoss()

    def step():
        opt.zero_grad(set_to_none=True)
        with amp():
            loss = crit(net(x), y)
        amp.backward(loss)
        amp.step(opt)
    return step


_STEP_BUILDERS = {
    "resnet50": _vision_step,
    "inception_v3": _vision_step,
    "transformer": _transformer_step,
    "gnmt": _gnmt_step,
    "dcgan": _dcgan_step,
    "gpt2": _gpt2_step,
    "vit": _vit_step,
}


class Precision:
    """How a case runs its arithmetic: `amp()` is the forward's autocast
    context; `backward` and `step` go through a gradient scaler in fp16,
    as fp16 mixed-precision training does. The matmul precision is set for
    the whole case (backward passes run outside autocast): PyTorch's default
    (full fp32) except in tf32, which lets matmuls use TF32; cuDNN keeps its
    default (convolutions in TF32) in every case."""

    def __init__(self, precision: str, dev):
        import torch
        if precision not in PRECISIONS + EXTRA_PRECISIONS:
            raise ValueError(f"unknown precision {precision!r}")
        self._torch = torch
        self._dev = dev
        self._dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)
        torch.set_float32_matmul_precision("high" if precision == "tf32" else "highest")
        self._scaler = (torch.amp.GradScaler(dev.type) if precision == "fp16"
                        else None)

    def __call__(self):
        if self._dtype is None:
            return contextlib.nullcontext()
        return self._torch.autocast(self._dev.type, dtype=self._dtype)

    def backward(self, loss) -> None:
        (loss if self._scaler is None else self._scaler.scale(loss)).backward()

    def step(self, opt) -> None:
        if self._scaler is None:
            opt.step()
            return
        self._scaler.step(opt)
        self._scaler.update()


def build_step(model: str, batch: int, precision: str, device: str = "cuda"):
    """Returns a closure doing one training iteration of the case (the
    model, its inputs and optimizer are built by the model's _*_step)."""
    import torch
    import torchvision  # noqa: F401  (as before: a case without it fails here)

    dev = torch.device(device)
    torch.manual_seed(0)
    builder = _STEP_BUILDERS.get(model)
    if builder is None:
        raise ValueError(f"unknown model {model!r}")
    return builder(model, batch, dev, Precision(precision, dev))


def environment(gpu: str) -> dict:
    import torch
    import torchvision
    env = {
        "gpu_tag": gpu,
        "device_name": torch.cuda.get_device_name(0),
        "captured_at_utc": utc_now(),
        "hostname": socket.gethostname(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torchvision": torchvision.__version__,
        "torch_cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version(),
    }
    for key, fn in (
            ("allow_tf32_matmul", lambda: torch.backends.cuda.matmul.allow_tf32),
            ("allow_tf32_cudnn", lambda: torch.backends.cudnn.allow_tf32),
            ("cudnn_benchmark", lambda: torch.backends.cudnn.benchmark),
            ("cudnn_deterministic", lambda: torch.backends.cudnn.deterministic),
            ("float32_matmul_precision", torch.get_float32_matmul_precision),
            ("matmul_fp32_precision",
             lambda: torch.backends.cuda.matmul.fp32_precision),
            ("cudnn_conv_fp32_precision",
             lambda: torch.backends.cudnn.conv.fp32_precision)):
        try:
            env[key] = fn()
        except Exception as exc:  # record, don't guess
            env[key] = f"unavailable: {exc}"
    env["nvidia_smi"] = nvidia_smi()
    return env


def nvidia_smi() -> dict:
    fields = ["name", "driver_version", "pstate", "clocks.sm", "clocks.mem",
              "clocks.max.sm", "clocks.max.mem", "power.limit",
              "temperature.gpu", "memory.total"]
    try:
        out = subprocess.run(
            ["nvidia-smi", f"--query-gpu={','.join(fields)}",
             "--format=csv,noheader"],
            capture_output=True, text=True, timeout=30, check=True).stdout
        values = [v.strip() for v in out.strip().splitlines()[0].split(",")]
        return dict(zip(fields, values))
    except Exception as exc:
        return {"error": str(exc)}


def time_iterations(step, reps: int):
    """(wall ns from CUDA events, host ns) of each of `reps` iterations, each
    synchronised before the next starts."""
    import torch
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    host_ns = []
    for i in range(reps):
        h0 = time.perf_counter_ns()
        starts[i].record()
        step()
        ends[i].record()
        ends[i].synchronize()
        host_ns.append(time.perf_counter_ns() - h0)
    wall = [int(round(s.elapsed_time(e) * 1e6)) for s, e in zip(starts, ends)]
    return wall, host_ns


def run_case(model, batch, precision, gpu, out_dir: Path, scratch: Path,
             warmup=WARMUP_ITERS, reps=REPETITIONS) -> dict:
    import torch
    from torch.profiler import ProfilerActivity, profile, schedule

    name = case_name(model, batch, precision)
    result = {"case": name, "model": model, "batch_size": batch,
              "precision": precision}
    t0 = time.time()
    step = build_step(model, batch, precision)
    torch.cuda.reset_peak_memory_stats()
    for _ in range(warmup):
        step()
    torch.cuda.synchronize()

    wall, host_ns = time_iterations(step, reps)
    result.update({
        "repetitions": reps,
        "warmup_iterations": warmup,
        "wall_ns_median": percentile_int(wall, 50),
        "wall_ns_p10": percentile_int(wall, 10),
        "wall_ns_p90": percentile_int(wall, 90),
        "wall_ns_samples": wall,
        "host_clock_ns_median": percentile_int(host_ns, 50),
        "peak_memory_allocated_bytes": torch.cuda.max_memory_allocated(),
    })

    raw_path = scratch / f"{name}.raw.json"
    if raw_path.exists():
        raw_path.unlink()
    sched = schedule(wait=PROFILER_WAIT, warmup=PROFILER_WARMUP,
                     active=PROFILER_ACTIVE, repeat=1)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
                 schedule=sched, record_shapes=True, with_stack=False,
                 profile_memory=False,
                 on_trace_ready=lambda p: p.export_chrome_trace(str(raw_path))
                 ) as prof:
        for _ in range(PROFILER_WAIT + PROFILER_WARMUP + PROFILER_ACTIVE):
            step()
            # Inside the step, like the timed loop, so each ProfilerStep
            # range holds all of that iteration's GPU work.
            torch.cuda.synchronize()
            prof.step()
    if not raw_path.exists():
        raise RuntimeError(f"profiler wrote no trace to {raw_path}")

    fixture = out_dir / "kineto" / gpu / f"{name}.json.gz"
    raw_keep = (out_dir / "raw" / f"{name}.raw.json.gz"
                if name in RAW_KEEP else None)
    result.update(process_trace(raw_path, fixture, raw_keep))
    raw_path.unlink()
    result["trace_file"] = f"tests/testdata/kineto/{gpu}/{name}.json.gz"
    result["host_share"] = round(
        1.0 - result["gpu_busy_ns_median"] / result["wall_ns_median"], 4)
    result["seconds_taken"] = round(time.time() - t0, 1)
    result["status"] = "ok"
    return result


def _free_cuda():
    import torch
    gc.collect()
    torch.cuda.empty_cache()


def cmd_run(args) -> int:
    out_dir = Path(args.out)
    scratch = Path(args.scratch)
    scratch.mkdir(parents=True, exist_ok=True)
    cases_dir = out_dir / "cases"
    cases_dir.mkdir(parents=True, exist_ok=True)
    try:
        env = environment(args.gpu)
    except Exception as exc:  # the cases will fail and say why
        env = {"error": f"{type(exc).__name__}: {exc}"}
    models = args.models.split(",")
    only = set(args.cases.split(",")) if args.cases else None
    failures = 0
    for model, batch, precision in all_cases(models):
        name = case_name(model, batch, precision)
        if only is not None and name not in only:
            continue
        left = args.deadline - time.time()
        if left < MIN_CASE_S:
            result = {"case": name, "model": model, "batch_size": batch,
                      "precision": precision, "status": "skipped",
                      "error": f"time budget exhausted ({left:.0f}s left)"}
            log(f"SKIP {name}: {result['error']}")
        else:
            log(f"start {name}")
            try:
                result = run_case(model, batch, precision, args.gpu, out_dir,
                                  scratch)
                log(f"ok   {name}: wall {result['wall_ns_median']/1e6:.2f} ms "
                    f"busy {result['gpu_busy_ns_median']/1e6:.2f} ms "
                    f"kernels {result['kept_step_kernel_count']} "
                    f"fixture {result['fixture_bytes']/1e3:.0f} kB "
                    f"({result['seconds_taken']} s)")
            except Exception as exc:
                failures += 1
                result = {"case": name, "model": model, "batch_size": batch,
                          "precision": precision, "status": "failed",
                          "error": f"{type(exc).__name__}: {exc}",
                          "traceback": traceback.format_exc()}
                log(f"FAIL {name}: {result['error']}")
                print(result["traceback"], flush=True)
        result["environment"] = env
        with open(cases_dir / f"{name}.json", "w") as f:
            json.dump(result, f, indent=1)
        _free_cuda()
    return 1 if failures else 0


def cmd_smoke(args) -> int:
    out_dir = Path(args.out)
    scratch = out_dir / "scratch"
    scratch.mkdir(parents=True, exist_ok=True)
    try:
        r = run_case("dcgan", 16, "fp32", "smoke", out_dir, scratch,
                     warmup=2, reps=3)
    except Exception:
        log("SMOKE FAILED")
        traceback.print_exc()
        return 1
    ok = (r["kept_step_kernel_count"] > 0 and r["gpu_busy_ns_median"] > 0
          and r["wall_ns_median"] >= r["gpu_busy_ns_median"])
    summary = {k: v for k, v in r.items() if k != "wall_ns_samples"}
    print(json.dumps(summary, indent=1), flush=True)
    log("SMOKE OK" if ok else "SMOKE SUSPICIOUS (see numbers above)")
    return 0 if ok else 1


def cmd_devprops(args) -> int:
    import torch
    props = torch.cuda.get_device_properties(0)
    torch_props = {}
    for key in dir(props):
        if key.startswith("_"):
            continue
        value = getattr(props, key)
        if callable(value):
            continue
        if not isinstance(value, (int, float, str, bool)) and value is not None:
            value = str(value)
        torch_props[key] = value
    doc = {
        "gpu_tag": args.gpu,
        "captured_at_utc": utc_now(),
        "torch": torch.__version__,
        "torch_cuda": torch.version.cuda,
        "torch_device_properties": torch_props,
        "nvidia_smi": nvidia_smi(),
    }
    try:
        with open(args.cuda_json) as f:
            doc["cuda_device_attributes"] = json.load(f)
    except Exception as exc:
        doc["cuda_device_attributes"] = {"error": f"{type(exc).__name__}: {exc}"}
    path = Path(args.out) / "device_properties" / f"{args.gpu}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    print(json.dumps(doc, indent=1), flush=True)
    return 0


def cmd_merge(args) -> int:
    out_dir = Path(args.out)
    cases = []
    missing = []
    env = None
    # Every model with batch sizes, so runs of a subset (--models) merge too;
    # cases never run are listed as "not run".
    for model, batch, precision in all_cases(tuple(BATCHES)):
        name = case_name(model, batch, precision)
        path = out_dir / "cases" / f"{name}.json"
        if not path.exists():
            missing.append({"case": name, "status": "not run"})
            continue
        with open(path) as f:
            r = json.load(f)
        case_env = r.pop("environment", None)
        r.pop("traceback", None)
        if r.get("status") == "ok":
            env = env or case_env
            cases.append(r)
        else:
            missing.append({"case": name, "status": r.get("status"),
                            "error": r.get("error")})
    doc = {
        "gpu_tag": args.gpu,
        "capture_script": "eval/capture/capture_fixtures.py",
        "protocol": {
            "iteration": "zero_grad, forward, loss, backward, optimizer step",
            "warmup_iterations": WARMUP_ITERS,
            "repetitions": REPETITIONS,
            "wall_time": "CUDA events around each iteration, synchronized "
                         "after it; median and linear-interpolated p10/p90",
            "profiler": {"wait": PROFILER_WAIT, "warmup": PROFILER_WARMUP,
                         "active": PROFILER_ACTIVE, "record_shapes": True,
                         "with_stack": False, "profile_memory": False,
                         "synchronize_inside_each_step": True},
            "gpu_busy": "union of kernel, memcpy and memset intervals whose "
                        "correlation id belongs to a cuda_runtime/cuda_driver "
                        "event inside the ProfilerStep's CPU range",
            "kept_step": "the active step with the median GPU-busy time",
            "host_share": "1 - gpu_busy_ns_median / wall_ns_median",
        },
        "environment": env,
        "cases": cases,
        "missing": missing,
    }
    path = out_dir / "measurements" / f"{args.gpu}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    print(f"{'case':28s} {'wall ms':>9s} {'p10':>8s} {'p90':>8s} "
          f"{'busy ms':>9s} {'host%':>6s} {'kern':>5s} {'kB':>6s}")
    for r in cases:
        print(f"{r['case']:28s} {r['wall_ns_median']/1e6:9.3f} "
              f"{r['wall_ns_p10']/1e6:8.3f} {r['wall_ns_p90']/1e6:8.3f} "
              f"{r['gpu_busy_ns_median']/1e6:9.3f} "
              f"{100*r['host_share']:6.1f} {r['kept_step_kernel_count']:5d} "
              f"{r['fixture_bytes']/1e3:6.0f}")
    for m in missing:
        print(f"MISSING {m}")
    return 0 if not missing else 1


def _write_skipped(out_dir: Path, model, batch, precision, left) -> None:
    name = case_name(model, batch, precision)
    (out_dir / "cases").mkdir(parents=True, exist_ok=True)
    with open(out_dir / "cases" / f"{name}.json", "w") as f:
        json.dump({"case": name, "model": model, "batch_size": batch,
                   "precision": precision, "status": "skipped",
                   "error": f"time budget exhausted ({left:.0f}s left)"}, f,
                  indent=1)


def cmd_all(args) -> int:
    deadline = time.time() + args.budget_s
    models = args.models.split(",") if args.models else list(MODELS)
    rc = 0
    for model in models:
        left = deadline - time.time()
        if left < MIN_CASE_S:
            log(f"no time left for {model}; its cases are marked skipped")
            only = set(args.cases.split(",")) if args.cases else None
            for m, batch, precision in all_cases([model]):
                name = case_name(m, batch, precision)
                if only is None or name in only:
                    _write_skipped(Path(args.out), m, batch, precision, left)
            rc = 1
            continue
        cmd = [sys.executable, os.path.abspath(__file__), "run",
               "--gpu", args.gpu, "--out", args.out, "--scratch", args.scratch,
               "--models", model, "--deadline", str(deadline)]
        if args.cases:
            cmd += ["--cases", args.cases]
        # One process per model: a sticky CUDA error costs one model only.
        try:
            proc = subprocess.run(cmd, timeout=max(left, 1) + 30)
            rc |= proc.returncode != 0
        except subprocess.TimeoutExpired:
            log(f"model {model} ran past the budget and was stopped")
            rc = 1
    merge_rc = cmd_merge(args)
    return rc or merge_rc


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawTextHelpFormatter)
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("all")
    p.add_argument("--gpu", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--scratch", default="/tmp/habitat_capture_scratch")
    p.add_argument("--budget-s", type=float, default=380)
    p.add_argument("--models", default="")
    p.add_argument("--cases", default="")
    p = sub.add_parser("run")
    p.add_argument("--gpu", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--scratch", default="/tmp/habitat_capture_scratch")
    p.add_argument("--models", default=",".join(MODELS))
    p.add_argument("--cases", default="")
    p.add_argument("--deadline", type=float, default=float("inf"))
    p = sub.add_parser("smoke")
    p.add_argument("--out", required=True)
    p = sub.add_parser("devprops")
    p.add_argument("--gpu", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--cuda-json", required=True)
    p = sub.add_parser("merge")
    p.add_argument("--gpu", required=True)
    p.add_argument("--out", required=True)
    args = parser.parse_args()
    return {"all": cmd_all, "run": cmd_run, "smoke": cmd_smoke,
            "devprops": cmd_devprops, "merge": cmd_merge}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
