#!/usr/bin/env python3
"""Measures the NeuSight public operator configurations (linear, bmm, conv)
on the GPU of this machine, with NeuSight's math settings, so that
(H100/H200, older GPU) pairs of the same configuration exist.

Two steps:

  1. HERE (no GPU, no torch), once: the unique configurations of the NeuSight
     CSVs (union over GPUs of the configuration columns only) in one seeded,
     stratified shuffled order, written into the repository so they travel
     to the GPU machine:

       python3 models/collect/collect_neusight.py --extract ../shared/data/neusight
         -> models/data/neusight_configs/configs.csv.gz

  2. On the GPU machine, chained across calls of <= 10 minutes:

       python3 models/collect/collect_neusight.py --out $OUT --budget-s 520
         reads  models/data/neusight_configs/configs.csv.gz and, to resume,
                models/data/neusight_configs/<GPU>.csv.gz (rows already there
                are skipped; --resume-dir changes where it looks)
         writes $OUT/<GPU>.csv.gz (old + new rows, sorted by order),
                $OUT/<GPU>.meta.json, every --checkpoint-s and at the end or
                on SIGTERM/SIGINT; copy them back into the repo between calls.

     --start/--stop restrict the order range; --dry-run does everything but
     CUDA (no torch import; rows get method "dryrun") to test the logic.

Forward pass (the default, what NeuSight measured): fp32 with TF32 off for
cuBLAS and cuDNN, cudnn.benchmark off. Per configuration: one warm-up call,
then (collect_ops.calibrate, a second warm-up and one timed call) back-to-back
eager launches between CUDA events in groups of ~1 ms, median of 5 groups (3
when one launch exceeds ~0.5 ms): eager_ns. Eager launches on the lent
machines are host-bound up to ~130 us per launch for tiny kernels, so when
eager_ns is under --graph-below-us (500 us) the op is re-timed as replays of
a CUDA graph holding K copies of it, K chosen (adaptively, from a first
replay) so that one replay lasts ~200 us, median of 5 groups of ~1 ms,
divided by K: forward_ns, method "graph", graph_copies K. Otherwise
forward_ns = eager_ns, method "eager". The timing and capture helpers are
collect_ops.py's (imported). Every --profile-every-th order (and
--profile-orders) also records the dominant kernel (largest total GPU time
under torch.profiler).

--phase regraph: re-times, as above, the rows of a forward pass made with
the earlier rule (graph only under 30 us, K from the eager time: rows with
an empty graph_copies) whose eager_ns is under --graph-below-us. It only
replaces forward_ns/method/graph_copies; eager_ns stays.

--phase bwd (optional, lower priority): for the orders given, collect_ops.
measure() times fp32 and bf16-autocast forward+backward as CUDA-graph
replays of one copy; it fills backward_ns of the fp32 row (forward_ns stays
the forward-pass number) and adds a precision=bf16 row (method
"graph-fwdbwd"). One-copy graph replays are host-bound for ops under ~10 us
(see host_overhead_probe in the meta file).

Output columns: op,order, the configuration columns (NeuSight's names; 0 where
the op has none), precision, forward_ns, backward_ns (empty unless phase bwd
ran), method (eager | graph | graph-fwdbwd | error:<what>), eager_ns,
graph_copies (K of the graph, empty for eager rows), kernel (empty except on
profiled rows).
"""
import argparse
import csv
import gzip
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
CONFIG_DIR = ROOT / "models" / "data" / "neusight_configs"
CONFIG_FILE = CONFIG_DIR / "configs.csv.gz"

OPS = {
    "linear": ("B", "M", "N", "K"),
    "bmm": ("B", "M", "N", "K"),
    "conv": ("B", "Input_Channel", "Output_Channel", "Kernel_Szie", "Input_Size",
             "Stride", "Padding"),
}
CONFIG_COLUMNS = ("B", "M", "N", "K", "Input_Channel", "Output_Channel", "Kernel_Szie",
                  "Input_Size", "Stride", "Padding")
OUT_COLUMNS = ("op", "order") + CONFIG_COLUMNS + (
    "precision", "forward_ns", "backward_ns", "method", "eager_ns", "graph_copies", "kernel")
