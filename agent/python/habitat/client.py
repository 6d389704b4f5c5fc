"""A Python client of habitat-server (habitat.v1.PredictionService).

Needs only `grpcio` and `protobuf` (any protobuf 3.20 to 7.x runtime), not
torch and not the protobuf/gRPC C++ libraries, so it runs on the training
machine next to the agent:

    from habitat import client
    response = client.predict("resnet50.trace.gz", server="HOST:50051",
                              devices=["H100-SXM", "A100-SXM4-40GB"])
    print(client.format_table(response))

No generated _pb2 modules: the message classes are built at run time from
habitat_v1.desc, the FileDescriptorSet of proto/habitat/v1 (regenerated and
compared by the CTest client_descriptor_up_to_date), so no protoc is needed
and no generated code ties the package to one protobuf release.
"""

from __future__ import annotations

import math
import os
import time
import zlib
from typing import Optional, Sequence, Union

DESCRIPTOR_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "habitat_v1.desc")
_METHOD_PREFIX = "/habitat.v1.PredictionService/"
_GZIP_MAGIC = b"\x1f\x8b"
# habitat.v1.Trace.batch_size (trace.proto) and PredictRequest.trace /
# UploadTraceRequest.trace (prediction_service.proto): used to put the
# trace's bytes into a request without parsing them.
_TRACE_BATCH_SIZE_FIELD = 5
_REQUEST_TRACE_FIELD = 1
_MAX_BATCH_SIZE = 1 << 30  # the CLI's bound on --batch-size
# The most a gzipped trace may inflate to by default: the server's default
# --max_message_mb; nothing larger could be sent.
_MAX_TRACE_BYTES = 64 << 20

_PRICE_KINDS = {"on_demand": 1, "on-demand": 1, "spot": 2}
_METHOD_NAMES = {
    "PREDICTION_METHOD_WAVE_SCALING": "wave", "PREDICTION_METHOD_MLP": "mlp",
    "PREDICTION_METHOD_UNSCALED": "unscaled", "PREDICTION_METHOD_MEASURED": "measured",
}


class ServiceError(RuntimeError):
    """A call to habitat-server failed.

    `code` is the gRPC status code's name ("INVALID_ARGUMENT", "NOT_FOUND",
    "UNAUTHENTICATED", "UNAVAILABLE", ...) and `details` the server's
    message, which says what to change.
    """

    def __init__(self, code: str, details: str, server: str = "", method: str = ""):
        self.code = code
        self.details = details
        self.server = server
        self.method = method
        where = f"{method} on {server}" if server else method
        super().__init__(f"habitat-server {where}: {code}: {details}")


def _import_grpc():
    try:
        import grpc  # noqa: F401
        import google.protobuf  # noqa: F401
    except ImportError as e:
        raise ImportError(
            f"habitat.client needs the gRPC and protobuf Python packages ({e}); "
            "install them with `pip install grpcio protobuf`") from e
    return grpc


# ---------------------------------------------------------------------------
# Message classes from the descriptor set

_classes: Optional[dict] = None


def _message_class(pool, full_name: str):
    descriptor = pool.FindMessageTypeByName(full_name)
    from google.protobuf import message_factory
    get_class = getattr(message_factory, "GetMessageClass", None)  # protobuf >= 4.22
    if get_class is not None:
        return get_class(descriptor)
    return message_factory.MessageFactory(pool).GetPrototype(descriptor)  # 3.20, 3.21


