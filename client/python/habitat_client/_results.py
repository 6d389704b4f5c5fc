"""Typed prediction results: dataclasses mirroring habitat.v1.PredictResponse.

Field names are the proto's (prediction_service.proto), enums their value
names ("PREDICTION_METHOD_MLP", "PRICE_KIND_SPOT"), repeated fields tuples,
singular sub-messages dataclasses or None where the message leaves them
unset. The deprecated DevicePrediction.iteration_ns (the same value as
gpu_time_ns) is left out; the deprecated wall_ns (wall_time_ns where
wall_time_is_gpu_time is False, else 0) is kept for now (README,
"Deprecated output fields").
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

# Proto fields the dataclasses leave out on purpose, by message.
OMITTED_FIELDS = {"DevicePrediction": {"iteration_ns"}}


def _require_pandas():
    try:
        import pandas
    except ImportError as e:
        raise ImportError(
            "to_pandas() needs pandas, which habitat-client does not install: "
            "`pip install pandas` (or `pip install 'habitat-client[pandas]'`)") from e
    return pandas


def _plain(value):
    """Dataclasses to dicts and tuples to lists, recursively. An unset
    sub-message (None) is left out, as _messages.to_dict leaves it out."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)
                if f.metadata.get("proto", True)
                and not (f.metadata.get("message") is not None and getattr(value, f.name) is None)}
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    return value


def _from_message(cls, message):
    """An instance of dataclass `cls` from the proto `message` of the same
    fields. Nested messages through a field's metadata: `element` (the
    dataclass of a repeated field's messages, a tuple of them) or `message`
    (a singular field's dataclass; None where the message leaves it unset)."""
    values = {}
    descriptor = message.DESCRIPTOR
    for f in dataclasses.fields(cls):
        if not f.metadata.get("proto", True):
            continue
        proto_field = descriptor.fields_by_name[f.name]
        value = getattr(message, f.name)
        element = f.metadata.get("element")
        nested = f.metadata.get("message")
        if element is not None:
            value = tuple(_from_message(element, v) for v in value)
        elif nested is not None:
            value = _from_message(nested, value) if message.HasField(f.name) else None
        elif proto_field.message_type is not None:
            raise TypeError(f"{cls.__name__}.{f.name} is a {proto_field.message_type.name} "
                            "message: give its field `element` or `message` metadata")
        elif proto_field.type == proto_field.TYPE_ENUM:
            known = proto_field.enum_type.values_by_number.get(value)
            value = known.name if known is not None else value
        elif isinstance(value, (str, bytes, int, float, bool)):
            pass
        else:  # repeated scalars
            value = tuple(value)
        values[f.name] = value
    return cls(**values)


@dataclass(frozen=True)
class MethodTotal:
    """How many operations of one device's prediction used one method, their
    predicted time and their measured time on the origin GPU."""
    method: str
    operations: int
    predicted_ns: int
    origin_ns: int


@dataclass(frozen=True)
class OperationPrediction:
    """One operation of the trace on one device (include_breakdown=True)."""
    index: int
    name: str
    origin_forward_ns: int
    origin_backward_ns: int
    predicted_forward_ns: int
    predicted_backward_ns: int
    method: str
    warnings: Tuple[str, ...]
    predictor_trained_on_target: bool
    origin_math_mode: str
    target_math_mode: str
    expected_error_percent: float
    at_hardware_limit: bool


@dataclass(frozen=True)
class MemoryPrediction:
    """Predicted GPU memory of one iteration at a device's batch_size: peak
    of PyTorch's allocated memory, its expected error, what a process may
    allocate on the GPU, whether the peak (with headroom for its error) fits
    there, and the largest batch that fits (0: none)."""
    peak_allocated_bytes: int
    expected_error_percent: float
    usable_bytes: int
    fits: bool
    largest_fitting_batch: int


