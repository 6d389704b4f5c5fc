"""The habitat.v1 message classes, built at run time from habitat_v1.desc.

habitat_v1.desc is the FileDescriptorSet of proto/habitat/v1 (regenerated
and compared by the CTest client_descriptor_up_to_date). Building the
classes from it needs no protoc and no generated _pb2 modules, which would
tie the package to the protobuf release that generated them.
"""

from __future__ import annotations

import os
from typing import Optional

DESCRIPTOR_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "habitat_v1.desc")

# The messages this package uses, by short name.
MESSAGE_NAMES = (
    "Trace", "PredictRequest", "PredictResponse", "DevicePrediction", "OperationPrediction",
    "MethodTotal", "MemoryPrediction", "FitRequest", "ParallelConfig", "ParallelPrediction",
    "Warning", "WarningDetail", "UploadTraceRequest", "UploadTraceResponse",
    "ListDevicesRequest", "ListDevicesResponse", "ListCatalogsRequest", "ListCatalogsResponse",
)

_classes: Optional[dict] = None


def check_dependencies():
    """Imports grpc and protobuf, or raises ImportError saying how to get
    them. Returns the grpc module."""
    try:
        import grpc
        import google.protobuf  # noqa: F401
    except ImportError as e:
        raise ImportError(
            f"habitat_client needs the gRPC and protobuf Python packages ({e}); "
            "install them with `pip install grpcio protobuf`") from e
    return grpc


def _message_class(pool, full_name: str):
    descriptor = pool.FindMessageTypeByName(full_name)
    from google.protobuf import message_factory
    get_class = getattr(message_factory, "GetMessageClass", None)  # protobuf >= 4.22
    if get_class is not None:
        return get_class(descriptor)
    return message_factory.MessageFactory(pool).GetPrototype(descriptor)  # 3.20 to 4.21


def messages() -> dict:
    """The habitat.v1 message classes by short name ("PredictRequest",
    "Trace", ...; MESSAGE_NAMES), built once from habitat_v1.desc in a pool
    of their own, so they never clash with generated habitat_pb2 modules
    loaded elsewhere."""
    global _classes
    if _classes is None:
        check_dependencies()
        from google.protobuf import descriptor_pb2, descriptor_pool
        try:
            with open(DESCRIPTOR_FILE, "rb") as f:
                file_set = descriptor_pb2.FileDescriptorSet.FromString(f.read())
        except OSError as e:
            raise RuntimeError(f"cannot read the habitat descriptor set {DESCRIPTOR_FILE}: {e}; "
                               "reinstall habitat-client") from e
        pool = descriptor_pool.DescriptorPool()
        for file_proto in file_set.file:  # dependencies first (protoc --include_imports)
            pool.AddSerializedFile(file_proto.SerializeToString())
        _classes = {name: _message_class(pool, "habitat.v1." + name) for name in MESSAGE_NAMES}
    return _classes


def enum_value(message_class, field_name: str, value_name: str) -> int:
    """The number of enum value `value_name` of `message_class`'s field
    `field_name`, from the descriptor (no hand copy of the numbering)."""
    enum = message_class.DESCRIPTOR.fields_by_name[field_name].enum_type
    return enum.values_by_name[value_name].number


def _is_repeated(field) -> bool:
    repeated = getattr(field, "is_repeated", None)  # protobuf >= 6.31 (label deprecated)
    if isinstance(repeated, bool):
        return repeated
    return field.label == field.LABEL_REPEATED


def _scalar(field, value):
    if field.type == field.TYPE_ENUM:
        known = field.enum_type.values_by_number.get(value)
        return known.name if known is not None else value
    return value


def to_dict(message) -> dict:
    """Every field of `message` by its proto name, zero values included;
    int64 as int (not the JSON mapping's strings), enums by name, unset
    sub-messages left out."""
    out = {}
    for field in message.DESCRIPTOR.fields:
        value = getattr(message, field.name)
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            value_field = field.message_type.fields_by_name["value"]
            out[field.name] = {k: (to_dict(v) if value_field.message_type is not None
                                   else _scalar(value_field, v)) for k, v in value.items()}
        elif _is_repeated(field):
            out[field.name] = [to_dict(v) if field.message_type is not None
                               else _scalar(field, v) for v in value]
        elif field.message_type is not None:
            if message.HasField(field.name):
                out[field.name] = to_dict(value)
        else:
            out[field.name] = _scalar(field, value)
    return out
