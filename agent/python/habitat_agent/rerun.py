"""Per-op re-runs, as in the Habitat paper: each top-level forward operation
of a tracked region is called again alone, with fresh inputs of its recorded
shapes and dtypes, and timed forward and backward (CUDA events on a GPU,
perf_counter on the CPU), median of several repetitions.

The recorded op events (OperationTracker.recorded_ops) carry each op's name
and positional inputs; the call is rebuilt from the operator's schema (the
overload whose arguments match the recorded kinds) and made through
torch.ops.<ns>.<name>.<overload>. What cannot be rebuilt faithfully is
skipped with a reason, never guessed: an argument the recorder could not
represent, integer tensors whose valid values (indices) are unknown.

measure_at_batches re-runs the kernel-varying operations (the engine's
list, _C.is_kernel_varying) with their batch-carrying inputs (the engine's
rule, _C.batch_dimension) at other batch sizes: cuBLAS and cuDNN choose
other kernels at another batch, which the engine cannot foresee but reads
from these re-runs (Pass.batch_reruns) when asked for another batch.

Limits: inputs are fresh contiguous tensors on the re-run device (strides,
aliasing and the data of the iteration are not recorded), so host<->device
copies re-run as device-local ones and data-dependent ops (nonzero,
masked_select) see random data.
"""

from __future__ import annotations

import sys
import time
from typing import Dict, List, Optional, Tuple

import torch

from habitat_agent import _C

# caffe2::TypeMeta names, as the recorder writes them (tensor.dtype().name()).
DTYPES = {
    "float": torch.float32,
    "double": torch.float64,
    "c10::Half": torch.float16,
    "c10::BFloat16": torch.bfloat16,
    "long int": torch.int64,
    "int": torch.int32,
    "short int": torch.int16,
    "signed char": torch.int8,
    "unsigned char": torch.uint8,
    "bool": torch.bool,
    "c10::complex<float>": torch.complex64,
    "c10::complex<double>": torch.complex128,
    "c10::complex<c10::Half>": torch.complex32,
}
for _name, _attr in (("c10::Float8_e4m3fn", "float8_e4m3fn"),
                     ("c10::Float8_e5m2", "float8_e5m2")):
    if hasattr(torch, _attr):
        DTYPES[_name] = getattr(torch, _attr)

# Optimizer ops: fused over whole parameter lists the recorder does not keep.
_OPTIMIZER_PREFIXES = ("aten::_foreach_", "aten::_fused_")

# Ops whose integer tensor inputs are indices or counts; without a rule below
# for the argument, random values could be out of range or change the work.
_INDEX_LIKE = ("index", "gather", "scatter", "embedding", "take", "nll_loss",
               "cross_entropy", "one_hot", "bincount", "put", "unique",
               "searchsorted", "bucketize", "repeat_interleave", "segment",
               "sparse", "ctc", "histc", "multi_margin", "multilabel")


class Skip(Exception):
    """An op that cannot be re-run faithfully; the message says why."""


# ---------------------------------------------------------------- op events

def forward_operations(ops: List[dict]) -> List[Tuple[dict, bool]]:
    """The top-level forward ops (what becomes a trace Operation with a
    forward pass), in start order, each with whether a backward node was
    linked to it. Mirrors agent/capture/trace_assembler.cc: a node links to the
    forward top-level op on its forward thread whose subtree recorded its
    sequence number and that started last before the node's top-level op."""
    by_id = {o["id"]: o for o in ops}
    root: Dict[int, int] = {}
    for o in sorted(ops, key=lambda e: e["id"]):
        parent = o["parent_id"]
        root[o["id"]] = root[parent] if parent in root else o["id"]
    node_of: Dict[int, dict] = {}  # backward top-level op -> earliest node
    for o in ops:
        if not o["is_backward"]:
            continue
        r = root[o["id"]]
        best = node_of.get(r)
        if best is None or (o["start_ns"], o["id"]) < (best["start_ns"], best["id"]):
            node_of[r] = o
    forwards: Dict[Tuple[int, int], List[int]] = {}
    for o in ops:
        if o["sequence_number"] < 0 or o["is_backward"] or root[o["id"]] in node_of:
            continue
        forwards.setdefault((o["thread_id"], o["sequence_number"]), []).append(root[o["id"]])
    with_backward = set()
    for top, node in node_of.items():
        if node["sequence_number"] < 0:
            continue
        thread = node["forward_thread_id"] or node["thread_id"]
        start = by_id[top]["start_ns"]
        cands = [by_id[f] for f in forwards.get((thread, node["sequence_number"]), [])
                 if by_id[f]["start_ns"] < start]
        if cands:
            best = max(cands, key=lambda e: (e["start_ns"], e["id"]))
            with_backward.add(best["id"])
    tops = [o for o in ops if root[o["id"]] == o["id"] and o["id"] not in node_of]
    tops.sort(key=lambda e: (e["start_ns"], e["id"]))
    return [(o, o["id"] in with_backward) for o in tops]