def messages() -> dict:
    """The habitat.v1 message classes by short name ("PredictRequest", "Trace",
    ...), built once from habitat_v1.desc in a pool of their own (so they
    never clash with generated habitat_pb2 modules loaded elsewhere)."""
    global _classes
    if _classes is None:
        _import_grpc()
        from google.protobuf import descriptor_pb2, descriptor_pool
        try:
            with open(DESCRIPTOR_FILE, "rb") as f:
                file_set = descriptor_pb2.FileDescriptorSet.FromString(f.read())
        except OSError as e:
            raise RuntimeError(f"cannot read the habitat descriptor set {DESCRIPTOR_FILE}: {e}; "
                               "reinstall the habitat package") from e
        pool = descriptor_pool.DescriptorPool()
        for file_proto in file_set.file:  # dependencies first (protoc --include_imports)
            pool.AddSerializedFile(file_proto.SerializeToString())
        names = ["Trace", "PredictRequest", "PredictResponse", "UploadTraceRequest",
                 "UploadTraceResponse", "ListDevicesRequest", "ListDevicesResponse",
                 "ListCatalogsRequest", "ListCatalogsResponse"]
        _classes = {name: _message_class(pool, "habitat.v1." + name) for name in names}
    return _classes


# ---------------------------------------------------------------------------
# Encoding


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        low = value & 0x7F
        value >>= 7
        if value:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


def _length_delimited(field_number: int, payload: bytes) -> bytes:
    return _varint(field_number << 3 | 2) + _varint(len(payload)) + payload


def _inflate_at_most(data: bytes, limit: int, source: str) -> bytes:
    """Inflates gzip `data` (every member), refusing it as soon as it exceeds
    `limit` bytes: a small file of zeros inflates a thousandfold, and must not
    take this process's memory first (the sidecar and the CLI bound theirs
    the same way, with common/file_io's Gunzip)."""
    out = bytearray()
    rest = data
    while rest[:2] == _GZIP_MAGIC:
        member = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
        pending = rest
        try:
            while not member.eof:
                chunk = member.decompress(pending, limit + 1 - len(out))
                out += chunk
                if len(out) > limit:
                    raise ValueError(f"{source} inflates to more than {limit} bytes, more than "
                                     "the largest trace this client sends (max_message_mb)")
                pending = member.unconsumed_tail
                if not pending and not chunk:
                    break
        except zlib.error as e:
            raise ValueError(f"{source} is not valid gzip: {e}") from e
        if not member.eof:
            raise ValueError(f"{source} is not valid gzip: the data ends early")
        rest = member.unused_data
    if rest.strip(b"\0"):
        raise ValueError(f"{source} is not valid gzip: unexpected bytes after the data")
    return bytes(out)


def trace_bytes(trace, max_bytes: int = _MAX_TRACE_BYTES) -> bytes:
    """The serialised habitat.v1.Trace of `trace`: a file path, bytes (both
    gzip-compressed or not), a habitat.Trace from the tracker (to_bytes())
    or a protobuf Trace message (SerializeToString()). Gzip data that inflates
    to more than `max_bytes` is refused (ValueError) without being inflated
    further."""
    if isinstance(trace, (str, os.PathLike)):
        path = os.fspath(trace)
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError as e:
            raise ValueError(f"cannot read trace file '{path}': {e}") from e
        source = f"trace file '{path}'"
    elif isinstance(trace, (bytes, bytearray, memoryview)):
        data = bytes(trace)
        source = "trace bytes"
    elif hasattr(trace, "to_bytes") and not isinstance(trace, int):
        data = trace.to_bytes()
        source = "habitat.Trace"
    elif hasattr(trace, "SerializeToString"):
        data = trace.SerializeToString()
        source = "Trace message"
    else:
        raise TypeError("trace must be a path, bytes, a habitat.Trace or a Trace message, "
                        f"not {type(trace).__name__}")
    if data[:2] == _GZIP_MAGIC:
        data = _inflate_at_most(data, max_bytes, source)
    if not data:
        raise ValueError(f"{source} is empty")
    if data.lstrip()[:1] in (b"{", b"["):
        raise ValueError(
            f"{source} looks like JSON (a torch.profiler trace?); this client sends "
            "habitat.v1.Trace protobuf files: convert it first with "
            "`habitat import-kineto IN OUT --batch-size N`, or capture with habitat.OperationTracker")
    return data