SEED = 20261125

GROUP_S = 1e-3            # each timed group of eager launches lasts ~1 ms
GRAPH_REPLAY_S = 200e-6   # a graph holds K copies so that one replay lasts ~200 us
MAX_GRAPH_COPIES = 100


# --------------------------------------------------------------------------
# Step 1: configuration list (runs here; no torch)
# --------------------------------------------------------------------------

def extract(neusight_dir, out_file, seed):
    """Unique configurations per op, then one stratified shuffle: each op's
    configurations are shuffled, the i-th of n gets the key (i + u) / n with
    u uniform in [0, 1), and all ops are merged by key. Any prefix then holds
    the ops in their overall proportions, each a random sample of its op."""
    rng = random.Random(seed)
    keyed = []
    for op, cols in OPS.items():
        unique = set()
        files = sorted((Path(neusight_dir) / "ops" / op).glob("*.csv.gz"))
        if not files:
            raise SystemExit(f"no NeuSight files for {op} under {neusight_dir}")
        for path in files:
            with gzip.open(path, "rt", newline="") as f:
                for r in csv.DictReader(f):
                    unique.add(tuple(int(r[c]) for c in cols))
        configs = sorted(unique)
        rng.shuffle(configs)
        n = len(configs)
        for i, c in enumerate(configs):
            keyed.append(((i + rng.random()) / n, op, dict(zip(cols, c))))
        print(f"{op}: {n} unique configurations from {len(files)} files")
    keyed.sort(key=lambda t: t[0])
    out_file.parent.mkdir(parents=True, exist_ok=True)
    with gzip.GzipFile(out_file, "wb", mtime=0) as raw:
        with open_text(raw) as f:
            w = csv.writer(f, lineterminator="\n")
            w.writerow(("op", "order") + CONFIG_COLUMNS)
            for order, (_, op, c) in enumerate(keyed):
                w.writerow([op, order] + [c.get(k, 0) for k in CONFIG_COLUMNS])
    print(f"wrote {len(keyed)} configurations to {out_file}")


def open_text(raw):
    import io
    return io.TextIOWrapper(raw, encoding="utf-8", newline="")


def read_configs(path):
    with gzip.open(path, "rt", newline="") as f:
        return [{"op": r["op"], "order": int(r["order"]),
                 **{k: int(r[k]) for k in CONFIG_COLUMNS}} for r in csv.DictReader(f)]


def read_rows(path):
    """Existing output rows keyed by (order, precision); columns missing in
    an older file are empty."""
    rows = {}
    if path and Path(path).exists():
        with gzip.open(path, "rt", newline="") as f:
            for r in csv.DictReader(f):
                rows[(int(r["order"]), r["precision"])] = {k: r.get(k, "") for k in OUT_COLUMNS}
    return rows


def write_rows(path, rows):
    tmp = Path(str(path) + ".tmp")
    with gzip.GzipFile(tmp, "wb", mtime=0) as raw:
        with open_text(raw) as f:
            w = csv.DictWriter(f, OUT_COLUMNS, lineterminator="\n")
            w.writeheader()
            for key in sorted(rows, key=lambda k: (k[0], k[1])):
                w.writerow(rows[key])
    os.replace(tmp, path)


# --------------------------------------------------------------------------
# Step 2: measurement (GPU)
# --------------------------------------------------------------------------

