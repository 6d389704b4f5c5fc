"""Typed prediction results: dataclasses mirroring habitat.v1.PredictResponse.

Field names are the proto's (prediction_service.proto), enums their value
names ("PREDICTION_METHOD_MLP", "PRICE_KIND_SPOT"), repeated fields tuples.
The deprecated DevicePrediction.iteration_ns (the same value as
gpu_time_ns) is left out.
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
    """Dataclasses to dicts and tuples to lists, recursively."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)
                if f.metadata.get("proto", True)}
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    return value


def _from_message(cls, message):
    """An instance of dataclass `cls` from the proto `message` of the same
    fields; nested messages through the `element` metadata of a field."""
    values = {}
    descriptor = message.DESCRIPTOR
    for f in dataclasses.fields(cls):
        if not f.metadata.get("proto", True):
            continue
        proto_field = descriptor.fields_by_name[f.name]
        value = getattr(message, f.name)
        element = f.metadata.get("element")
        if element is not None:
            value = tuple(_from_message(element, v) for v in value)
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
class DevicePrediction:
    """One GPU's row: predicted GPU and wall time of one iteration, throughput
    and cost (both from the wall time, which an instance bills), price and
    the instance it comes from, ranks and warnings."""
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

    def row(self) -> Dict[str, Any]:
        """The scalar fields and the warnings, as one table row."""
        return {f.name: _plain(getattr(self, f.name)) for f in dataclasses.fields(self)
                if f.name not in ("method_totals", "operations")}


@dataclass(frozen=True)
class PredictionResult:
    """The server's answer to one predict call. `predictions` are in the
    server's order; ranked() sorts them by rank_by_time. `message` is the
    PredictResponse message it was built from."""
    trace_id: str
    origin_device_id: str
    catalog: str
    currency: str
    price_kind: str
    batch_size: int  # predicted at; the basis of throughput and cost
    warnings: Tuple[str, ...]
    predictions: Tuple[DevicePrediction, ...] = field(metadata={"element": DevicePrediction})
    message: Any = field(default=None, repr=False, compare=False, metadata={"proto": False})
    traced_batch_size: int = 0  # the trace's own batch

    @classmethod
    def from_message(cls, message) -> "PredictionResult":
        result = _from_message(cls, message)
        return dataclasses.replace(result, message=message)

    def ranked(self) -> List[DevicePrediction]:
        return sorted(self.predictions, key=lambda p: (p.rank_by_time, p.device_id))

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

    def to_pandas(self):
        """One row per GPU (DevicePrediction.row()), in rank order, as a
        pandas DataFrame. Needs pandas (ImportError says so)."""
        pandas = _require_pandas()
        rows = [p.row() for p in self.ranked()]
        columns = [f.name for f in dataclasses.fields(DevicePrediction)
                   if f.name not in ("method_totals", "operations")]
        return pandas.DataFrame(rows, columns=columns)

    def operations_to_pandas(self):
        """One row per (GPU, operation) of the breakdown (include_breakdown=
        True), as a pandas DataFrame with a device_id column."""
        pandas = _require_pandas()
        op_columns = [f.name for f in dataclasses.fields(OperationPrediction)]
        rows = [{"device_id": p.device_id, **_plain(op)}
                for p in self.ranked() for op in p.operations]
        return pandas.DataFrame(rows, columns=["device_id"] + op_columns)

    def format_table(self, **kwargs) -> str:
        """The table `habitat predict` prints; see habitat_client.format_table."""
        from ._table import format_table
        return format_table(self, **kwargs)