def _with_batch_size(data: bytes, batch_size: Optional[int]) -> bytes:
    """Sets Trace.batch_size where the trace does not record one, by
    appending the field (for a scalar field the last occurrence wins when a
    message is parsed). A batch size other than the recorded one is refused:
    it would relabel the samples, not predict them."""
    if batch_size is None:
        return data
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) \
            or not 1 <= batch_size <= _MAX_BATCH_SIZE:
        raise ValueError(f"batch_size must be an integer in [1, {_MAX_BATCH_SIZE}], "
                         f"got {batch_size!r}")
    recorded = messages()["Trace"].FromString(data).batch_size
    if recorded and recorded != batch_size:
        raise ValueError(
            f"the trace records batch size {recorded}; batch_size={batch_size} would relabel "
            "the samples without predicting them (another batch size changes every "
            "operation's shapes and times, which habitat does not predict yet): leave "
            f"batch_size out, or profile at batch {batch_size}")
    return data + _varint(_TRACE_BATCH_SIZE_FIELD << 3 | 0) + _varint(batch_size)


# ---------------------------------------------------------------------------
# Responses to plain Python values


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


# ---------------------------------------------------------------------------
# The client


class Client:
    """A connection to one habitat-server; reuse it for several calls.

    server: "host:port". token: sent as `authorization: Bearer <token>`
    (default: $HABITAT_TOKEN). tls: verify the server against the system's
    CAs, or against tls_ca (a PEM file; implies TLS); tls_cert/tls_key: a
    client certificate for servers that require one; tls_server_name: the
    name the server's certificate must carry when `server` is an IP.
    timeout_s: per attempt; UNAVAILABLE is retried (max_attempts in all),
    every RPC of the service being idempotent.
    """

    def __init__(self, server: str, token: Optional[str] = None, tls: bool = False,
                 tls_ca: Optional[str] = None, tls_cert: Optional[str] = None,
                 tls_key: Optional[str] = None, tls_server_name: Optional[str] = None,
                 timeout_s: float = 60.0, max_attempts: int = 3, max_message_mb: int = 64):
        grpc = _import_grpc()
        self._grpc = grpc
        if not server or not isinstance(server, str):
            raise ValueError("server must be 'host:port' (habitat-server's --address)")
        if not timeout_s > 0:
            raise ValueError(f"timeout_s must be > 0, got {timeout_s!r}")
        if max_attempts < 1:
            raise ValueError(f"max_attempts must be >= 1, got {max_attempts!r}")
        self.server = server
        self.timeout_s = timeout_s
        self.max_attempts = max_attempts
        self._max_message_bytes = max_message_mb << 20
        if token is None:
            token = os.environ.get("HABITAT_TOKEN") or None
        if token is not None:
            token = token.strip()
            if not token:
                raise ValueError("token is empty")
        self._metadata = (("authorization", f"Bearer {token}"),) if token else None
        options = [("grpc.max_send_message_length", max_message_mb << 20),
                   ("grpc.max_receive_message_length", max_message_mb << 20)]
        if (tls_cert is None) != (tls_key is None):
            raise ValueError("tls_cert and tls_key go together: give both or neither")
        if tls or tls_ca or tls_cert or tls_server_name:
            def read(path, what):
                if path is None:
                    return None
                try:
                    with open(path, "rb") as f:
                        return f.read()
                except OSError as e:
                    raise ValueError(f"cannot read {what} '{path}': {e}") from e
            credentials = grpc.ssl_channel_credentials(
                root_certificates=read(tls_ca, "tls_ca"),
                private_key=read(tls_key, "tls_key"),
                certificate_chain=read(tls_cert, "tls_cert"))
            if tls_server_name:
                options.append(("grpc.ssl_target_name_override", tls_server_name))
            self._channel = grpc.secure_channel(server, credentials, options=options)
        else:
            self._channel = grpc.insecure_channel(server, options=options)
        self._messages = messages()

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _call(self, method: str, request: bytes, response_type: str):
        grpc = self._grpc
        callable_ = self._channel.unary_unary(
            _METHOD_PREFIX + method,
            request_serializer=lambda already_bytes: already_bytes,
            response_deserializer=self._messages[response_type].FromString)
        backoff = 0.1
        for attempt in range(1, self.max_attempts + 1):
            try:
                return callable_(request, timeout=self.timeout_s, metadata=self._metadata)
            except grpc.RpcError as e:
                code = e.code() if hasattr(e, "code") else None
                if code == grpc.StatusCode.UNAVAILABLE and attempt < self.max_attempts:
                    time.sleep(backoff)
                    backoff *= 2
                    continue
                name = code.name if code is not None else "UNKNOWN"
                details = e.details() if hasattr(e, "details") else str(e)
                raise ServiceError(name, details or "", self.server, method) from None

    def predict(self, trace=None, devices: Union[str, Sequence[str], None] = None,
                catalog: Optional[str] = None, price_kind: Optional[str] = None,
                batch_size: Optional[int] = None, target_host_speed: Optional[float] = None,
                include_breakdown: bool = False, trace_id: Optional[str] = None) -> dict:
        """Predicts one iteration of `trace` (see trace_bytes) or of an
        uploaded `trace_id` on `devices` (ids from list_devices; None: every
        listed GPU). catalog: a server-side price catalog ("aws", ...);
        price_kind: "on_demand" (default) or "spot"; batch_size replaces the
        trace's; target_host_speed: how fast the targets' CPUs run the host
        code relative to the origin's (wall-time predictions only). Returns
        the PredictResponse as a dict (see to_dict)."""
        PredictRequest = self._messages["PredictRequest"]
        rest = PredictRequest()
        if isinstance(devices, str):
            devices = [devices]
        if devices is not None:
            for device in devices:
                if not isinstance(device, str) or not device:
                    raise ValueError(f"devices must be non-empty device ids, got {device!r}")
            rest.devices.extend(devices)
        if catalog:
            rest.catalog = catalog
        if price_kind is not None:
            kind = _PRICE_KINDS.get(str(price_kind).lower())
            if kind is None:
                raise ValueError(f"price_kind must be 'on_demand' or 'spot', got {price_kind!r}")
            rest.price_kind = kind
        if target_host_speed is not None:
            # The server's range (kMinTargetHostSpeed, kMaxTargetHostSpeed).
            if not (isinstance(target_host_speed, (int, float)) and math.isfinite(target_host_speed)
                    and 0.01 <= target_host_speed <= 100):
                raise ValueError("target_host_speed must be within [0.01, 100], "
                                 f"got {target_host_speed!r}")
            rest.target_host_speed = float(target_host_speed)
        rest.include_breakdown = bool(include_breakdown)
        if (trace is None) == (trace_id is None):
            raise ValueError("give exactly one of trace and trace_id")
        if trace_id is not None:
            if batch_size is not None:
                raise ValueError("batch_size applies to a trace, not to a stored trace_id")
            rest.trace_id = trace_id
            request = rest.SerializeToString()
        else:
            # The trace goes in as the bytes it came as: PredictRequest.trace
            # is field 1 (length-delimited), and a serialised message is the
            # concatenation of its fields in any order, so the request is
            # that field followed by the other fields. A trace of many MB
            # is neither parsed nor re-encoded here (the server validates it).
            data = _with_batch_size(trace_bytes(trace, self._max_message_bytes), batch_size)
            request = _length_delimited(_REQUEST_TRACE_FIELD, data) + rest.SerializeToString()
        return to_dict(self._call("Predict", request, "PredictResponse"))

    def upload(self, trace, batch_size: Optional[int] = None) -> str:
        """Stores `trace` on the server; returns its id ("sha256:...") for
        predict(trace_id=...)."""
        data = _with_batch_size(trace_bytes(trace, self._max_message_bytes), batch_size)
        response = self._call("UploadTrace", _length_delimited(_REQUEST_TRACE_FIELD, data),
                              "UploadTraceResponse")
        return response.trace_id

    def list_devices(self, include_test_only: bool = False) -> list:
        """The GPUs the server predicts for, as dicts (DeviceSpec fields)."""
        request = self._messages["ListDevicesRequest"](include_test_only=include_test_only)
        response = self._call("ListDevices", request.SerializeToString(), "ListDevicesResponse")
        return to_dict(response)["devices"]

    def list_catalogs(self) -> list:
        """The server's price catalogs, as dicts (PriceCatalog fields)."""
        request = self._messages["ListCatalogsRequest"]()
        response = self._call("ListCatalogs", request.SerializeToString(), "ListCatalogsResponse")
        return to_dict(response)["catalogs"]