def _group_arguments(event: dict) -> Dict[int, object]:
    """Positional inputs: index -> one recorded argument dict, or a list of
    them for a tensor list (recorded element by element as "i.j")."""
    grouped: Dict[int, object] = {}
    for a in event["arguments"]:
        name = a["name"]
        if "." in name:
            head, tail = name.split(".", 1)
            lst = grouped.setdefault(int(head), [])
            if not isinstance(lst, list):
                raise Skip(f"argument {head} recorded both as a value and a list")
            lst.append(a)
        else:
            grouped[int(name)] = a
    return grouped


def _kind(a: dict) -> str:
    for k in ("shape", "scalar", "integer", "boolean", "text", "integers", "none"):
        if k in a:
            return "tensor" if k == "shape" else k
    return "none"


# ------------------------------------------------------------ schema match

def _parse_type(t: str) -> Tuple[str, bool]:
    optional = t.startswith("Optional[") and t.endswith("]")
    if optional:
        t = t[len("Optional["):-1]
    base = {
        "Tensor": "tensor",
        "List[Tensor]": "tensorlist",
        "List[Optional[Tensor]]": "tensorlist",
        "int": "int",
        "SymInt": "int",
        "float": "float",
        "number": "number",
        "bool": "bool",
        "str": "str",
        "Device": "device",
        "List[int]": "intlist",
        "List[SymInt]": "intlist",
        "Generator": "generator",
    }.get(t, "other:" + t)
    return base, optional


_ACCEPTS = {
    "int": {"integer"},
    "float": {"scalar", "integer"},
    "number": {"scalar", "integer", "boolean"},
    "bool": {"boolean"},
    "str": {"text"},
    "device": {"text"},
    "intlist": {"integers"},
}


def _matches(schema, grouped: Dict[int, object]) -> bool:
    args = schema.arguments
    if any(i >= len(args) for i in grouped):
        return False
    for i, arg in enumerate(args):
        base, optional = _parse_type(str(arg.type))
        value = grouped.get(i)
        if base == "tensorlist":
            # Absent: an empty list (nothing to record element by element).
            if value is None or isinstance(value, list):
                continue
            if optional and _kind(value) == "none":
                continue
            return False
        if value is None or isinstance(value, list):
            return False
        kind = _kind(value)
        if kind == "none":
            if optional or base == "generator":
                continue
            return False
        if base == "tensor":
            if kind != "tensor":
                return False
        elif kind not in _ACCEPTS.get(base, ()):
            return False
    return True


def _has_out_argument(schema) -> bool:
    return any(a.kwarg_only and a.alias_info is not None and a.alias_info.is_write
               for a in schema.arguments)


def resolve(name: str, grouped: Dict[int, object]):
    """(OpOverload, schema) for the recorded call, or Skip."""
    if "::" not in name:
        raise Skip("not an operator")
    try:
        schemas = torch._C._jit_get_schemas_for_operator(name)
    except RuntimeError:
        schemas = []
    if not schemas:
        raise Skip("no operator schema")
    ns, op_name = name.split("::", 1)
    packet = getattr(getattr(torch.ops, ns), op_name, None)
    for schema in schemas:
        if _has_out_argument(schema) or not _matches(schema, grouped):
            continue
        overload = getattr(packet, schema.overload_name or "default", None) if packet else None
        if overload is not None:
            return overload, schema
    raise Skip("no overload matches the recorded arguments")


# ------------------------------------------------------------- inputs

def _norm_dim(dim: int, ndim: int) -> int:
    return dim + ndim if dim < 0 else dim


