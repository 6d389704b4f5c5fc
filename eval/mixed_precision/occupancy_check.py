#!/usr/bin/env python3
"""How much a kernel slows down when an SM holds fewer threads.

A Hopper SM holds 2048 threads; the SMs of the RTX 3090, RTX 4090 and RTX
5090 hold 1536. Wave scaling counts a target wave with the target's own
blocks per SM (core/scaling/wave_scaling.cc), so a 128-thread block that
fits 16 times on a Hopper SM and 12 times on a GA102 SM makes the target's
waves 1.33x as many per SM, a 1024-thread block (2 against 1) 2x. Whether
the kernel's time follows is what this measures, on the one GPU lent: the
same H200, same SMs, same memory, same software, with a "holder" kernel
that keeps T threads of every SM busy doing nothing (one block of T threads
per SM, parked at a barrier; one thread of one block polls a flag in
host memory every 5 us and passes it on through device memory, which one
thread of each other block polls), so the kernels under test find 2048 - T
thread slots per SM. The holder also takes T x its registers (a few
thousand of the 65536); the kernels timed here need few. Its blocks record the SM they run on, and each
run says how many SMs they held. (A first version had every block poll the
host flag and took 120 KB of shared memory per block to keep them one to
an SM: every kernel beside it ran 4-40x slower, whatever T. A second set
the device flag with a kernel, which could not start behind a kernel
waiting for the holder's SMs.)

Per operation (fp16 where the models run fp16 under autocast), the time of
each kernel (CUDA events around the op on its own stream, median of TIMED
after WARMUP) with T = 0, 512 (1536 free: the consumer SMs) and 1024; the
kernels' launch configurations from one profiled run; the bytes the op must
move at least.

    python3 occupancy_check.py run OUT.json [--holds 512,1024]    (on the GPU)
    python3 occupancy_check.py report RESULTS.json [--md OUT.md]  (anywhere)

`report` sets each measured slowdown beside wave scaling's
(core/scaling/wave_scaling.cc: waves^(1 - gamma), gamma the share of the
time streaming the op's bytes takes at the GPU's streaming bandwidth, the
waves counted with the blocks per SM the free threads and registers allow;
the GPU's figures from data/devices.textproto)
and beside an occupancy-neutral wave (no slowdown). Runs whose holder had to
be released by the watchdog (a kernel that could not be resident beside it)
and runs with an error are left out.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import subprocess
import tempfile
import sys
import threading
import time
from pathlib import Path

from capture_timm import event_times_ns, log

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "models"))
from habitat_models.features import load_devices, streaming_gbps  # noqa: E402

WARMUP = 3
TIMED = 15
WATCHDOG_S = 5.0
# The holder asks for the largest shared-memory carveout (percent) and a
# little dynamic shared memory, so that the SMs it holds keep room for the
# shared memory of the kernels beside it (an SM cannot change its carveout
# while a block runs). 0: the driver's choice, as in the first two runs.
HOLD_CARVEOUT_PERCENT = 100
HOLD_SHARED_BYTES = 1024 if HOLD_CARVEOUT_PERCENT else 0

HOLDER_CU = r"""
extern "C" __global__ void hold(volatile int* host_flag, volatile int* flag, int* smid,
                                volatile int* started) {
  if (threadIdx.x == 0) {
    int s;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(s));
    smid[blockIdx.x] = s;
    __threadfence_system();
    started[blockIdx.x] = 1;
    __threadfence_system();
    if (blockIdx.x == 0) {
      while (*host_flag == 0) __nanosleep(5000);
      *flag = 1;
      __threadfence();
    } else {
      while (*flag == 0) __nanosleep(5000);
    }
  }
  __syncthreads();
}
"""


class Driver:
    """The few CUDA driver calls the holder needs, through ctypes."""

    def __init__(self):
        self.lib = ctypes.CDLL("libcuda.so.1")
        self.lib.cuLaunchKernel.argtypes = [
            ctypes.c_void_p, ctypes.c_uint, ctypes.c_uint, ctypes.c_uint, ctypes.c_uint,
            ctypes.c_uint, ctypes.c_uint, ctypes.c_uint, ctypes.c_void_p,
            ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p]
        self.lib.cuFuncSetAttribute.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int]
        self.lib.cuMemHostAlloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t,
                                            ctypes.c_uint]
        self.lib.cuMemHostGetDevicePointer_v2.argtypes = [ctypes.POINTER(ctypes.c_uint64),
                                                          ctypes.c_void_p, ctypes.c_uint]

    def check(self, rc, what):
        if rc != 0:
            raise RuntimeError(f"{what}: CUresult {rc}")

    def host_mapped(self, count):
        """`count` int32 of pinned, device-mapped host memory: (host, device)."""
        p = ctypes.c_void_p()
        self.check(self.lib.cuMemHostAlloc(ctypes.byref(p), 4 * count, 0x02), "cuMemHostAlloc")
        d = ctypes.c_uint64()
        self.check(self.lib.cuMemHostGetDevicePointer_v2(ctypes.byref(d), p, 0), "host pointer")
        arr = (ctypes.c_int * count).from_address(p.value)
        for i in range(count):
            arr[i] = 0
        return arr, d.value


class Holder:
    """Launches `threads` threads on each of the GPU's SMs and holds them."""

    def __init__(self, drv: Driver, sm_count: int):
        import torch
        self.drv = drv
        self.sms = sm_count
        work = tempfile.mkdtemp()
        src = os.path.join(work, "hold.cu")
        with open(src, "w") as f:
            f.write(HOLDER_CU)
        ptx = os.path.join(work, "hold.ptx")
        subprocess.run(["nvcc", "-ptx", "-arch=sm_90", src, "-o", ptx], check=True)
        torch.cuda.synchronize()  # the primary context is current on this thread
        mod = ctypes.c_void_p()
        image = ctypes.c_char_p(open(ptx, "rb").read() + b"\0")
        drv.check(drv.lib.cuModuleLoadData(ctypes.byref(mod), image), "cuModuleLoadData")
        self.fn = ctypes.c_void_p()
        drv.check(drv.lib.cuModuleGetFunction(ctypes.byref(self.fn), mod, b"hold"),
                  "cuModuleGetFunction")
        if HOLD_CARVEOUT_PERCENT:
            # CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT
            drv.check(drv.lib.cuFuncSetAttribute(self.fn, 9, HOLD_CARVEOUT_PERCENT),
                      "cuFuncSetAttribute")
        self.host_flag, self.host_flag_d = drv.host_mapped(1)
        self.flag = torch.zeros(1, dtype=torch.int32, device="cuda")
        self.smid, self.smid_d = drv.host_mapped(sm_count)
        self.started, self.started_d = drv.host_mapped(sm_count)
        self.stream = torch.cuda.Stream()
        self.released = False

    def start(self, threads: int) -> int:
        """Launches and waits until every block runs; the number of SMs held."""
        import torch
        with torch.cuda.stream(self.stream):
            self.flag.zero_()
        self.host_flag[0] = 0
        self.released = False
        for i in range(self.sms):
            self.started[i] = 0
            self.smid[i] = -1
        args = [ctypes.c_uint64(self.host_flag_d), ctypes.c_uint64(self.flag.data_ptr()),
                ctypes.c_uint64(self.smid_d), ctypes.c_uint64(self.started_d)]
        params = (ctypes.c_void_p * 4)(*[ctypes.addressof(a) for a in args])
        self.drv.check(self.drv.lib.cuLaunchKernel(
            self.fn, self.sms, 1, 1, threads, 1, 1, HOLD_SHARED_BYTES,
            ctypes.c_void_p(self.stream.cuda_stream), params, None), "cuLaunchKernel")
        began = time.time()
        while sum(self.started[i] for i in range(self.sms)) < self.sms:
            if time.time() - began > WATCHDOG_S:
                self.release()
                raise RuntimeError("holder blocks did not all start")
            time.sleep(0.001)
        return len({self.smid[i] for i in range(self.sms)})

    def release(self):
        self.released = True
        self.host_flag[0] = 1
        self.stream.synchronize()