class Gpu:
    """Everything that needs torch; created only when not a dry run."""

    def __init__(self):
        import torch
        sys.path.insert(0, str(HERE))
        import collect_ops  # noqa: E402  (timing and graph helpers)
        self.torch = torch
        self.co = collect_ops
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cudnn.benchmark = False
        torch.manual_seed(0)
        self.tag = collect_ops.gpu_tag()

    def settings(self):
        torch = self.torch
        s = {
            "dtype": "float32",
            "torch.backends.cuda.matmul.allow_tf32": torch.backends.cuda.matmul.allow_tf32,
            "torch.backends.cudnn.allow_tf32": torch.backends.cudnn.allow_tf32,
            "torch.backends.cudnn.benchmark": torch.backends.cudnn.benchmark,
            "torch.backends.cudnn.deterministic": torch.backends.cudnn.deterministic,
            "torch.backends.cudnn.enabled": torch.backends.cudnn.enabled,
            "torch.get_float32_matmul_precision": torch.get_float32_matmul_precision(),
            "torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction":
                torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction,
            "torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction":
                torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction,
            "CUBLAS_WORKSPACE_CONFIG": os.environ.get("CUBLAS_WORKSPACE_CONFIG"),
        }
        for name, obj in (("cuda.matmul", torch.backends.cuda.matmul),
                          ("cudnn.conv", getattr(torch.backends.cudnn, "conv", None))):
            try:
                s[f"torch.backends.{name}.fp32_precision"] = obj.fp32_precision
            except Exception as e:  # noqa: BLE001  (API differs across versions)
                s[f"torch.backends.{name}.fp32_precision"] = f"unreadable: {e}"[:120]
        return s

    def device_info(self):
        torch = self.torch
        p = torch.cuda.get_device_properties(0)
        info = {"gpu": self.tag, "device_name": torch.cuda.get_device_name(0),
                "sm_count": p.multi_processor_count,
                "total_memory_bytes": p.total_memory,
                "capability": f"{p.major}.{p.minor}",
                "torch": torch.__version__, "cuda": torch.version.cuda,
                "cudnn": torch.backends.cudnn.version()}
        for attr in ("L2_cache_size", "clock_rate"):
            if hasattr(p, attr):
                info[attr] = getattr(p, attr)
        return info

    def sanity_gemm_tflops(self):
        """fp32 8192^3 GEMM rate: above the fp32 peak (67 TFLOP/s on an H100
        SXM) would mean TF32 is on."""
        torch = self.torch
        a = torch.randn(8192, 8192, device="cuda")
        b = torch.randn(8192, 8192, device="cuda")
        for _ in range(2):
            torch.mm(a, b)
        torch.cuda.synchronize()
        t = self.co.time_groups(lambda: torch.mm(a, b), 3)
        return 2 * 8192 ** 3 / t * 1e-3  # t in ns -> TFLOP/s

    def build(self, c):
        torch = self.torch
        F = torch.nn.functional
        dev = "cuda"
        if c["op"] == "linear":
            x = torch.randn(c["B"], c["M"], c["K"], device=dev)
            w = torch.randn(c["N"], c["K"], device=dev)
            b = torch.randn(c["N"], device=dev)
            return lambda: F.linear(x, w, b)
        if c["op"] == "bmm":
            x = torch.randn(c["B"], c["M"], c["K"], device=dev)
            y = torch.randn(c["B"], c["K"], c["N"], device=dev)
            return lambda: torch.bmm(x, y)
        if c["op"] == "conv":
            ci, co, k, s = c["Input_Channel"], c["Output_Channel"], c["Kernel_Szie"], c["Input_Size"]
            x = torch.randn(c["B"], ci, s, s, device=dev)
            w = torch.randn(co, ci, k, k, device=dev)
            b = torch.randn(co, device=dev)
            stride, pad = c["Stride"], c["Padding"]
            return lambda: F.conv2d(x, w, b, stride, pad)
        raise ValueError(c["op"])

    def forward(self, c, graph_below_ns):
        """(forward_ns, method, eager_ns, graph copies)."""
        torch = self.torch
        fn = self.build(c)
        fn()  # warm-up 1 (cuBLAS/cuDNN heuristics, workspace); calibrate runs warm-up 2
        co = self.co
        co.TARGET_GROUP_S = GROUP_S
        reps = co.calibrate(fn)
        co.GROUPS = 3 if reps == 1 else 5
        eager = co.time_groups(fn, reps)
        if eager >= graph_below_ns:
            return eager, "eager", eager, ""
        try:
            t, copies = self.graph_time(fn, eager)
        except RuntimeError as e:
            torch.cuda.synchronize()
            print(f"graph capture failed for order {c['order']}: {str(e)[:100]}", file=sys.stderr)
            return eager, "eager", eager, ""
        return t, "graph", eager, copies

    def regraph(self, c, eager_ns):
        fn = self.build(c)
        fn()
        self.torch.cuda.synchronize()
        return self.graph_time(fn, eager_ns)

    def graph_time(self, fn, upper_ns):
        """GPU time of one call of fn, as replays of a CUDA graph holding K
        copies of it. K starts from upper_ns (an upper bound of the time, e.g.
        the eager time, which is host-bound for small ops) and is raised once
        from the measured per-copy time, so that one replay lasts about
        GRAPH_REPLAY_S: replays of a graph much shorter than that are bound
        by the host's graph-launch rate. Returns (ns per call, K)."""
        torch, co = self.torch, self.co
        copies = max(1, min(MAX_GRAPH_COPIES, int(GRAPH_REPLAY_S * 1e9 / max(upper_ns, 1.0))))
        for attempt in range(2):
            def many(k=copies):
                for _ in range(k):
                    fn()
            graph = co.capture(many)
            graph.replay()
            torch.cuda.synchronize()
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(3):
                graph.replay()
            end.record()
            end.synchronize()
            replay_ns = start.elapsed_time(end) * 1e6 / 3
            if attempt or copies >= MAX_GRAPH_COPIES or replay_ns >= 0.5 * GRAPH_REPLAY_S * 1e9:
                break
            want = max(1, min(MAX_GRAPH_COPIES, int(GRAPH_REPLAY_S * 1e9 / max(replay_ns / copies, 1.0))))
            if want <= copies:
                break
            del graph
            copies = want
        co.TARGET_GROUP_S = GROUP_S
        reps = co.calibrate(graph.replay)
        co.GROUPS = 5
        t = co.time_groups(graph.replay, reps) / copies
        del graph
        return t, copies

    def probe(self):
        """Host launch overhead on this machine: a tiny bmm timed eager, as
        replays of a 1-copy graph and of a 100-copy graph (ns per call)."""
        torch, co = self.torch, self.co
        x = torch.randn(4, 32, 32, device="cuda")
        fn = lambda: torch.bmm(x, x)  # noqa: E731
        fn()
        co.TARGET_GROUP_S = GROUP_S
        co.GROUPS = 5
        eager = co.time_groups(fn, co.calibrate(fn))
        out = {"op": "bmm 4x32x32 @ 4x32x32", "eager_ns": round(eager, 1)}
        for k in (1, 100):
            def many(k=k):
                for _ in range(k):
                    fn()
            g = co.capture(many)
            out[f"graph{k}_ns"] = round(co.time_groups(g.replay, co.calibrate(g.replay)) / k, 1)
            del g
        return out

    def kernel_name(self, c):
        torch = self.torch
        from torch.profiler import ProfilerActivity, profile
        fn = self.build(c)
        fn()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(3):
                fn()
            torch.cuda.synchronize()
        best, best_t = "", -1.0
        for e in prof.key_averages():
            dt = str(getattr(e, "device_type", ""))
            if "CUDA" not in dt:
                continue
            t = getattr(e, "self_device_time_total", None)
            if t is None:
                t = getattr(e, "self_cuda_time_total", 0.0)
            if t > best_t:
                best, best_t = e.key, t
        return best[:200]

    def fwd_bwd(self, c, precision):
        """collect_ops.measure on the same configuration (its schema)."""
        oc = dict.fromkeys(self.co.CONFIG_COLUMNS, 0)
        if c["op"] == "linear":
            op = "linear"
            oc.update(m=c["B"] * c["M"], n=c["N"], k=c["K"], bias=1)
        elif c["op"] == "bmm":
            op = "bmm"
            oc.update(b=c["B"], m=c["M"], n=c["N"], k=c["K"])
        else:
            op = "conv2d"
            oc.update(b=c["B"], c_in=c["Input_Channel"], c_out=c["Output_Channel"],
                      kernel=c["Kernel_Szie"], size=c["Input_Size"], stride=c["Stride"],
                      padding=c["Padding"], bias=1)
        self.co.TARGET_GROUP_S = 2e-3
        self.co.GROUPS = 5
        fwd, bwd, graphed = self.co.measure(op, oc, precision)
        return fwd, bwd, graphed

    def empty_cache(self):
        self.torch.cuda.empty_cache()

    def oom_types(self):
        return (RuntimeError, self.torch.cuda.OutOfMemoryError)


