#!/usr/bin/env python3
"""Checks on a GPU which profiler metrics the counter collector can use and
what they count: lists the device's base counter metrics for DRAM bytes,
FP instructions and tensor-core work, then profiles one matmul of known size
per precision and prints each metric next to 2*M*N*K.

    python tests/gpu/counter_probe.py [--out DIR]

Needs the extension built with CUPTI (agent/python) and profiling
permission. Writes DIR/counter_probe.json when --out is given.
"""

import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "agent", "python"))

import torch  # noqa: E402

from habitat_agent import _C  # noqa: E402

PATTERNS = ("dram__bytes", "sass_thread_inst_executed_op", "tensor")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out")
    parser.add_argument("--size", type=int, default=2048)
    args = parser.parse_args()
    dev = torch.device("cuda")
    torch.ones(1, device=dev).sum().item()  # a context for the profiler
    result = {"device": torch.cuda.get_device_name(0), "metrics": {}, "cases": []}
    for p in PATTERNS:
        names = sorted(_C.profiler_base_metrics(p))
        result["metrics"][p] = names
        print(f"== base counter metrics containing {p!r}: {len(names)}")
        for n in names:
            print(f"   {n}")
    tensor = [n + ".sum" for n in result["metrics"]["tensor"]
              if n.startswith(("sm__ops_path_tensor", "sm__inst_executed_pipe_tensor"))
              and "sparsity" not in n]
    fp = [n + ".sum" for n in result["metrics"]["sass_thread_inst_executed_op"]
          if n.startswith("sm__sass_thread_inst_executed_op_") and n.endswith("_pred_on")
          and any(k in n for k in ("add", "mul", "fma"))]
    metrics = ["dram__bytes_read.sum", "dram__bytes_write.sum"] + fp + tensor
    n = args.size
    for dtype, tf32 in ((torch.float32, False), (torch.float32, True),
                        (torch.float16, False), (torch.bfloat16, False)):
        torch.backends.cuda.matmul.allow_tf32 = tf32
        a = torch.randn(n, n, device=dev, dtype=dtype)
        b = torch.randn(n, n, device=dev, dtype=dtype)
        c = a @ b
        torch.cuda.synchronize()

        def step():
            torch.mm(a, b, out=c)
            torch.cuda.synchronize()

        t0 = time.perf_counter()
        names, ranges, passes, dropped = _C.collect_metrics(step, metrics, 64)
        seconds = time.perf_counter() - t0
        flops = 2 * n ** 3
        label = f"{dtype} tf32={tf32}"
        print(f"== {label}: {n}^3 matmul, 2MNK = {flops:.4g}; {len(ranges)} ranges, "
              f"{passes} passes, {dropped} dropped, {seconds:.2f} s")
        case = {"case": label, "n": n, "flops": flops, "passes": passes,
                "seconds": seconds, "ranges": []}
        for name, values in ranges:
            print(f"   range {name[:150]}")
            nonzero = {m: v for m, v in zip(names, values) if v}
            for m, v in nonzero.items():
                print(f"      {m:70s} {v:16.6g}  ({v / flops:.4f} x 2MNK)")
            case["ranges"].append({"name": name, "values": nonzero})
        result["cases"].append(case)
    torch.backends.cuda.matmul.allow_tf32 = False
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "counter_probe.json"), "w") as f:
            json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