_CONNECTION_ARGS = ("token", "tls", "tls_ca", "tls_cert", "tls_key", "tls_server_name",
                    "timeout_s", "max_attempts", "max_message_mb")


def _split(kwargs: dict):
    connection = {k: kwargs.pop(k) for k in list(kwargs) if k in _CONNECTION_ARGS}
    return connection, kwargs


def predict(trace=None, server: str = "", **kwargs) -> dict:
    """One-shot Client(server, ...).predict(trace, ...); see both."""
    connection, call = _split(kwargs)
    with Client(server, **connection) as client:
        return client.predict(trace, **call)


def upload(trace, server: str = "", **kwargs) -> str:
    connection, call = _split(kwargs)
    with Client(server, **connection) as client:
        return client.upload(trace, **call)


def list_devices(server: str = "", **kwargs) -> list:
    connection, call = _split(kwargs)
    with Client(server, **connection) as client:
        return client.list_devices(**call)


def list_catalogs(server: str = "", **kwargs) -> list:
    connection, _ = _split(kwargs)
    with Client(server, **connection) as client:
        return client.list_catalogs()


# ---------------------------------------------------------------------------
# The CLI's table (client/cli_output.cc FormatPredictionTable)


def _printable(text) -> str:
    return "".join("?" if ord(c) < 0x20 or ord(c) == 0x7F else c for c in str(text))