def nvidia_smi(*args):
    try:
        return subprocess.run(["nvidia-smi", *args], capture_output=True, text=True,
                              timeout=20).stdout
    except Exception as e:  # noqa: BLE001
        return f"nvidia-smi failed: {e}"


def base_row(c, precision):
    row = dict.fromkeys(OUT_COLUMNS, "")
    row.update({k: c[k] for k in ("op", "order") + CONFIG_COLUMNS})
    row["precision"] = precision
    return row


def summarize(rows):
    counts = {}
    for r in rows.values():
        key = f"{r['op']}/{r['precision']}/{r['method'].split(':')[0]}"
        counts[key] = counts.get(key, 0) + 1
    return dict(sorted(counts.items()))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--extract", metavar="NEUSIGHT_DIR",
                   help="step 1: write the configuration list from the NeuSight CSVs and exit")
    p.add_argument("--configs", default=str(CONFIG_FILE))
    p.add_argument("--seed", type=int, default=SEED, help="shuffle seed (step 1)")
    p.add_argument("--out", help="directory for <GPU>.csv.gz and <GPU>.meta.json")
    p.add_argument("--resume-dir", default=str(CONFIG_DIR),
                   help="where earlier <GPU>.csv.gz/.meta.json are read from (rows there are skipped)")
    p.add_argument("--start", type=int, default=0)
    p.add_argument("--stop", type=int, default=None)
    p.add_argument("--budget-s", type=float, default=520)
    p.add_argument("--checkpoint-s", type=float, default=60)
    p.add_argument("--graph-below-us", type=float, default=500,
                   help="re-time as CUDA-graph replays when the eager time per launch is below this")
    p.add_argument("--profile-orders", default="",
                   help="comma-separated orders whose dominant kernel is recorded (first, in any phase)")
    p.add_argument("--profile-every", type=int, default=50,
                   help="record the dominant kernel of orders divisible by this (0: never)")
    p.add_argument("--max-fp32-tflops", type=float, default=70,
                   help="abort if an fp32 8192^3 GEMM runs faster (TF32 would be on; H100 SXM fp32 peak 67)")
    p.add_argument("--phase", choices=("fwd", "regraph", "bwd"), default="fwd")
    p.add_argument("--dry-run", action="store_true", help="no CUDA: plan, and write rows marked dryrun")
    p.add_argument("--tag", help="GPU tag override (default: collect_ops.gpu_tag(); DRYRUN in a dry run)")
    args = p.parse_args()

    if args.extract:
        extract(args.extract, Path(args.configs), args.seed)
        return 0
    if not args.out:
        p.error("--out is required")

    t0 = time.monotonic()
    configs = read_configs(args.configs)
    stop = len(configs) if args.stop is None else min(args.stop, len(configs))
    gpu = None if args.dry_run else Gpu()
    tag = args.tag or ("DRYRUN" if gpu is None else gpu.tag)
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    out_csv, out_meta = out_dir / f"{tag}.csv.gz", out_dir / f"{tag}.meta.json"
    resume_csv = Path(args.resume_dir) / f"{tag}.csv.gz"
    resume_meta = Path(args.resume_dir) / f"{tag}.meta.json"
    rows = read_rows(resume_csv)
    prior = len(rows)
    meta = json.loads(resume_meta.read_text()) if resume_meta.exists() else {}

    if args.phase == "fwd":
        todo = [c for c in configs[args.start:stop] if (c["order"], "fp32") not in rows]
    elif args.phase == "regraph":
        # Rows of an earlier forward pass (threshold 30 us, fixed-K graphs) whose
        # eager time is under --graph-below-us and that have no adaptive-K graph yet.
        def stale(r):
            return (r is not None and r["method"] in ("eager", "graph") and not r["graph_copies"]
                    and r["eager_ns"] and float(r["eager_ns"]) < args.graph_below_us * 1e3)
        todo = [c for c in configs[args.start:stop] if stale(rows.get((c["order"], "fp32")))]
    else:
        todo = [c for c in configs[args.start:stop] if (c["order"], "bf16") not in rows]
    print(f"{tag}: {len(configs)} configurations, {prior} rows already in {resume_csv}, "
          f"{len(todo)} to measure in [{args.start}, {stop}) phase {args.phase}", flush=True)

    run = {"date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "phase": args.phase, "start": args.start, "stop": stop,
           "budget_s": args.budget_s, "rows_before": prior, "dry_run": args.dry_run}
    if gpu is not None:
        info = gpu.device_info()
        run.update(info)
        run["math_settings"] = gpu.settings()
        run["nvidia_smi_clock_start"] = nvidia_smi("-q", "-d", "CLOCK")
        run["nvidia_smi_query_start"] = nvidia_smi(
            "--query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,"
            "power.limit,temperature.gpu,pstate,compute_mode", "--format=csv")
        run["sanity_fp32_gemm_8192_tflops"] = round(gpu.sanity_gemm_tflops(), 2)
        print(f"fp32 8192^3 GEMM: {run['sanity_fp32_gemm_8192_tflops']} TFLOP/s; "
              f"settings {json.dumps(run['math_settings'])}", flush=True)
        if run["sanity_fp32_gemm_8192_tflops"] > args.max_fp32_tflops:
            raise SystemExit(f"fp32 GEMM above {args.max_fp32_tflops} TFLOP/s: TF32 must be on; aborting")

    state = {"measured": 0, "failures": 0, "stopped": ""}
    profile_orders = {int(x) for x in args.profile_orders.split(",") if x.strip()}

    def profile(order):
        return order in profile_orders or (args.profile_every and order % args.profile_every == 0)

    if gpu is not None:
        run["host_overhead_probe"] = gpu.probe()
        print(f"host overhead probe: {run['host_overhead_probe']}", flush=True)
        for order in sorted(profile_orders):
            key = (order, "fp32")
            if key in rows and not rows[key]["kernel"]:
                rows[key]["kernel"] = gpu.kernel_name(configs[order])
                print(f"order {order}: {rows[key]['kernel'][:100]}", flush=True)

    def save(final=False):
        run["rows_measured"] = state["measured"]
        run["failures"] = state["failures"]
        run["elapsed_s"] = round(time.monotonic() - t0, 1)
        run["stopped"] = state["stopped"] or ("running" if not final else "done")
        if final and gpu is not None:
            run["nvidia_smi_clock_end"] = nvidia_smi("-q", "-d", "CLOCK")
        m = dict(meta)
        runs = list(m.get("runs", [])) + [run]
        m.update({
            "gpu": tag,
            "source": "configurations of the NeuSight public data set (github.com/sitar-lab/NeuSight, "
                      "MIT), ops linear/bmm/conv, union over its GPUs; measurements are ours",
            "configs_file": "models/data/neusight_configs/configs.csv.gz",
            "configs_total": len(configs),
            "rows": len(rows),
            "counts": summarize(rows),
            "method": (
                "fp32, TF32 off (cuBLAS and cuDNN), cudnn.benchmark off; forward only unless "
                "backward_ns is set. Per configuration: 2 warm-up calls, then back-to-back eager "
                f"launches between CUDA events in groups of ~{GROUP_S * 1e3:.0f} ms, median of 5 "
                "groups (3 when one launch exceeds ~0.5 ms) = eager_ns. If eager_ns < "
                f"{args.graph_below_us:.0f} us: re-timed as replays of a CUDA graph holding K copies "
                f"(K adaptive so that one replay lasts ~{GRAPH_REPLAY_S * 1e6:.0f} us, K <= "
                f"{MAX_GRAPH_COPIES}), median of 5 groups of ~1 ms, divided by K (method graph, "
                "graph_copies K). Inputs: torch.randn; linear = F.linear(x[B,M,K], w[N,K], bias[N]); "
                "bmm = torch.bmm(x[B,M,K], y[B,K,N]); conv = F.conv2d(x[B,Cin,S,S], w[Cout,Cin,k,k], "
                "bias[Cout], stride, padding). kernel = dominant kernel under torch.profiler on every "
                f"{args.profile_every}-th order. Phase bwd rows: collect_ops.measure (one-copy CUDA-graph "
                "replays, fwd+bwd graph minus fwd graph; fp32 rows keep the forward-pass forward_ns, "
                "bf16 rows are autocast)."),
            "runs": runs,
        })
        for key in ("device_name", "sm_count", "torch", "cuda", "cudnn", "math_settings",
                    "sanity_fp32_gemm_8192_tflops"):
            if key in run:
                m[key] = run[key]
        write_rows(out_csv, rows)
        out_meta.write_text(json.dumps(m, indent=1) + "\n")

    def on_signal(signum, frame):
        state["stopped"] = f"signal {signum}"
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, on_signal)

    deadline = t0 + args.budget_s
    last_save = last_print = time.monotonic()
    graph_below_ns = args.graph_below_us * 1e3
    try:
        for i, c in enumerate(todo):
            now = time.monotonic()
            if now >= deadline:
                state["stopped"] = "budget"
                break
            if now - last_save > args.checkpoint_s:
                save()
                last_save = now
            if now - last_print > 30:
                rate = state["measured"] / max(now - t0, 1e-9)
                print(f"{now - t0:.0f}s: {state['measured']} measured ({rate:.1f}/s), "
                      f"at order {c['order']}, {len(todo) - i} left", flush=True)
                last_print = now
            if args.phase == "fwd":
                row = base_row(c, "fp32")
                if gpu is None:
                    row.update(forward_ns=0, method="dryrun", eager_ns=0)
                else:
                    try:
                        fwd, method, eager, copies = gpu.forward(c, graph_below_ns)
                        row.update(forward_ns=round(fwd, 1), method=method, eager_ns=round(eager, 1),
                                   graph_copies=copies)
                        if profile(c["order"]):
                            row["kernel"] = gpu.kernel_name(c)
                    except gpu.oom_types() as e:
                        state["failures"] += 1
                        what = "OOM" if "out of memory" in str(e).lower() else str(e).split("\n")[0][:60]
                        row.update(method=f"error:{what}".replace(",", ";"))
                        print(f"order {c['order']} {c['op']}: {str(e)[:160]}", file=sys.stderr)
                        gpu.empty_cache()
                rows[(c["order"], "fp32")] = row
            elif args.phase == "regraph":
                row = rows[(c["order"], "fp32")]
                if gpu is None:
                    row.update(method="graph", graph_copies=1)
                else:
                    try:
                        fwd, copies = gpu.regraph(c, float(row["eager_ns"]))
                        row.update(forward_ns=round(fwd, 1), method="graph", graph_copies=copies)
                        if profile(c["order"]) and not row["kernel"]:
                            row["kernel"] = gpu.kernel_name(c)
                    except gpu.oom_types() as e:
                        state["failures"] += 1
                        print(f"order {c['order']} regraph: {str(e)[:160]}", file=sys.stderr)
                        gpu.empty_cache()
            else:
                for precision in ("fp32", "bf16"):
                    key = (c["order"], precision)
                    row = rows.get(key) or base_row(c, precision)
                    if gpu is None:
                        row.update(backward_ns=0, method=row["method"] or "dryrun")
                    else:
                        try:
                            fwd, bwd, graphed = gpu.fwd_bwd(c, precision)
                            row["backward_ns"] = round(bwd, 1)
                            if precision == "bf16" or not row["forward_ns"]:
                                row["forward_ns"] = round(fwd, 1)
                                row["method"] = "graph-fwdbwd" if graphed else "eager-fwdbwd"
                        except gpu.oom_types() as e:
                            state["failures"] += 1
                            row["method"] = row["method"] or "error:fwdbwd"
                            print(f"order {c['order']} {precision}: {str(e)[:160]}", file=sys.stderr)
                            gpu.empty_cache()
                    rows[key] = row
            state["measured"] += 1
            if gpu is not None and state["measured"] % 200 == 0:
                gpu.empty_cache()
        else:
            state["stopped"] = "done"
    except KeyboardInterrupt:
        state["stopped"] = state["stopped"] or "interrupted"
    save(final=True)
    elapsed = time.monotonic() - t0
    print(f"{tag}: measured {state['measured']} in {elapsed:.0f}s "
          f"({state['measured'] / max(elapsed, 1e-9):.1f}/s), failures {state['failures']}, "
          f"stopped: {state['stopped']}; rows now {len(rows)} -> {out_csv}", flush=True)
    print(json.dumps(summarize(rows)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