def _index_bound(name: str, schema, grouped, position: int, element: int) -> Optional[int]:
    """Exclusive upper bound for the values of an integer tensor input that
    holds indices, None when its values are not indices. Skip when they may
    be indices but no rule says into what."""
    names = [a.name for a in schema.arguments]
    arg = names[position]

    def shape_of(arg_name):
        if arg_name not in names:
            return None
        v = grouped.get(names.index(arg_name))
        return v["shape"] if isinstance(v, dict) and "shape" in v else None

    def int_of(arg_name):
        if arg_name not in names:
            return None
        v = grouped.get(names.index(arg_name))
        return v.get("integer") if isinstance(v, dict) else None

    self_shape = shape_of("self") or shape_of("input")
    if ("nll_loss" in name or "cross_entropy" in name) and arg == "target":
        if self_shape:
            return self_shape[1] if len(self_shape) >= 2 else self_shape[0]
    elif name in ("aten::embedding",) and arg == "indices":
        weight = shape_of("weight")
        if weight:
            return weight[0]
    elif arg == "index" and int_of("dim") is not None and self_shape is not None:
        if len(self_shape) == 0:
            return 1
        return self_shape[_norm_dim(int_of("dim"), len(self_shape))]
    elif name in ("aten::index", "aten::index_put", "aten::index_put_",
                  "aten::_index_put_impl_") and arg == "indices":
        if self_shape is not None and element < len(self_shape):
            return self_shape[element]
    elif name == "aten::take" and arg == "index" and self_shape is not None:
        n = 1
        for d in self_shape:
            n *= d
        return n
    if any(k in name for k in _INDEX_LIKE):
        raise Skip(f"integer tensor argument '{arg}' holds indices whose valid "
                   f"range is unknown")
    return None


def _make_tensor(a: dict, device, bound: Optional[int]) -> torch.Tensor:
    dtype = DTYPES.get(a["dtype"])
    if dtype is None:
        raise Skip(f"unknown dtype {a['dtype']!r}")
    shape = a["shape"]
    if dtype == torch.bool:
        # Random, not zeros: masks then select about half, as real ones do.
        return torch.rand(shape, device=device) < 0.5
    if dtype.is_floating_point or dtype.is_complex:
        if dtype in (torch.float16, torch.bfloat16, torch.float32, torch.float64) or dtype.is_complex:
            return torch.randn(shape, dtype=dtype, device=device)
        return torch.randn(shape, device=device).to(dtype)  # float8
    if bound is not None:
        if bound <= 0:
            raise Skip("index into an empty dimension")
        return torch.randint(0, bound, shape, dtype=dtype, device=device)
    # Not indices (counters, integer arithmetic): 1 or 2, never 0 (divisors).
    return torch.randint(1, 3, shape, dtype=dtype, device=device)


class Call:
    """One rebuilt call: the op, its inputs, and the inputs whose gradient
    the iteration computed (as autograd graph edges, so the re-run backward
    does not also time accumulation into leaves)."""

    def __init__(self, overload, schema, grouped, name, device, grad_fallback):
        self.overload = overload
        self.args: list = []
        self.kwargs: dict = {}
        self.grad_inputs: List[torch.Tensor] = []
        for i, arg in enumerate(schema.arguments):
            value = self._value(name, schema, grouped, i, device, grad_fallback)
            if arg.kwarg_only:
                self.kwargs[arg.name] = value
            else:
                self.args.append(value)

    def _tensor(self, a, name, schema, grouped, i, element, device, grad_fallback):
        dtype = DTYPES.get(a["dtype"])
        bound = None
        if dtype is not None and not (dtype.is_floating_point or dtype.is_complex
                                      or dtype == torch.bool):
            bound = _index_bound(name, schema, grouped, i, element)
        t = _make_tensor(a, device, bound)
        wants_grad = a.get("requires_grad", grad_fallback and t.is_floating_point())
        if wants_grad and (t.is_floating_point() or t.is_complex()):
            # A non-leaf (clone of a leaf): in-place ops on it are allowed, and
            # its edge is where the gradient is taken.
            leaf = t.requires_grad_()
            t = leaf.clone()
            self.grad_inputs.append(t)
        return t

    def _value(self, name, schema, grouped, i, device, grad_fallback):
        value = grouped.get(i)
        if value is None:
            return []  # an empty tensor list (_matches allowed only that)
        if isinstance(value, list):
            out = []
            for j, a in enumerate(value):
                if _kind(a) == "none":
                    out.append(None)
                else:
                    out.append(self._tensor(a, name, schema, grouped, i, j, device,
                                            grad_fallback))
            return out
        kind = _kind(value)
        if kind == "none":
            return None
        if kind == "tensor":
            return self._tensor(value, name, schema, grouped, i, 0, device, grad_fallback)
        if kind == "text" and _parse_type(str(schema.arguments[i].type))[0] == "device":
            return torch.device(value["text"])
        return value[kind]

    def __call__(self):
        return self.overload(*self.args, **self.kwargs)


