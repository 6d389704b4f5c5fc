#!/usr/bin/env python3
"""How kernels scale with the number of SMs at fixed memory bandwidth.

Runs timm models' AMP inference step (fp16 autocast, NCHW, no_grad,
cudnn.benchmark) on one GPU, first on all of its SMs, then inside CUDA green
contexts that give the step only N SMs (torch.cuda.green_contexts; nothing
about the GPU is changed: the context only limits where its kernels run).
The memory system, clocks and software are the same in every run, so each
kernel's time against N says how much of it is bound by the SMs (latency,
occupancy, issue) and how much by DRAM, which wave scaling's compute and
memory terms assume (core/scaling/wave_scaling.cc).

Per model and SM count: the step's GPU time (CUDA events on the step's
stream, median of TIMED) and each kernel name's mean time per step from
torch.profiler over PROFILED steps. cudnn.benchmark picks its algorithms in
the first (all-SM) run, so the same kernels run in every run.

    python3 sm_scaling.py OUT.json [--models m1:batch,m2:batch] [--sms 96,80,64,40,24]
"""

from __future__ import annotations

import argparse
import json
import time

from capture_timm import event_times_ns, log

WARMUP = 5
TIMED = 10
PROFILED = 3
DEFAULT_MODELS = ("mobilenetv2_100:256,tf_efficientnet_b0:256,resnet50d:256,vgg11:128,"
                  "vit_tiny_patch16_224:256,mixer_s16_224:256,convnext_small:128")


class SmLimit:
    """A stream whose kernels run on `sms` SMs (None: the whole GPU)."""

    def __init__(self, sms):
        import torch
        self.sms = sms
        self.ctx = None
        if sms is None:
            self.stream = torch.cuda.Stream()
            return
        from torch.cuda.green_contexts import GreenContext
        try:
            self.ctx = GreenContext.create(num_sms=sms, device_id=0)
        except TypeError:
            self.ctx = GreenContext.create(sms, 0)
        if hasattr(self.ctx, "Stream"):
            self.stream = self.ctx.Stream()
        else:  # older API: the green context is made current around the work
            self.ctx.set_context()
            self.stream = torch.cuda.Stream()
            self.ctx.pop_context()

    def __enter__(self):
        import torch
        if self.ctx is not None and not hasattr(self.ctx, "Stream"):
            self.ctx.set_context()
        self._guard = torch.cuda.stream(self.stream)
        self._guard.__enter__()
        return self

    def __exit__(self, *exc):
        self._guard.__exit__(*exc)
        if self.ctx is not None and not hasattr(self.ctx, "Stream"):
            self.ctx.pop_context()


def measure(step, limit: SmLimit) -> dict:
    import torch
    from torch.profiler import ProfilerActivity, profile
    with limit:
        for _ in range(WARMUP):
            step()
        times = event_times_ns(step, TIMED)  # sorted
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(PROFILED):
                step()
            torch.cuda.synchronize()
    kernels = {}
    for e in prof.events():
        if str(e.device_type).endswith("CUDA") and e.device_time_total > 0:
            k = kernels.setdefault(e.name, [0.0, 0])
            k[0] += e.device_time_total * 1e3 / PROFILED  # us -> ns per step
            k[1] += 1
    return {"step_ns_median": times[len(times) // 2], "step_ns": times,
            "kernels": {n: {"ns": v[0], "launches": v[1] / PROFILED} for n, v in kernels.items()}}


def run_model(name: str, batch: int, sms_list: list) -> dict:
    import timm
    import torch
    torch.backends.cudnn.benchmark = True
    model = timm.create_model(name, pretrained=False).cuda().eval()
    size = model.pretrained_cfg.get("input_size", (3, 224, 224))
    x = torch.randn(batch, *size, device="cuda")

    def step():
        with torch.no_grad(), torch.autocast("cuda", dtype=torch.float16):
            model(x)

    out = {"model": name, "batch": batch, "input_size": list(size), "runs": []}
    for sms in [None] + sms_list:
        try:
            r = measure(step, SmLimit(sms))
            r["sms"] = sms
            out["runs"].append(r)
            log(f"{name} b{batch} sms={sms}: {r['step_ns_median'] / 1e6:.2f} ms")
        except Exception as e:  # noqa: BLE001 - recorded, the next runs go on
            out["runs"].append({"sms": sms, "error": f"{type(e).__name__}: {e}"})
            log(f"{name} sms={sms}: {type(e).__name__}: {e}")
    del model, x
    torch.cuda.empty_cache()
    return out


def main() -> None:
    import torch
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--models", default=DEFAULT_MODELS)
    ap.add_argument("--sms", default="96,80,64,40,24")
    ap.add_argument("--budget-s", type=float, default=480)
    args = ap.parse_args()
    began = time.time()
    props = torch.cuda.get_device_properties(0)
    result = {"device": props.name, "sm_count": props.multi_processor_count,
              "torch": torch.__version__, "cudnn": torch.backends.cudnn.version(),
              "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
              "warmup": WARMUP, "timed": TIMED, "profiled": PROFILED, "models": []}
    sms_list = [int(s) for s in args.sms.split(",") if s]
    for item in args.models.split(","):
        if time.time() - began > args.budget_s:
            log(f"budget spent; {item} skipped")
            continue
        name, batch = item.split(":")
        result["models"].append(run_model(name, int(batch), sms_list))
        with open(args.out, "w") as f:
            json.dump(result, f)
    log("done")


if __name__ == "__main__":
    main()