def operations():
    """(name, make) pairs; make() returns (fn, min_bytes) with inputs on the GPU."""
    import torch
    import torch.nn.functional as F
    h = torch.float16
    dev = "cuda"

    def bn(shape, training, channels_last=False):
        def make():
            x = torch.randn(*shape, device=dev, dtype=h)
            if channels_last:
                x = x.contiguous(memory_format=torch.channels_last)
            c = shape[1]
            rm, rv = torch.zeros(c, device=dev), torch.ones(c, device=dev)
            w, b = torch.ones(c, device=dev), torch.zeros(c, device=dev)
            return (lambda: F.batch_norm(x, rm, rv, w, b, training=training),
                    2 * x.numel() * 2)
        return make

    def depthwise(shape, k, stride, channels_last=False):
        def make():
            x = torch.randn(*shape, device=dev, dtype=h)
            if channels_last:
                x = x.contiguous(memory_format=torch.channels_last)
            c = shape[1]
            w = torch.randn(c, 1, k, k, device=dev, dtype=h)
            y = F.conv2d(x, w, stride=stride, padding=k // 2, groups=c)
            return (lambda: F.conv2d(x, w, stride=stride, padding=k // 2, groups=c),
                    (x.numel() + y.numel()) * 2)
        return make

    def unary(shape, fn):
        def make():
            x = torch.randn(*shape, device=dev, dtype=h)
            return (lambda: fn(x), 2 * x.numel() * 2)
        return make

    def add(shape):
        def make():
            x = torch.randn(*shape, device=dev, dtype=h)
            y = torch.randn(*shape, device=dev, dtype=h)
            return (lambda: x + y, 3 * x.numel() * 2)
        return make

    def layer_norm(rows, width):
        def make():
            x = torch.randn(rows, width, device=dev, dtype=h)
            w = torch.ones(width, device=dev, dtype=h)
            b = torch.zeros(width, device=dev, dtype=h)
            return (lambda: F.layer_norm(x, (width,), w, b), 2 * x.numel() * 2)
        return make

    def softmax(shape):
        def make():
            x = torch.randn(*shape, device=dev, dtype=h)
            return (lambda: torch.softmax(x, -1), 2 * x.numel() * 2)
        return make

    def avg_pool(shape):
        def make():
            x = torch.randn(*shape, device=dev, dtype=h)
            return (lambda: F.adaptive_avg_pool2d(x, 1), x.numel() * 2)
        return make

    return [
        ("bn_inference_nchw", bn((256, 96, 112, 112), False)),
        ("bn_inference_nchw_c320", bn((256, 320, 7, 7), False)),
        ("bn_training_nchw", bn((256, 96, 112, 112), True)),
        ("bn_inference_nhwc", bn((256, 96, 112, 112), False, True)),
        ("bn_training_nhwc", bn((256, 96, 112, 112), True, True)),
        ("depthwise3x3_s1_nchw", depthwise((256, 144, 56, 56), 3, 1)),
        ("depthwise3x3_s2_nchw", depthwise((256, 96, 112, 112), 3, 2)),
        ("depthwise5x5_s1_nchw", depthwise((256, 240, 28, 28), 5, 1)),
        ("depthwise7x7_s1_nchw", depthwise((128, 384, 14, 14), 7, 1)),
        ("depthwise3x3_s1_nhwc", depthwise((256, 144, 56, 56), 3, 1, True)),
        ("hardtanh_", unary((256, 96, 112, 112), lambda x: x.clamp_(0, 6))),
        ("relu", unary((256, 96, 112, 112), torch.relu)),
        ("gelu", unary((256 * 197, 1536), F.gelu)),
        ("add", add((256, 96, 112, 112))),
        ("layer_norm_384", layer_norm(256 * 197, 384)),
        ("layer_norm_24", layer_norm(192 * 196 * 16, 24)),
        ("softmax_197", softmax((256, 6, 197, 197))),
        ("avg_pool_7x7", avg_pool((256, 1280, 7, 7))),
    ]


def kernel_configs(fn) -> list:
    """Name, grid, block, registers and shared memory of the kernels fn runs."""
    import torch
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    path = tempfile.mktemp(suffix=".json")
    prof.export_chrome_trace(path)
    with open(path) as f:
        events = json.load(f)["traceEvents"]
    out = []
    for e in events:
        if e.get("cat") == "kernel":
            a = e.get("args", {})
            out.append({"name": e["name"], "dur_us": e.get("dur"), "grid": a.get("grid"),
                        "block": a.get("block"), "registers": a.get("registers per thread"),
                        "shared_memory": a.get("shared memory"),
                        "occupancy_pct": a.get("est. achieved occupancy %")})
    return out


def time_op(fn, stream) -> list:
    import torch
    with torch.cuda.stream(stream):
        for _ in range(WARMUP):
            fn()
        return event_times_ns(fn, TIMED)


def held_run(holder: Holder, hold: int, fn, stream) -> dict:
    """fn's times with `hold` threads of every SM held (0: none). A kernel
    that cannot be resident beside the holder would wait for it forever, so
    a watchdog releases the holder after WATCHDOG_S; such a run is marked."""
    run = {"held_threads_per_sm": hold}
    watchdog = threading.Timer(WATCHDOG_S, holder.release)
    try:
        if hold:
            run["sms_held"] = holder.start(hold)
            watchdog.start()
        times = time_op(fn, stream)
        run["ns"] = times
        run["ns_median"] = times[len(times) // 2]
        if hold and holder.released:
            run["released_by_watchdog"] = True
    except Exception as e:  # noqa: BLE001 - recorded, the next runs go on
        run["error"] = f"{type(e).__name__}: {e}"
    finally:
        watchdog.cancel()
        if hold:
            holder.release()
    return run


# The holder's registers per thread: what ptxas gives its few instructions.
HOLDER_REGISTERS = 16


def blocks_per_sm(threads: int, registers: int, free_threads: int, free_registers: int,
                  free_blocks: int, allocation_unit: int = 256) -> int:
    """Resident blocks by threads, registers (allocated a warp at a time in
    units of `allocation_unit`) and block slots: the limits of
    core/scaling/occupancy.cc these kernels meet (they use little shared
    memory)."""
    warps = -(-threads // 32)
    per_warp = -(-max(registers, 1) * 32 // allocation_unit) * allocation_unit
    return max(0, min(free_blocks, free_threads // (warps * 32),
                      free_registers // (per_warp * warps)))


def measured_gpu(result: dict) -> dict:
    """The entry of data/devices.textproto for the GPU the run names."""
    for device in load_devices(ROOT / "data" / "devices.textproto").values():
        if result["device"] in device["driver_names"]:
            return device
    raise ValueError(f"{result['device']!r} is not a driver name in data/devices.textproto")


def report_rows(result: dict) -> list:
    """One row per valid held run: op, held threads, measured and modelled
    slowdowns."""
    gpu = measured_gpu(result)
    sm_threads, sm_registers = int(gpu["max_threads_per_sm"]), int(gpu["registers_per_sm"])
    sm_blocks, sm_count = int(gpu["max_blocks_per_sm"]), int(gpu["sm_count"])
    unit = int(gpu["register_allocation_unit"])
    rows = []
    for op in result["operations"]:
        runs = {r["held_threads_per_sm"]: r for r in op["runs"]}
        base = runs.get(0, {}).get("ns_median")
        if not base or not op["kernels"]:
            continue
        k = max(op["kernels"], key=lambda k: k["dur_us"] or 0)
        blocks = k["grid"][0] * k["grid"][1] * k["grid"][2]
        threads = k["block"][0] * k["block"][1] * k["block"][2]
        streaming_ns = op["min_bytes"] / streaming_gbps(gpu)
        gamma = min(1.0, streaming_ns / max(base - gpu["kernel_fixed_latency_ns"], 1))
        full = blocks_per_sm(threads, k["registers"], sm_threads, sm_registers, sm_blocks, unit)
        for held, r in sorted(runs.items()):
            if not held or "ns_median" not in r or r.get("released_by_watchdog"):
                continue
            fit = blocks_per_sm(threads, k["registers"], sm_threads - held,
                                sm_registers - held * HOLDER_REGISTERS, sm_blocks - 1, unit)
            waves = -(-blocks // (fit * sm_count)) / -(-blocks // (full * sm_count))
            rows.append({"op": op["op"], "kernel": k["name"], "block": threads,
                         "grid": blocks, "gamma": gamma, "free_threads": sm_threads - held,
                         "measured": r["ns_median"] / base, "waves": waves,
                         "model": waves ** (1 - gamma)})
    return rows


def report(path: str, md: str = "") -> str:
    with open(path) as f:
        rows = report_rows(json.load(f))
    lines = ["| operation | block | gamma | free threads/SM | waves ratio | measured | "
             "wave scaling | occupancy-neutral |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['op']} | {r['block']} | {r['gamma']:.2f} | {r['free_threads']} | "
                     f"{r['waves']:.2f} | {r['measured']:.2f} | {r['model']:.2f} | 1.00 |")

    def mape(predicted):
        return 100 * sum(abs(predicted(r) / r["measured"] - 1) for r in rows) / len(rows)
    lines.append("")
    lines.append(f"{len(rows)} runs: wave scaling {mape(lambda r: r['model']):.1f} % MAPE, "
                 f"occupancy-neutral {mape(lambda r: 1.0):.1f} %.")
    text = "\n".join(lines) + "\n"
    if md:
        with open(md, "w") as f:
            f.write(text)
    return text


def main() -> None:
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("out")
    r.add_argument("--holds", default="512,1024")
    p = sub.add_parser("report")
    p.add_argument("results")
    p.add_argument("--md", default="")
    args = ap.parse_args()
    if args.cmd == "report":
        print(report(args.results, args.md), end="")
        return
    run(args.out, [int(t) for t in args.holds.split(",") if t])


def run(out: str, holds: list) -> None:
    import faulthandler
    import torch
    faulthandler.dump_traceback_later(280, exit=True, file=sys.stderr)
    props = torch.cuda.get_device_properties(0)
    torch.cuda.init()
    torch.zeros(1, device="cuda")
    drv = Driver()
    holder = Holder(drv, props.multi_processor_count)
    stream = torch.cuda.Stream()
    result = {"device": props.name, "sm_count": props.multi_processor_count,
              "max_threads_per_sm": props.max_threads_per_multi_processor,
              "torch": torch.__version__, "cudnn": torch.backends.cudnn.version(),
              "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
              "warmup": WARMUP, "timed": TIMED,
              "holder_carveout_percent": HOLD_CARVEOUT_PERCENT,
              "holder_shared_bytes": HOLD_SHARED_BYTES,
              "operations": []}
    for name, make in operations():
        fn, min_bytes = make()
        rec = {"op": name, "min_bytes": min_bytes, "kernels": kernel_configs(fn), "runs": []}
        for hold in [0] + holds:
            rec["runs"].append(held_run(holder, hold, fn, stream))
        log(name + " " + " ".join(f"{r['held_threads_per_sm']}:{r.get('ns_median', 'err')}"
                                  for r in rec["runs"]))
        result["operations"].append(rec)
        with open(out, "w") as f:
            json.dump(result, f, indent=1)
        del fn
        torch.cuda.empty_cache()
    log("done")


if __name__ == "__main__":
    main()