def _differentiable_outputs(out) -> List[torch.Tensor]:
    if isinstance(out, torch.Tensor):
        out = [out]
    elif not isinstance(out, (list, tuple)):
        return []
    return [t for t in out if isinstance(t, torch.Tensor) and t.grad_fn is not None
            and (t.is_floating_point() or t.is_complex())]


# ------------------------------------------------------------------ timing

def median(values: List[int]) -> int:
    """Median of integer times; the mean of the middle two, rounded down."""
    values = sorted(values)
    mid = len(values) // 2
    return values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) // 2


def _gpu_clock_hz(device) -> float:
    try:  # kHz in cudaDeviceProp; absent from some torch builds
        khz = torch.cuda.get_device_properties(device).clock_rate
        if khz > 0:
            return khz * 1e3
    except (AttributeError, RuntimeError):
        pass
    return 2e9


def _time(fn, device, repetitions: int, warmup: int) -> int:
    """Median time of fn() in ns. On a GPU: a pair of CUDA events around
    each call, all enqueued behind a spin kernel (torch.cuda._sleep) long
    enough to outlast the host's enqueueing, so the events see the GPU's
    time for the call's kernels, not the host's launch rate (which made
    small convolutions look 3x slower than in the iteration on an H100)."""
    t0 = time.perf_counter_ns()
    for _ in range(warmup):
        fn()
    host_ns = (time.perf_counter_ns() - t0) / max(1, warmup)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        # Twice the host time of all calls plus 1 ms, at most 200 ms.
        sleep_ns = min(2e8, 2 * host_ns * (repetitions + 1) + 1e6)
        events = []
        torch.cuda._sleep(int(sleep_ns * 1e-9 * _gpu_clock_hz(device)))
        for _ in range(repetitions):
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            events.append((start, end))
        torch.cuda.synchronize(device)
        return median([int(s.elapsed_time(e) * 1e6) for s, e in events])
    times = []
    for _ in range(repetitions):
        t0 = time.perf_counter_ns()
        fn()
        times.append(time.perf_counter_ns() - t0)
    return median(times)


def _signature(name: str, event: dict, has_backward: bool):
    def frozen(a):
        return tuple(sorted((k, tuple(v) if isinstance(v, list) else v)
                            for k, v in a.items() if k != "name"))
    return (name, has_backward,
            tuple((a["name"], frozen(a)) for a in event["arguments"]))


def _note(table: Dict[str, Dict[str, int]], name: str, reason: str, count: int = 1) -> None:
    """Counts `count` ops of `name` under `reason` in a report table."""
    table.setdefault(name, {})
    table[name][reason] = table[name].get(reason, 0) + count


def measure(ops: List[dict], device, repetitions: int = 5, warmup: int = 2,
            max_seconds: Optional[float] = None, verbose: bool = False):
    """Re-runs every top-level forward op of `ops` (recorded op events) on
    `device`. Returns ({op id: (forward_ns, backward_ns)}, report). A
    backward time is 0 when the op had no backward or it could not be run.
    Identical calls (same name, arguments, requires_grad) run once."""
    if repetitions < 1:
        raise ValueError(f"repetitions must be >= 1, got {repetitions}")
    if warmup < 0:
        raise ValueError(f"warmup must be >= 0, got {warmup}")
    device = torch.device(device)
    t0 = time.monotonic()
    candidates = forward_operations(ops)
    times: Dict[int, Tuple[int, int]] = {}
    cache: Dict[tuple, Tuple[int, int]] = {}
    skipped: Dict[str, Dict[str, int]] = {}
    backward_skipped: Dict[str, Dict[str, int]] = {}
    out_of_time = 0
    cached = 0

    for event, has_backward in candidates:
        name = event["name"]
        if name.startswith(_OPTIMIZER_PREFIXES):
            _note(skipped, name, "optimizer op over a parameter list (not recorded)")
            continue
        key = _signature(name, event, has_backward)
        if key in cache:
            times[event["id"]] = cache[key]
            cached += 1
            continue
        if max_seconds is not None and time.monotonic() - t0 > max_seconds:
            out_of_time += 1
            continue
        try:
            result = _measure_one(event, name, has_backward, device, repetitions,
                                  warmup, lambda r: _note(backward_skipped, name, r))
        except Exception as e:  # one op's failure never stops the others
            _note(skipped, name, _failure(e))
            continue
        cache[key] = result
        times[event["id"]] = result
    report = {
        "operations": len(candidates),
        "measured": len(times),
        "runs": len(cache),
        "cached": cached,
        "skipped": skipped,
        "backward_skipped": backward_skipped,
        "out_of_time": out_of_time,
        "seconds": time.monotonic() - t0,
    }
    if verbose:
        n_skipped = sum(sum(r.values()) for r in skipped.values())
        print(f"habitat: re-ran {report['measured']} of {report['operations']} "
              f"ops ({report['runs']} distinct calls, {n_skipped} skipped, "
              f"{out_of_time} left for lack of time) in {report['seconds']:.1f} s",
              file=sys.stderr)
    return times, report