def _truncate(text: str, width: int) -> str:
    return text if len(text) <= width else text[:width - 3] + "..."


def _wrap(first: str, text: str, width: int) -> str:
    indent = " " * len(first)
    out, column, line_empty = first, len(first), True
    for word in text.split():
        if not line_empty and column + 1 + len(word) > width:
            out += "\n" + indent
            column, line_empty = len(indent), True
        if not line_empty:
            out += " "
            column += 1
        out += word
        column += len(word)
        line_empty = False
    return out + "\n"


def _unscaled_percent(p: dict) -> float:
    total = p.get("gpu_time_ns", 0)
    if total <= 0:
        return 0.0
    unscaled = sum(t.get("predicted_ns", 0) for t in p.get("method_totals", [])
                   if t.get("method") == "PREDICTION_METHOD_UNSCALED")
    return 100.0 * unscaled / total


def _instance_text(p: dict) -> str:
    """The priced instance for the table: its type, '/N' for N GPUs in it."""
    if not p["has_price"]:
        return "-"
    text = _truncate(_printable(p["instance_type"]), 24)
    return f"{text}/{p['gpus_per_instance']}" if p["gpus_per_instance"] > 1 else text


def _mode_text(op: dict) -> str:
    """'tf32>fp32' where the GPU runs the operation in another math mode than
    the origin did, 'bf16' where both are the same, '' without modes."""
    origin, target = op.get("origin_math_mode", ""), op.get("target_math_mode", "")
    if not origin:
        return ""
    if origin == target:
        return _printable(origin)
    return f"{_printable(origin)}>{_printable(target)}"


def _error_text(p: dict) -> str:
    """The table's expected-error column: '-' for the origin (measured) and
    where the response has no estimate."""
    error = p.get("expected_error_percent", 0.0)
    if p["is_origin"] or not error > 0:
        return "-"
    return f"{error:.1f}%"