@dataclass(frozen=True)
class ParallelPrediction:
    """One data-parallel training step (PyTorch DDP over NCCL) on
    gpus_per_node x nodes of one GPU model, each GPU at the DevicePrediction's
    batch: step_ns is the single-GPU wall time plus the all-reduce time the
    backward pass does not hide (exposed_communication_ns);
    scaling_efficiency the single-GPU step over this step (1: perfect weak
    scaling); samples_per_second of all GPUs together; instance_type the
    catalog's instance with gpus_per_node of the GPU, when there is one, and
    its price per instance (node) hour; buckets DDP's gradient buckets;
    nvls whether the all-reduces could use NVLink SHARP (and did where it
    was the fastest); expected_error_percent the step's expected absolute
    error; bandwidth_range that the communication bandwidth is known only
    as a range (a PCIe link's is the server's, a network's the fabric's):
    step_ns is then the middle of the steps at the lowest published and the
    usual bandwidth, and the expected error spans both. Where the configuration could not be predicted (no interconnect data,
    more GPUs than a node holds, no network figure for several nodes)
    `unavailable` says why and the times are 0. `kind` is the
    configuration's ("KIND_DATA_PARALLEL", "KIND_FULLY_SHARDED"); for FSDP
    fsdp_units the units the parameters were cut into,
    unsharded_in_flight_bytes the two largest units' parameters, and
    peak_memory_bytes_per_gpu the predicted peak on each GPU (0: no memory
    data), fits_memory whether it fits with headroom; with a fit,
    largest_fitting_batch the largest batch per GPU that fits,
    fewest_gpus_to_fit the fewest GPUs (powers of two up to this
    configuration's) the smallest batch fits on, and
    needs_activation_checkpointing that the sharded state fits but no
    batch's activations do. The FSDP model is not validated against
    measured steps (docs/multi_gpu.md, section 6)."""
    gpus_per_node: int
    nodes: int
    step_ns: int
    exposed_communication_ns: int
    scaling_efficiency: float
    samples_per_second: float
    instance_type: str
    has_price: bool
    price_per_node_hour: float
    cost_per_1000_samples: float
    buckets: int
    unavailable: str
    nvls: bool
    expected_error_percent: float
    bandwidth_range: bool
    kind: str
    fsdp_units: int
    unsharded_in_flight_bytes: int
    peak_memory_bytes_per_gpu: int
    fits_memory: bool = False
    largest_fitting_batch: int = 0
    fewest_gpus_to_fit: int = 0
    needs_activation_checkpointing: bool = False


@dataclass(frozen=True)
class WarningDetail:
    """One full warning text and the GPUs it was given for (none: the
    request as a whole)."""
    text: str
    device_ids: Tuple[str, ...]


@dataclass(frozen=True)
class StructuredWarning:
    """One kind of warning (habitat.v1.Warning), once for every GPU it
    concerns: `kind` a stable identifier ("out_of_memory",
    "hardware_limit", ...), `summary` one sentence that holds for all of
    them, `device_ids` the GPUs (none: the request as a whole), `details`
    each full text with its GPUs. PredictionResult.structured_warnings
    holds one per kind; format_warnings prints them as the CLI does."""
    kind: str
    summary: str
    device_ids: Tuple[str, ...]
    details: Tuple[WarningDetail, ...] = field(metadata={"element": WarningDetail})


# DevicePrediction.row()'s columns for its memory: "memory_" and the field.
MEMORY_COLUMNS = tuple("memory_" + f.name for f in dataclasses.fields(MemoryPrediction))
_NOT_IN_ROW = ("method_totals", "operations", "parallel")


def _row_columns() -> List[str]:
    columns = []
    for f in dataclasses.fields(DevicePrediction):
        if f.name == "memory":
            columns.extend(MEMORY_COLUMNS)
        elif f.name not in _NOT_IN_ROW:
            columns.append(f.name)
    return columns


def _last(rank: int) -> float:
    """Rank 0 (unranked: no price, or the batch does not fit) sorts last."""
    return rank if rank > 0 else float("inf")