def _measure_one(event, name, has_backward, device, repetitions, warmup, note_backward):
    grouped = _group_arguments(event)
    overload, schema = resolve(name, grouped)
    call = Call(overload, schema, grouped, name, device, grad_fallback=has_backward)
    forward_ns = _time(call, device, repetitions, warmup)
    backward_ns = 0
    if has_backward:
        try:
            backward_ns = _time_backward(call, device, repetitions, warmup)
        except Skip as e:
            note_backward(str(e))
        except Exception as e:
            note_backward(f"backward failed: {type(e).__name__}: "
                          f"{str(e).splitlines()[0] if str(e) else ''}"[:200])
    return forward_ns, backward_ns


def _time_backward(call: Call, device, repetitions: int, warmup: int) -> int:
    if not call.grad_inputs:
        raise Skip("no input required grad")
    # Edges taken before the call: an in-place op rebases its input.
    edges = [torch.autograd.graph.get_gradient_edge(t) for t in call.grad_inputs]
    with torch.enable_grad():
        outputs = _differentiable_outputs(call())
    if not outputs:
        raise Skip("no output needs a gradient")
    grads = [torch.randn_like(t) for t in outputs]

    def backward():
        torch.autograd.grad(outputs, edges, grads, retain_graph=True, allow_unused=True)

    return _time(backward, device, repetitions, warmup)


# ------------------------------------------------------ at other batches

def parameter_shapes(ops: List[dict]) -> set:
    """The shapes AccumulateGrad received: the parameters'. A tensor of such
    a shape is a weight, never a batch-carrying activation (the engine's
    ParameterShapes)."""
    return {tuple(a["shape"]) for e in ops if "AccumulateGrad" in e["name"]
            for a in e["arguments"] if "shape" in a}


def scaled_event(event: dict, batch: int, target: int, parameters: set) -> Optional[dict]:
    """A copy of a recorded op event with each batch-carrying tensor input
    (where the engine finds the batch) at `target`; None when no input
    carries it."""
    out = dict(event)
    args, any_scaled = [], False
    for a in event["arguments"]:
        a = dict(a)
        if "shape" in a:
            d = _C.batch_dimension(a["shape"], batch, tuple(a["shape"]) in parameters)
            if d >= 0:
                shape = list(a["shape"])
                shape[d] = shape[d] // batch * target
                a["shape"] = shape
                any_scaled = True
        args.append(a)
    out["arguments"] = args
    return out if any_scaled else None


# Batch sizes the trace format accepts (habitat.v1.BatchRerun validation).
_MAX_BATCH = 1 << 30


def target_batches(batch: int, factors) -> List[int]:
    """The batch sizes to re-run at: `batch` and int(batch * f) (at least 1)
    for each factor, sorted, each once."""
    if batch < 1:
        raise ValueError(f"batch must be >= 1, got {batch}")
    out = {batch}
    for f in factors:
        if not f > 0:
            raise ValueError(f"factors must be > 0, got {f}")
        target = max(1, int(batch * f))
        if target > _MAX_BATCH:
            raise ValueError(f"factor {f} gives batch {target}, above {_MAX_BATCH}")
        out.add(target)
    return sorted(out)