def _top_operations(p: dict, top: int) -> list:
    ops = sorted(p.get("operations", []),
                 key=lambda op: (-(op["predicted_forward_ns"] + op["predicted_backward_ns"]),
                                 op["index"]))
    return ops[:max(top, 0)]


def _breakdown_legend(predictions: list, top: int) -> str:
    shown = [op for p in predictions for op in _top_operations(p, top)]
    out = ""
    if any(_mode_text(op) for op in shown):
        out += "  mode: math mode on the origin GPU, then on this GPU where it differs (tf32>fp32)\n"
    if any(op.get("at_hardware_limit") for op in shown):
        out += "  ^ at_hardware_limit: predicted faster than this GPU's peak FLOPS or bandwidth " \
               "allow, raised to it\n"
    return out


def _operation_table(p: dict, top: int) -> str:
    ops = sorted(p.get("operations", []),
                 key=lambda op: (-(op["predicted_forward_ns"] + op["predicted_backward_ns"]),
                                 op["index"]))
    out = f"  {_printable(p['device_id'])}: top {min(top, len(ops))} of {len(ops)} " \
          "operations by predicted time\n"
    if not ops:
        return out + "    (no per-operation breakdown in the response)\n"
    out += f"    {'index':>5}  {'operation':<32} {'origin ms':>9} {'fwd ms':>9} " \
           f"{'bwd ms':>9} {'share':>6}  {'method':<8} mode\n"
    for op in ops[:top]:
        total = op["predicted_forward_ns"] + op["predicted_backward_ns"]
        share = 100.0 * total / p["gpu_time_ns"] if p["gpu_time_ns"] > 0 else 0.0
        origin = (op["origin_forward_ns"] + op["origin_backward_ns"]) / 1e6
        method = _METHOD_NAMES.get(op["method"], "?") + ("^" if op.get("at_hardware_limit") else "")
        line = f"    {op['index']:>5}  {_truncate(_printable(op['name']), 32):<32} " \
               f"{origin:>9.3f} {op['predicted_forward_ns'] / 1e6:>9.3f} " \
               f"{op['predicted_backward_ns'] / 1e6:>9.3f} {share:>5.1f}%  " \
               f"{method:<8} {_mode_text(op)}"
        out += line.rstrip(" ") + "\n"
        for warning in op.get("warnings", []):
            out += _wrap("           ! ", _printable(warning), 99)
    return out


