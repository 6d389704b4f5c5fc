"""The front end of the agent (shaped like Listing 1 of the Habitat paper).

The C++ extension habitat_agent._C does the work: RecordFunction callbacks record
every ATen op and autograd node, CUPTI records every kernel, memcpy and
memset, and the two are joined by external correlation ids into a
habitat.v1.Trace, serialised without a protobuf library. Optionally
(collect_counters) one more step runs under the CUPTI range profiler for the
kernels' DRAM bytes and FLOPs.
"""

from __future__ import annotations

import contextlib
import gzip
import os
import sys
import tempfile
from typing import Iterator, Optional

import torch

from habitat_agent import _C, rerun

AGENT_VERSION = "0.1.0"

# habitat.v1.Precision
PRECISIONS = {
    None: 0, "unspecified": 0, "fp32": 1, "tf32": 2, "fp16": 3, "bf16": 4,
    "amp_fp16": 5, "amp_bf16": 6,
}


# The dtype torch.autocast casts to, by the precision argument and by the
# name c10 gives it (what the recorder saw in the tracked region).
AUTOCAST_DTYPES = {"amp_bf16": "bf16", "amp_fp16": "fp16",
                   "BFloat16": "bf16", "Half": "fp16"}


class TrackingError(RuntimeError):
    """The capture failed; the message says why and what to do."""


def _driver_version() -> str:
    try:
        import pynvml  # nvidia-ml-py, when installed
        pynvml.nvmlInit()
        try:
            v = pynvml.nvmlSystemGetDriverVersion()
            return v.decode() if isinstance(v, bytes) else str(v)
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # optional: the trace is valid without it
        return ""


def origin_device(device=None) -> dict:
    """What the driver says about the GPU the trace is measured on."""
    p = torch.cuda.get_device_properties(device)
    return {
        "name": p.name,
        "major": p.major,
        "minor": p.minor,
        "sm_count": p.multi_processor_count,
        "memory_bytes": p.total_memory,
        "l2_cache_bytes": getattr(p, "L2_cache_size", 0),
        "driver_version": _driver_version(),
    }


def framework_versions() -> dict:
    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    return {
        "torch": torch.__version__,
        "cuda": torch.version.cuda or "",
        "cudnn": str(cudnn) if cudnn else "",
        "habitat": AGENT_VERSION,
    }


def _first_readable(*reads):
    """The first of `reads` that gives a value. From torch 2.9 a getter of
    the legacy TF32 API raises RuntimeError once the new fp32_precision API
    has set a different value ("a mix of the legacy and new APIs"); older
    torch lacks the new API (AttributeError). None when none can be read."""
    for read in reads:
        try:
            value = read()
        except (AttributeError, RuntimeError):
            continue
        if value is not None:
            return value
    return None


def math_settings() -> dict:
    """The math settings in force now (habitat.v1.MathSettings without the
    autocast dtype): whether fp32 matmuls and cuDNN convolutions may run in
    TF32, and torch.get_float32_matmul_precision(). A target GPU without
    TF32 runs those ops on CUDA cores, so the predictor needs to know."""
    matmul_tf32 = _first_readable(
        lambda: bool(torch.backends.cuda.matmul.allow_tf32),
        lambda: torch.backends.cuda.matmul.fp32_precision == "tf32")
    cudnn_tf32 = _first_readable(
        lambda: bool(torch.backends.cudnn.allow_tf32),
        lambda: torch.backends.cudnn.conv.fp32_precision == "tf32")
    precision = _first_readable(
        torch.get_float32_matmul_precision,
        lambda: None if matmul_tf32 is None else ("high" if matmul_tf32 else "highest"))
    return {
        "matmul_tf32": matmul_tf32,
        "cudnn_tf32": cudnn_tf32,
        "float32_matmul_precision": precision or "",
        "source": "recorded",
    }


def memory_at_start(device=None) -> Optional[dict]:
    """Starts measuring the memory of a region: resets the caching
    allocator's peak statistics (torch.cuda.reset_peak_memory_stats, so the
    caller's own peaks restart too) and returns what is allocated now, the
    weights, gradients and optimizer state kept from earlier steps. None
    when this process has not initialised CUDA (no GPU, or a CPU run): the
    memory stays unknown."""
    if not torch.cuda.is_initialized():
        return None
    torch.cuda.reset_peak_memory_stats(device)
    return {"allocated_bytes_at_start": torch.cuda.memory_allocated(device)}