@dataclass(frozen=True)
class DevicePrediction:
    """One GPU's row: predicted GPU and wall time of one iteration, throughput
    and cost (both from the wall time, which an instance bills), price and
    the instance it comes from, ranks and warnings; the batch it was
    predicted at (with a fit, the largest that fits this GPU) and its
    predicted memory (None when the trace has no memory data). Both ranks
    are 0 for a GPU the batch does not fit (memory.fits False). `parallel`:
    the data-parallel steps asked for (predict(gpus_per_node=...), then one
    per catalog instance type with catalog_instances=True), in that order;
    empty when none were."""
    device_id: str
    display_name: str
    gpu_time_ns: int
    wall_time_ns: int
    wall_time_is_gpu_time: bool
    wall_ns: int
    gpu_busy_ns: int
    host_bound: bool
    expected_error_percent: float
    samples_per_second: float
    has_price: bool
    price_per_hour: float
    cost_per_1000_samples: float
    samples_per_currency_unit: float
    instance_type: str
    gpus_per_instance: int
    instance_description: str
    price_region: str
    rank_by_time: int
    rank_by_cost: int
    is_origin: bool
    warnings: Tuple[str, ...]
    method_totals: Tuple[MethodTotal, ...] = field(metadata={"element": MethodTotal})
    operations: Tuple[OperationPrediction, ...] = field(
        metadata={"element": OperationPrediction})
    batch_size: int = 0  # predicted at: the response's, or with a fit this GPU's own
    memory: Optional[MemoryPrediction] = field(default=None,
                                               metadata={"message": MemoryPrediction})
    parallel: Tuple[ParallelPrediction, ...] = field(
        default=(), metadata={"element": ParallelPrediction})
    # The kind of each of `warnings` (StructuredWarning.kind), in order;
    # empty from a server before kinds.
    warning_kinds: Tuple[str, ...] = ()

    def row(self) -> Dict[str, Any]:
        """The scalar fields and the warnings, as one table row; the memory
        flattened to memory_peak_allocated_bytes, memory_expected_error_percent,
        memory_usable_bytes, memory_fits and memory_largest_fitting_batch
        (None when the trace has no memory data). One GPU, one row: the
        breakdown (method_totals, operations) and the data-parallel steps
        (`parallel`; PredictionResult.parallel_to_pandas) are left out."""
        row: Dict[str, Any] = {}
        for f in dataclasses.fields(self):
            if f.name == "memory":
                for column, mf in zip(MEMORY_COLUMNS, dataclasses.fields(MemoryPrediction)):
                    row[column] = None if self.memory is None else getattr(self.memory, mf.name)
            elif f.name not in _NOT_IN_ROW:
                row[f.name] = _plain(getattr(self, f.name))
        return row


