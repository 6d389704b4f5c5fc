#!/usr/bin/env python3
"""Captures timm's AMP training step with the agent, for the mixed-precision
benchmark (README.md beside this file).

The step is the one `../shared/data/timm-rtx3090/` timed on an RTX 3090
(timm's benchmark.py, train mode, --amp): cudnn.benchmark on, the model from
timm.create_model in train mode, a random input of the row's batch and image
size (channels_last in the nhwc set), SGD (lr 1e-4, momentum 0.9, nesterov),
zero_grad() outside the step, then under fp16 autocast the forward, a
cross-entropy loss on random targets and backward() (no GradScaler), then
optimizer.step(). Attention runs unfused (TIMM_FUSED_ATTN=0), as timm 0.6 ran
it.

Per model: 8 warm-up steps, 15 steps timed with CUDA events (median, the
origin's own measured step), then one step tracked with
habitat_agent.OperationTracker -> <layout>/<model>.trace.gz with that median as
iteration_wall_ns; a line per model in <out>/<layout>.jsonl.

    python3 capture_timm.py --csv DIR/train-amp-nchw-rtx3090.csv \
        --models resnet34,vgg11 --out OUT [--layout nhwc] [--budget-s 500]

The models run in a child process; one that kills it (a crash, an
out-of-memory abort) loses that model only, and a new child goes on with the
rest. Models left when the budget runs out are recorded as skipped.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
WARMUP = 8
TIMED = 15


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def read_rows(path: str) -> dict:
    with open(path, newline="") as f:
        return {r["model"]: r for r in csv.DictReader(f)}


def event_times_ns(step, count: int, before=None) -> list:
    """`count` runs of `step`, each timed with CUDA events (after `before`,
    untimed), sorted."""
    import torch
    out = []
    for _ in range(count):
        if before is not None:
            before()
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        step()
        end.record()
        end.synchronize()
        out.append(int(start.elapsed_time(end) * 1e6))
    return sorted(out)


def capture_one(name: str, batch: int, img: int, layout: str, out_dir: Path,
                mode: str = "train") -> dict:
    if mode == "infer":
        return capture_infer(name, batch, img, layout, out_dir)
    os.environ["TIMM_FUSED_ATTN"] = "0"
    sys.path.insert(0, str(ROOT / "agent" / "python"))
    import torch
    import timm
    import habitat_agent

    torch.backends.cudnn.benchmark = True
    fmt = torch.channels_last if layout == "nhwc" else torch.contiguous_format
    model = timm.create_model(name, pretrained=False).cuda().train()
    model = model.to(memory_format=fmt)
    classes = getattr(model, "num_classes", 1000) or 1000
    x = torch.randn(batch, 3, img, img, device="cuda").contiguous(memory_format=fmt)
    target = torch.randint(0, classes, (batch,), device="cuda")
    opt = torch.optim.SGD(model.parameters(), lr=1e-4, momentum=0.9, nesterov=True)
    loss_fn = torch.nn.CrossEntropyLoss()

    def step():
        with torch.autocast("cuda", dtype=torch.float16):
            out = model(x)
            if isinstance(out, (tuple, list)):
                out = out[0]
            loss = loss_fn(out, target)
            loss.backward()
        opt.step()

    def zero():
        opt.zero_grad(set_to_none=False)  # timm's benchmark on PyTorch 1.12

    for _ in range(WARMUP):
        zero()
        step()
    torch.cuda.synchronize()
    times = event_times_ns(step, TIMED, before=zero)
    median = times[len(times) // 2]
    zero()
    torch.cuda.synchronize()
    tracker = habitat_agent.OperationTracker(model_name=name, batch_size=batch,
                                       precision="amp_fp16", verbose=False)
    with tracker.track():
        step()
    trace = tracker.get_tracked_trace(iteration_wall_ns=median)
    path = out_dir / layout / f"{name}.trace.gz"
    path.parent.mkdir(parents=True, exist_ok=True)
    trace.save(str(path))
    s = trace.summary
    return {
        "model": name, "layout": layout, "batch_size": batch, "img_size": img,
        "origin_step_ns_median": median, "origin_step_ns_samples": times,
        "gpu_busy_ns_tracked": s["gpu_busy_ns"], "kernels": s["kernels"],
        "operations": s["operations"], "trace_bytes": path.stat().st_size,
        "peak_memory_allocated_bytes": torch.cuda.max_memory_allocated(),
        "device": torch.cuda.get_device_name(0), "torch": torch.__version__,
        "timm": timm.__version__, "cudnn": torch.backends.cudnn.version(),
        "status": "ok",
    }


def capture_infer(name: str, batch: int, img: int, layout: str, out_dir: Path) -> dict:
    """timm's AMP inference step as its benchmark.py of 2024-25 timed it
    (the pt240/pt291 result files): model.eval(), torch.no_grad(), fp16
    autocast, fused attention (timm's default since 0.9); 10 warm-up steps,
    then 40 steps each timed on the host from launch to a synchronize, the
    mean (timm's infer_step_time). The CUDA-event median is kept beside it."""
    sys.path.insert(0, str(ROOT / "agent" / "python"))
    import torch
    import timm
    import habitat_agent

    torch.backends.cudnn.benchmark = True
    fmt = torch.channels_last if layout == "nhwc" else torch.contiguous_format
    model = timm.create_model(name, pretrained=False).cuda().eval()
    model = model.to(memory_format=fmt)
    x = torch.randn(batch, 3, img, img, device="cuda").contiguous(memory_format=fmt)

    def step():
        with torch.no_grad(), torch.autocast("cuda", dtype=torch.float16):
            model(x)

    for _ in range(10):
        step()
    torch.cuda.synchronize()
    host = []
    for _ in range(40):
        t = time.perf_counter()
        step()
        torch.cuda.synchronize()
        host.append(int((time.perf_counter() - t) * 1e9))
    events = event_times_ns(step, TIMED)
    host_mean = sum(host) // len(host)
    tracker = habitat_agent.OperationTracker(model_name=name, batch_size=batch,
                                       precision="amp_fp16", verbose=False)
    with tracker.track():
        step()
    trace = tracker.get_tracked_trace(iteration_wall_ns=host_mean)
    path = out_dir / f"infer_{layout}" / f"{name}.trace.gz"
    path.parent.mkdir(parents=True, exist_ok=True)
    trace.save(str(path))
    s = trace.summary
    return {
        "model": name, "layout": layout, "mode": "infer", "batch_size": batch,
        "img_size": img, "origin_step_ns_host_mean": host_mean,
        "param_count_m": round(sum(p.numel() for p in model.parameters()) / 1e6, 2),
        "origin_step_ns_median": events[len(events) // 2], "origin_step_ns_samples": events,
        "gpu_busy_ns_tracked": s["gpu_busy_ns"], "kernels": s["kernels"],
        "operations": s["operations"], "trace_bytes": path.stat().st_size,
        "device": torch.cuda.get_device_name(0), "torch": torch.__version__,
        "timm": timm.__version__, "cudnn": torch.backends.cudnn.version(),
        "status": "ok",
    }


def cmd_child(args) -> int:
    """Captures each model of --models in turn, printing a RESULT line each."""
    rows = read_rows(args.csv)
    for name in args.models.split(","):
        t = time.time()
        row = rows[name]
        try:
            r = capture_one(name, int(row[f"{args.mode}_batch_size"]),
                            int(row[f"{args.mode}_img_size"]), args.layout, Path(args.out),
                            args.mode)
        except Exception as exc:  # the next model may still run
            r = {"model": name, "status": "failed", "error": f"{type(exc).__name__}: {exc}"}
        r["seconds"] = round(time.time() - t, 1)
        print("RESULT " + json.dumps(r), flush=True)
        import torch
        torch.cuda.empty_cache()
    return 0


def report(r: dict) -> None:
    if r["status"] == "ok":
        log(f"ok   {r['model']} b{r['batch_size']}: step {r['origin_step_ns_median'] / 1e6:.1f} ms, "
            f"busy {r['gpu_busy_ns_tracked'] / 1e6:.1f} ms, {r['kernels']} kernels, "
            f"{r['seconds']} s")
    else:
        log(f"{r['status']} {r['model']}: {r.get('error', '')[-300:]}")


def cmd_all(args) -> int:
    """Runs children over the models until each has a result: a child that
    dies loses the model it was on, and the next child starts after it."""
    rows = read_rows(args.csv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    deadline = time.time() + args.budget_s
    todo = [m for m in args.models.split(",") if m]
    results = []
    for name in [m for m in todo if m not in rows]:
        results.append({"model": name, "status": "not in the csv"})
    todo = [m for m in todo if m in rows]
    while todo:
        left = deadline - time.time()
        if left < 15:
            results += [{"model": m, "status": "skipped", "error": f"{left:.0f} s left"}
                        for m in todo]
            break
        cmd = [sys.executable, __file__, "child", "--csv", args.csv, "--models", ",".join(todo),
               "--layout", args.layout, "--out", args.out, "--mode", args.mode]
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            stdout, stderr = p.communicate(timeout=left)
        except subprocess.TimeoutExpired:
            p.kill()
            stdout, stderr = p.communicate()
        got = [json.loads(x[len("RESULT "):]) for x in stdout.splitlines()
               if x.startswith("RESULT ")]
        for r in got:
            report(r)
        results += got
        todo = todo[len(got):]
        if todo and p.returncode != 0:  # the child died on todo[0]
            r = {"model": todo[0], "status": "failed",
                 "error": f"child exited {p.returncode}: {stderr[-1200:]}"}
            report(r)
            results.append(r)
            todo = todo[1:]
    prefix = "infer_" if args.mode == "infer" else ""
    with open(out / f"{prefix}{args.layout}.jsonl", "a") as f:
        for r in results:
            f.write(json.dumps(r) + "\n")
    log(f"{sum(r['status'] == 'ok' for r in results)} of {len(results)} captured")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawTextHelpFormatter)
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("all")
    p.add_argument("--csv", required=True)
    p.add_argument("--models", required=True, help="comma-separated timm names")
    p.add_argument("--out", required=True)
    p.add_argument("--layout", choices=["nchw", "nhwc"], default="nchw")
    p.add_argument("--budget-s", type=float, default=500)
    p.add_argument("--mode", choices=["train", "infer"], default="train")
    p = sub.add_parser("child")
    p.add_argument("--csv", required=True)
    p.add_argument("--models", required=True)
    p.add_argument("--layout", choices=["nchw", "nhwc"], default="nchw")
    p.add_argument("--out", required=True)
    p.add_argument("--mode", choices=["train", "infer"], default="train")
    args = parser.parse_args()
    return {"all": cmd_all, "child": cmd_child}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