def memory_device_index(device=None) -> int:
    """The CUDA device index whose allocator the recorder reads around each
    top-level range (PassMemory in the trace): `device`, else the current
    one; -1 for a device that is not CUDA."""
    if device is None:
        return torch.cuda.current_device()
    d = torch.device(device)
    if d.type != "cuda":
        return -1
    return torch.cuda.current_device() if d.index is None else d.index


def memory_usage(start: Optional[dict], device=None) -> Optional[dict]:
    """habitat.v1.MemoryUsage of the region that memory_at_start began:
    `start` with the peaks allocated and reserved since then (the device's
    total memory is the origin's memory_bytes). None when `start` is None."""
    if start is None:
        return None
    return dict(start,
                peak_allocated_bytes=torch.cuda.max_memory_allocated(device),
                peak_reserved_bytes=torch.cuda.max_memory_reserved(device),
                source="recorded")


def module_table(model) -> list:
    """habitat.v1.Module of each module of `model`, in named_modules() order:
    (path, class name, bytes of the parameters it registers itself), a
    parameter shared by several modules (tied embeddings) counted at the
    first. An FSDP prediction cuts its units where fully_shard would wrap a
    module class (`habitat predict --parallel fsdp --fsdp-wrap CLASS`)."""
    seen = set()
    table = []
    for path, module in model.named_modules():
        held = 0
        for p in module.parameters(recurse=False):
            if id(p) not in seen:
                seen.add(id(p))
                held += p.numel() * p.element_size()
        table.append((path, type(module).__name__, held))
    return table


def time_iteration(step, repetitions: int = 30, warmup: int = 3) -> int:
    """Median wall time of `step()` in ns, untracked: CUDA events around each
    call, synchronised after it. Pass it to get_tracked_trace(
    iteration_wall_ns=...), since tracking slows the host down."""
    if repetitions < 1:
        raise ValueError(f"repetitions must be >= 1, got {repetitions}")
    for _ in range(warmup):
        step()
    torch.cuda.synchronize()
    times = []
    for _ in range(repetitions):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        step()
        end.record()
        end.synchronize()
        times.append(int(start.elapsed_time(end) * 1e6))
    return rerun.median(times)


def measure_gpu_busy(step, repetitions: int = 30, warmup: int = 3) -> dict:
    """GPU-busy time of `step()` (the union of its kernel, memcpy and memset
    intervals, in ns) for each of `repetitions` calls, from one CUPTI region
    with a device synchronisation after every call. Inputs are not recorded,
    so the host slows down less than under track(); GPU durations are what
    CUPTI measures either way. Returns {"median_ns", "busy_ns": [...]}.
    """
    if repetitions < 1:
        raise ValueError(f"repetitions must be >= 1, got {repetitions}")
    for _ in range(warmup):
        step()
    torch.cuda.synchronize()
    impl = _C.Tracker("cupti", False)
    try:
        impl.start()
    except RuntimeError as e:
        raise TrackingError(str(e)) from None
    boundaries = []
    try:
        torch.cuda.synchronize()
        boundaries.append(impl.now_ns())
        for _ in range(repetitions):
            step()
            torch.cuda.synchronize()
            boundaries.append(impl.now_ns())
    finally:
        warnings = impl.stop()
    for w in warnings:
        print(f"habitat: warning: {w}", file=sys.stderr)
    busy = impl.busy_per_window(boundaries)
    return {"median_ns": rerun.median(busy), "busy_ns": busy}


class Trace:
    """A captured iteration: the serialised habitat.v1.Trace and a summary."""

    def __init__(self, data: bytes, summary: dict):
        self._data = data
        self.summary = summary

    def to_bytes(self) -> bytes:
        return self._data

    def save(self, path: str) -> None:
        """Writes the trace (gzip-compressed when `path` ends in .gz),
        atomically: a reader never sees a partial file."""
        data = gzip.compress(self._data, mtime=0) if path.endswith(".gz") else self._data
        directory = os.path.dirname(os.path.abspath(path))
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".habitat-", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise

    def predict(self, server: str, devices=None, **kwargs) -> dict:
        """Predicts this iteration on other GPUs through habitat-server at
        `server` ("host:port"); devices: ids (None: every GPU the server
        lists). Other arguments as habitat_agent.client.Client and its predict:
        catalog, price_kind, batch_size, target_host_speed,
        include_breakdown, token, tls, tls_ca, timeout_s, ... Returns the
        response as a dict; habitat_agent.client.format_table prints it."""
        return _client().predict(self._data, server=server, devices=devices, **kwargs)

    def upload(self, server: str, **kwargs) -> str:
        """Stores this trace on habitat-server; returns its id."""
        return _client().upload(self._data, server=server, **kwargs)

    def __repr__(self) -> str:
        return f"<habitat_agent.Trace {self.summary.get('line', '')}>"