def measure_at_batches(ops: List[dict], device, batch: int, factors=(0.5, 2, 4),
                       repetitions: int = 7, warmup: int = 2,
                       max_seconds: Optional[float] = None, samples: int = 3,
                       verbose: bool = False):
    """Re-runs each kernel-varying top-level forward op of `ops` (recorded op
    events of an iteration at `batch`) with its batch-carrying inputs at each
    of target_batches(batch, factors), forward and backward, on `device`.

    Each distinct call (identical calls: same name, arguments, backward) is
    measured `samples` times, each with fresh inputs and its own median of
    `repetitions`, and the median of those is kept per batch and pass: one
    disturbed measurement is common enough to matter (a 20 us bf16
    convolution once measured 1 ms at one batch on an H100, a re-run of an
    attention call 1.2 ms against 27 us for its eleven twins).
    A batch whose re-run fails (out of memory at 4x, say) is left out for
    that op; an op whose re-run at `batch` itself fails, or none of whose
    inputs carry the batch, is skipped.

    Returns ({op id: [(batch, forward_ns, backward_ns), ...]}, report); a
    time is 0 where that pass was not measured."""
    if repetitions < 1:
        raise ValueError(f"repetitions must be >= 1, got {repetitions}")
    if warmup < 0:
        raise ValueError(f"warmup must be >= 0, got {warmup}")
    if samples < 1:
        raise ValueError(f"samples must be >= 1, got {samples}")
    batches = target_batches(batch, factors)
    device = torch.device(device)
    t0 = time.monotonic()
    parameters = parameter_shapes(ops)
    groups: Dict[tuple, Tuple[dict, bool, List[int]]] = {}
    for event, has_backward in forward_operations(ops):
        if _C.is_kernel_varying(event["name"]):
            key = _signature(event["name"], event, has_backward)
            groups.setdefault(key, (event, has_backward, []))[2].append(event["id"])
    times: Dict[int, List[Tuple[int, int, int]]] = {}
    skipped: Dict[str, Dict[str, int]] = {}
    batch_failed: Dict[str, Dict[str, int]] = {}
    out_of_time = 0

    for event, has_backward, ids in groups.values():
        name = event["name"]
        if max_seconds is not None and time.monotonic() - t0 > max_seconds:
            out_of_time += len(ids)
            continue
        try:
            rows = _at_batches(event, has_backward, batch, batches, parameters, device,
                               repetitions, warmup, samples,
                               lambda reason: _note(batch_failed, name, reason, len(ids)))
        except Skip as e:
            _note(skipped, name, str(e), len(ids))
            continue
        for i in ids:
            times[i] = rows
    report = {
        "operations": sum(len(g[2]) for g in groups.values()),
        "measured": len(times),
        "calls": len(groups),
        "batches": batches,
        "skipped": skipped,
        "batch_failed": batch_failed,
        "out_of_time": out_of_time,
        "seconds": time.monotonic() - t0,
    }
    if verbose:
        print(f"habitat: re-ran {report['measured']} of {report['operations']} "
              f"kernel-varying ops ({report['calls']} distinct calls) at batches "
              f"{', '.join(map(str, batches))} in {report['seconds']:.1f} s",
              file=sys.stderr)
    return times, report


def _failure(e: Exception) -> str:
    if isinstance(e, Skip):
        return str(e)
    return f"re-run failed: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:200]


def _at_batches(event, has_backward, batch, batches, parameters, device, repetitions,
                warmup, samples, note_failed) -> List[Tuple[int, int, int]]:
    """[(batch, forward_ns, backward_ns)] of one call over `batches`, each
    the median of `samples` measurements. Skip when no input carries the
    batch or the traced batch's re-run fails; another batch that fails is
    left out and noted."""
    rows = []
    for b in batches:
        scaled = event if b == batch else scaled_event(event, batch, b, parameters)
        if scaled is None:
            raise Skip("no input carries the batch")
        try:
            runs = [_measure_one(scaled, event["name"], has_backward, device, repetitions,
                                 warmup, lambda reason: None) for _ in range(samples)]
        except Exception as e:  # one batch's failure never stops the others
            if b == batch:
                raise Skip(_failure(e)) from None
            note_failed(f"batch {b}: {_failure(e)}")
            if device.type == "cuda":
                torch.cuda.empty_cache()  # after running out of memory
            continue
        rows.append((b, median([r[0] for r in runs]), median([r[1] for r in runs])))
    return rows