def format_table(response: dict, model_name: str = "", precision: str = "",
                 breakdown: bool = False, top_operations: int = 10) -> str:
    """The prediction as `habitat predict` prints it: one line per GPU in
    rank order with GPU ms, its expected error, wall ms ('!': host-bound),
    samples/s, price per GPU-hour, cost per 1000 samples, cost rank and the
    unscaled share. Throughput, cost and both ranks follow the wall time."""
    predictions = sorted(response.get("predictions", []),
                         key=lambda p: (p["rank_by_time"], p["device_id"]))
    kind = "spot" if response.get("price_kind") == "PRICE_KIND_SPOT" else "on-demand"
    origin = response.get("origin_device_id") or "?"
    out = f"model {_printable(model_name) if model_name else '?'}  batch " \
          f"{response.get('batch_size', 0)}  precision {precision or '?'}  " \
          f"origin GPU {_printable(origin)}\n"
    any_price = any(p["has_price"] for p in predictions)
    currency = _printable(response.get("currency") or "?")
    if response.get("catalog"):
        out += f"prices: catalog {_printable(response['catalog'])}, {currency} per GPU-hour, " \
               f"{kind}\n"
    else:
        out += "prices: none (no catalog given)\n"
    if response.get("trace_id"):
        out += f"trace: {response['trace_id']}\n"
    out += "\n"

    id_width = min(max([3] + [len(p["device_id"]) + 1 for p in predictions]), 24)
    unit = currency if any_price else "price"
    any_wall = any(not p["wall_time_is_gpu_time"] for p in predictions)
    any_host_bound = any(not p["wall_time_is_gpu_time"] and p["host_bound"] for p in predictions)
    out += f"{'rank':>4}  {'GPU':<{id_width}} {'GPU ms':>9}   ±err"
    if any_wall:
        out += f" {'wall ms':>10}"
    out += f" {'samples/s':>10} {unit + '/GPU-h':>10} {unit + '/1k smp':>12} {'cost#':>5} " \
           f"{'unscaled':>9}"
    out += "  instance\n" if any_price else "\n"
    cost_decimals = 4
    for p in predictions:
        if p["has_price"] and p["cost_per_1000_samples"] > 0:
            needed = 2 - math.floor(math.log10(p["cost_per_1000_samples"]))
            cost_decimals = max(cost_decimals, min(needed, 9))
    for p in predictions:
        name = _truncate(_printable(p["device_id"]) + ("*" if p["is_origin"] else ""), id_width)
        price = cost = cost_rank = "-"
        if p["has_price"]:
            price = f"{p['price_per_hour']:.3f}"
            cost = f"{p['cost_per_1000_samples']:.{cost_decimals}f}"
            if p["rank_by_cost"] > 0:
                cost_rank = str(p["rank_by_cost"])
        out += f"{p['rank_by_time']:>4}  {name:<{id_width}} {p['gpu_time_ns'] / 1e6:>9.3f} " \
               f"{_error_text(p):>6}"
        if any_wall:
            out += f" {p['wall_time_ns'] / 1e6:>9.3f}{'!' if p['host_bound'] else ' '}" \
                if not p["wall_time_is_gpu_time"] else f" {'-':>10}"
        out += f" {p['samples_per_second']:>10.1f} {price:>10} {cost:>12} {cost_rank:>5} " \
               f"{_unscaled_percent(p):>8.1f}%"
        out += f"  {_instance_text(p)}\n" if any_price else "\n"
    origins = [_printable(p["device_id"]) for p in predictions if p["is_origin"]]
    if origins:
        out += "  * origin GPU: the measured time, not a prediction\n"
    if any_host_bound:
        out += "  ! host-bound: the GPU would idle for more than 15% of the wall time\n"
    out += "  GPU ms: sum of the operations' predicted GPU time\n"
    out += "  ±err: expected error of GPU ms (its operations' expected errors weighted by their " \
           "time)\n"
    if any_wall:
        out += "  wall ms: the origin's host timeline replayed with the predicted GPU times;\n" \
               "           samples/s, costs and ranks use it ('-': GPU ms instead)\n"
    else:
        out += "  no host timeline in the trace: samples/s, costs and ranks use GPU ms as the " \
               "wall time\n"
    if any_price:
        out += "  cost#: rank by cost per 1,000 samples, 1 = cheapest\n"
        out += "  instance: the instance type priced, the smallest with that GPU in the catalog; " \
               "/N:\n           it holds N GPUs, and the price is its price per GPU-hour\n"
    out += "  unscaled: share of GPU ms in operations carried over from the origin unscaled\n"

    # One line per distinct warning, with the GPUs it concerns.
    grouped: dict = {}
    for p in predictions:
        for warning in p.get("warnings", []):
            grouped.setdefault(warning, []).append(_printable(p["device_id"]))
    if grouped or response.get("warnings"):
        out += "\nwarnings:\n"
        for text, devices in grouped.items():
            if len(devices) == len(predictions) and len(devices) > 1:
                who = "all GPUs"
            elif origins and len(devices) + 1 == len(predictions) and len(devices) > 1 \
                    and origins[0] not in devices:
                who = "all GPUs but the origin"
            else:
                who = ", ".join(devices)
            out += _wrap("  - ", f"{who}: {_printable(text)}", 99)
        for warning in response.get("warnings", []):
            out += _wrap("  - ", _printable(warning), 99)
    if breakdown:
        out += "\nbreakdown:\n"
        for p in predictions:
            out += _operation_table(p, top_operations)
        out += _breakdown_legend(predictions, top_operations)
    return out