def _client():
    # Imported on use: grpcio and protobuf are needed only to predict; an
    # ImportError without them says `pip install grpcio protobuf`.
    from habitat_agent import client
    client.check_dependencies()
    return client


class OperationTracker:
    """Tracks one training iteration on the current CUDA device.

    model_name, batch_size and precision ("fp32", "bf16", "amp_bf16", ...)
    describe the workload; batch_size is required for a trace the server
    accepts (it can also be given to get_tracked_trace). model (a
    torch.nn.Module), when given, has its modules recorded (module_table)
    so that FSDP predictions can wrap by module class.
    """

    def __init__(self, model_name: str = "", batch_size: Optional[int] = None,
                 precision: Optional[str] = "fp32", device=None,
                 record_inputs: bool = True, source: str = "cupti",
                 verbose: bool = True, model=None):
        if precision not in PRECISIONS:
            raise ValueError(f"precision must be one of "
                             f"{sorted(k for k in PRECISIONS if k)}, got {precision!r}")
        if source == "cupti" and not torch.cuda.is_available():
            raise TrackingError("no CUDA device: the tracker measures GPU work "
                                "(source='host' records ops only)")
        if model is not None and not isinstance(model, torch.nn.Module):
            raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
        self.model_name = model_name
        self.batch_size = batch_size
        self._modules = None if model is None else module_table(model)
        self.precision = precision
        self.device = device
        self.verbose = verbose
        self._source = source
        self._impl = _C.Tracker(source, record_inputs)
        self._tracked = False
        self._trace: Optional[Trace] = None
        self._rerun_times: dict = {}  # op event id -> (forward_ns, backward_ns)
        self._batch_reruns: dict = {}  # op event id -> [(batch, forward_ns, backward_ns)]
        self._math: Optional[dict] = None  # math_settings() when track() began
        self._memory: Optional[dict] = None  # memory_usage() of the region
        self.warnings: list = []

    def _sync(self) -> None:
        if self._source == "cupti":
            torch.cuda.synchronize(self.device)

    @contextlib.contextmanager
    def track(self) -> Iterator["OperationTracker"]:
        self._sync()  # earlier work stays out of the window
        self._rerun_times = {}  # keyed by the previous region's op ids
        self._batch_reruns = {}
        self._math = math_settings()
        memory_start = memory_at_start(self.device)
        memory_device = -1 if memory_start is None else memory_device_index(self.device)
        try:
            self._impl.start(memory_device)
        except RuntimeError as e:
            raise TrackingError(str(e)) from None
        try:
            yield self
        finally:
            try:
                self._sync()
            finally:
                self.warnings = list(self._impl.stop())
        self._memory = memory_usage(memory_start, self.device)
        self._tracked = True
        for w in self.warnings:
            print(f"habitat: warning: {w}", file=sys.stderr)
        if self._source == "cupti":
            self._trace = self._assemble(self.batch_size)
            if self.verbose:
                print(f"habitat: tracked {self.model_name or 'iteration'}: "
                      f"{self._trace.summary['line']}", file=sys.stderr)

    def math_settings(self) -> dict:
        """The math settings of the last tracked region, as the trace records
        them: math_settings() read when track() began, and autocast_dtype
        ("bf16", "fp16" or "" for none): the dtype autocast used in the
        region when its ops ran under torch.autocast, else the one the
        precision argument names ("amp_bf16", "amp_fp16")."""
        if not self._tracked:
            raise TrackingError("nothing tracked yet: run the iteration inside "
                                "`with tracker.track():` first")
        seen = self._impl.autocast_seen()
        if seen["ops"]:
            autocast = AUTOCAST_DTYPES.get(seen["dtype"], "")
        else:
            autocast = AUTOCAST_DTYPES.get(self.precision, "")
        return dict(self._math, autocast_dtype=autocast)

    def memory_usage(self) -> Optional[dict]:
        """The memory of the last tracked region, as the trace records it
        (memory_usage()): allocated when it began, peaks allocated and
        reserved during it. None without CUDA."""
        if not self._tracked:
            raise TrackingError("nothing tracked yet: run the iteration inside "
                                "`with tracker.track():` first")
        return None if self._memory is None else dict(self._memory)

    def _info(self, batch_size, iteration_wall_ns=None) -> dict:
        return {
            "math": self.math_settings(),
            "memory": self.memory_usage(),
            "model_name": self.model_name,
            "batch_size": batch_size or 0,
            "iteration_wall_ns": iteration_wall_ns or 0,
            "precision": PRECISIONS[self.precision],
            "origin": origin_device(self.device),
            "frameworks": framework_versions(),
            "rerun_times": self._rerun_times,
            "batch_reruns": self._batch_reruns,
            "modules": self._modules,
        }

    def _assemble(self, batch_size, iteration_wall_ns=None) -> Trace:
        try:
            data, summary = self._impl.assemble(
                self._info(batch_size, iteration_wall_ns))
        except (RuntimeError, ValueError) as e:
            raise TrackingError(str(e)) from None
        return Trace(data, summary)

    def get_tracked_trace(self, batch_size: Optional[int] = None,
                          iteration_wall_ns: Optional[int] = None) -> Trace:
        """The trace of the last tracked region. iteration_wall_ns (e.g. from
        habitat_agent.time_iteration) replaces the tracked region's length, which
        includes the recording overhead."""
        if not self._tracked:
            raise TrackingError("nothing tracked yet: run the iteration inside "
                                "`with tracker.track():` first")
        if self._source != "cupti":
            raise TrackingError(f"source={self._source!r} records ops only; "
                                "a trace needs source='cupti' on a CUDA GPU")
        batch = batch_size or self.batch_size
        if not batch:
            raise ValueError("batch_size is not set: pass OperationTracker("
                             "batch_size=N) or get_tracked_trace(batch_size=N); "
                             "predictions need it")
        if iteration_wall_ns is not None and iteration_wall_ns <= 0:
            raise ValueError(f"iteration_wall_ns must be > 0, got {iteration_wall_ns}")
        if self._trace is None or batch != self.batch_size or iteration_wall_ns:
            return self._assemble(batch, iteration_wall_ns)
        return self._trace

    def collect_counters(self, step, fraction: float = 0.995) -> dict:
        """Hardware counters (DRAM bytes, FLOPs) for the kernels that make up
        `fraction` of the tracked iteration's kernel time: runs `step` once
        more under the CUPTI range profiler, which replays every kernel once
        per hardware pass (slow: seconds to minutes), and attaches the
        counters to the matching kernels of the trace. Call it after
        `track()`, with the same step (it must launch the same kernels).

        Without profiling permission or support the trace stays as it is and
        one warning says what is missing; the returned report (a dict) has
        status != "OK" then. Kernels measured once are not measured again.
        """
        if not self._tracked:
            raise TrackingError("nothing tracked yet: run the iteration inside "
                                "`with tracker.track():` first")
        if self._source != "cupti":
            raise TrackingError("counters need source='cupti' on a CUDA GPU")
        if not 0 < fraction <= 1:
            raise ValueError(f"fraction must be in (0, 1], got {fraction}")

        def work():
            step()
            torch.cuda.synchronize(self.device)

        self._sync()
        if self.verbose:
            print(f"habitat: collecting hardware counters for "
                  f"{self.model_name or 'the iteration'} (one more step, each "
                  f"kernel replayed per hardware pass)...", file=sys.stderr,
                  flush=True)
        report = dict(self._impl.collect_counters(work, fraction))
        if report["status"] != "OK":
            message = (f"no hardware counters: {report['message']}")
            if message not in self.warnings:
                self.warnings.append(message)
                print(f"habitat: warning: {message}", file=sys.stderr)
            return report
        if report.get("missing_metrics"):
            print(f"habitat: warning: metrics unknown on {report['chip']}: "
                  f"{', '.join(report['missing_metrics'])}", file=sys.stderr)
        self._trace = self._assemble(self.batch_size)
        if self.verbose:
            if report["ran"]:
                print(f"habitat: counters for {report['new_keys']} of "
                      f"{report['wanted_keys']} kernel configurations "
                      f"({100 * fraction:g}% of kernel time) in "
                      f"{report['seconds']:.1f} s: {report['ranges']} launches "
                      f"profiled, {report['replay_passes']} replay passes, "
                      f"{report['matched']} joined to the tracked kernels",
                      file=sys.stderr)
            else:
                print(f"habitat: counters for all {report['wanted_keys']} "
                      f"kernel configurations were measured before",
                      file=sys.stderr)
        if report["wanted_missing"]:
            print(f"habitat: warning: {report['wanted_missing']} kernel "
                  f"configurations got no counters (the counter step launched "
                  f"other kernels)", file=sys.stderr)
        return report

    def measure_ops(self, repetitions: int = 5, warmup: int = 2,
                    max_seconds: Optional[float] = 300.0) -> dict:
        """Re-runs each top-level forward op of the tracked region alone, with
        fresh inputs of its recorded shapes and dtypes, and times its forward
        and (when the iteration ran one) backward: CUDA events, median of
        `repetitions` after `warmup` calls (habitat/rerun.py). The times go
        into the trace as Pass.rerun_time_ns; CUPTI's time_ns stays.

        Identical calls are timed once. Ops that cannot be rebuilt (optimizer
        lists, unrecorded arguments, indices of unknown range) or fail are
        skipped; ops left when `max_seconds` is spent are not measured. The
        returned report says which and why.
        """
        device, autocast = self._rerun_setup("measure_ops")
        with torch.enable_grad(), autocast:
            times, report = rerun.measure(self._impl.ops(), device, repetitions,
                                          warmup, max_seconds, self.verbose)
        self._rerun_times = times
        if self._source == "cupti":
            self._trace = self._assemble(self.batch_size)
        return report

    def measure_batch_scaling(self, factors=(0.5, 2, 4), repetitions: int = 7,
                              warmup: int = 2, max_seconds: Optional[float] = 300.0) -> dict:
        """Re-runs each kernel-varying operation of the tracked region (GEMMs,
        convolutions, RNNs, attention) alone with its batch-carrying inputs
        at the traced batch and at int(batch * f) for each factor, forward
        and backward (habitat/rerun.py measure_at_batches). The times go into
        the trace as Pass.batch_reruns, from which a prediction at another
        batch (`habitat predict --batch-size`) takes what cuBLAS and cuDNN do
        there on this GPU instead of scaling the traced kernels: about 2%
        error per doubling of the batch instead of 4.5%
        (docs/batch_scaling_study.md). Costs seconds to a few minutes.

        Larger batches need more memory: a batch whose re-run fails (out of
        memory) is left out for that op, and predictions beyond the largest
        measured batch fall back to scaling. The returned report says what
        was measured, skipped and left for lack of time.
        """
        if not self.batch_size:
            raise ValueError("batch_size is not set: pass OperationTracker(batch_size=N); "
                             "the re-runs scale the inputs from it")
        device, autocast = self._rerun_setup("measure_batch_scaling")
        with torch.enable_grad(), autocast:
            times, report = rerun.measure_at_batches(
                self._impl.ops(), device, self.batch_size, factors, repetitions, warmup,
                max_seconds, verbose=self.verbose)
        self._batch_reruns = times
        if self._source == "cupti":
            self._trace = self._assemble(self.batch_size)
        return report

    def _rerun_setup(self, what: str):
        """The device to re-run ops on and the autocast context they ran in."""
        if not self._tracked:
            raise TrackingError("nothing tracked yet: run the iteration inside "
                                "`with tracker.track():` first")
        if _C.is_recording():
            raise TrackingError(f"a tracker is recording: {what} must run "
                                "outside `track()`, or the re-runs are recorded")
        if self.device is not None:
            device = torch.device(self.device)
        elif self._source == "cupti":
            device = torch.device("cuda", torch.cuda.current_device())
        else:
            device = torch.device("cpu")
        autocast = contextlib.nullcontext()
        if self.precision in ("amp_fp16", "amp_bf16"):
            # Autocast casts inside the recorded op: re-run it the same way.
            dtype = torch.float16 if self.precision == "amp_fp16" else torch.bfloat16
            autocast = torch.autocast(device.type, dtype=dtype)
        return device, autocast

    def batch_reruns(self) -> dict:
        """{op event id: [(batch, forward_ns, backward_ns), ...]} of the last
        measure_batch_scaling."""
        return {k: list(v) for k, v in self._batch_reruns.items()}

    def rerun_times(self) -> dict:
        """{op event id: (forward_ns, backward_ns)} of the last measure_ops."""
        return dict(self._rerun_times)

    def kernel_counters(self) -> list:
        """The measured counters per kernel configuration (name, grid, block,
        shared memory), with its launches and time in the tracked region."""
        return self._impl.kernel_counters()

    def recorded_ops(self) -> list:
        """The raw op events of the last region (for inspection and tests)."""
        return self._impl.ops()

    def activity_counts(self) -> dict:
        return self._impl.activity_counts()