@dataclass(frozen=True)
class PredictionResult:
    """The server's answer to one predict call. `predictions` are in the
    server's order; ranked() sorts them by rank_by_time (or cost). With a
    fit (is_fit) batch_size is 0 and each prediction has its own.
    `message` is the PredictResponse message it was built from."""
    trace_id: str
    origin_device_id: str
    catalog: str
    currency: str
    price_kind: str
    batch_size: int  # predicted at; the basis of throughput and cost; 0 with a fit
    warnings: Tuple[str, ...]
    predictions: Tuple[DevicePrediction, ...] = field(metadata={"element": DevicePrediction})
    message: Any = field(default=None, repr=False, compare=False, metadata={"proto": False})
    traced_batch_size: int = 0  # the trace's own batch
    # Every warning of the response and of its predictions, one per kind
    # (empty from a server before kinds).
    structured_warnings: Tuple[StructuredWarning, ...] = field(
        default=(), metadata={"element": StructuredWarning})
    # The trace's model name and precision ("PRECISION_BF16"; empty and
    # PRECISION_UNSPECIFIED from a server before these fields).
    model_name: str = ""
    precision: str = "PRECISION_UNSPECIFIED"

    @classmethod
    def from_message(cls, message) -> "PredictionResult":
        result = _from_message(cls, message)
        return dataclasses.replace(result, message=message)

    @property
    def is_fit(self) -> bool:
        """The request asked for a fit (predict(fit=True)): each GPU was
        predicted at the largest batch that fits it (DevicePrediction.batch_size)."""
        return self.batch_size == 0 and len(self.predictions) > 0

    def ranked(self, by: str = "time") -> List[DevicePrediction]:
        """The predictions by rank_by_time (by="time", the default: fastest
        first) or by rank_by_cost (by="cost": cheapest per sample first, then
        by time; what a fit is for, and the order `habitat predict --fit`
        prints). Unranked GPUs (rank 0: no price for the cost rank, or the
        batch does not fit their memory) come last; ties by device id."""
        if by == "time":
            def key(p):
                return (_last(p.rank_by_time), p.device_id)
        elif by == "cost":
            def key(p):
                return (_last(p.rank_by_cost), _last(p.rank_by_time), p.device_id)
        else:
            raise ValueError(f"by must be 'time' or 'cost', got {by!r}")
        return sorted(self.predictions, key=key)

    def device(self, device_id: str) -> DevicePrediction:
        """The prediction for `device_id` (KeyError when there is none)."""
        for p in self.predictions:
            if p.device_id == device_id:
                return p
        raise KeyError(f"no prediction for device {device_id!r} (have: "
                       f"{', '.join(p.device_id for p in self.predictions)})")

    @property
    def origin(self) -> Optional[DevicePrediction]:
        """The trace's own GPU, when it was among the devices predicted."""
        return next((p for p in self.predictions if p.is_origin), None)

    def to_dict(self) -> Dict[str, Any]:
        """Plain dicts and lists, proto field names (json.dumps-able)."""
        return _plain(self)

    def to_pandas(self, by: str = "time"):
        """One row per GPU (DevicePrediction.row(), memory_* columns
        included), in rank order (ranked(by)), as a pandas DataFrame. Needs
        pandas (ImportError says so). The data-parallel steps are not in it:
        see parallel_to_pandas."""
        pandas = _require_pandas()
        rows = [p.row() for p in self.ranked(by)]
        return pandas.DataFrame(rows, columns=_row_columns())

    def operations_to_pandas(self):
        """One row per (GPU, operation) of the breakdown (include_breakdown=
        True), as a pandas DataFrame with a device_id column."""
        pandas = _require_pandas()
        op_columns = [f.name for f in dataclasses.fields(OperationPrediction)]
        rows = [{"device_id": p.device_id, **_plain(op)}
                for p in self.ranked() for op in p.operations]
        return pandas.DataFrame(rows, columns=["device_id"] + op_columns)

    def parallel_to_pandas(self, by: str = "time"):
        """One row per (GPU, data-parallel configuration) (predict(
        gpus_per_node=..., catalog_instances=...)), GPUs in rank order
        (ranked(by)) and each GPU's configurations in the server's order, as
        a pandas DataFrame: device_id, the GPU's batch_size (per GPU) and
        the ParallelPrediction fields. Empty (with the columns) when no
        configuration was asked for."""
        pandas = _require_pandas()
        columns = [f.name for f in dataclasses.fields(ParallelPrediction)]
        rows = [{"device_id": p.device_id, "batch_size": p.batch_size, **_plain(c)}
                for p in self.ranked(by) for c in p.parallel]
        return pandas.DataFrame(rows, columns=["device_id", "batch_size"] + columns)

    def format_table(self, **kwargs) -> str:
        """The table `habitat predict` prints; see habitat_client.format_table."""
        from ._table import format_table
        return format_table(self, **kwargs)

    def format_warnings(self, explain: bool = False) -> str:
        """The warnings as `habitat predict` prints them under its table;
        see habitat_client.format_warnings."""
        from ._table import format_warnings
        return format_warnings(self, explain=explain)

    def plot(self, path, **kwargs):
        """Throughput against price per GPU-hour with the Pareto front, to an
        SVG or PNG file; see habitat_client.plot.plot_throughput_vs_price
        (needs matplotlib)."""
        from .plot import plot_throughput_vs_price
        return plot_throughput_vs_price(self, path, **kwargs)
