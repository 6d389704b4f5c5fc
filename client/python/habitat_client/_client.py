"""The gRPC client of habitat.v1.PredictionService."""

from __future__ import annotations

import json
import logging
import math
import os
import time
import warnings
from typing import Optional, Sequence, Union

from . import _messages, _traces
from ._results import PredictionResult

logger = logging.getLogger("habitat_client")

_SERVICE = "habitat.v1.PredictionService"
_PRICE_KINDS = {"on_demand": "PRICE_KIND_ON_DEMAND", "on-demand": "PRICE_KIND_ON_DEMAND",
                "spot": "PRICE_KIND_SPOT"}


# gRPC caps a retry policy's maxAttempts at 5.
MAX_ATTEMPTS = 5
_INITIAL_BACKOFF_S = 0.1


def retry_service_config(max_attempts: int) -> str:
    """The channel's service config: gRPC retries UNAVAILABLE on every
    method of the service, max_attempts in all, with exponential backoff;
    no retry policy for one attempt."""
    if max_attempts <= 1:
        return "{}"
    policy = {
        "maxAttempts": max_attempts,
        "initialBackoff": f"{_INITIAL_BACKOFF_S:.9f}s",
        "maxBackoff": f"{_INITIAL_BACKOFF_S * 2 ** (max_attempts - 2):.9f}s",
        "backoffMultiplier": 2,
        "retryableStatusCodes": ["UNAVAILABLE"],
    }
    return json.dumps({"methodConfig": [{"name": [{"service": _SERVICE}],
                                         "retryPolicy": policy}]})


class PredictionWarning(UserWarning):
    """A warning the server attached to a whole prediction (its response's
    `warnings`), issued through the warnings module."""


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


def _is_batch(value) -> bool:
    return (isinstance(value, int) and not isinstance(value, bool)
            and 1 <= value <= _traces.MAX_BATCH_SIZE)


# The ranges of `habitat predict --gpus N --nodes M --bucket-mb B` (the
# server's kMaxGpusPerNode, kMaxNodes and kMaxBucketCapBytes >> 20).
MAX_GPUS_PER_NODE = 64
MAX_NODES = 4096
MAX_BUCKET_CAP_MB = 1 << 20
# The server's kMaxFsdpUnits (--fsdp-units U) and kMaxFsdpWrapChars
# (--fsdp-wrap CLASS).
MAX_FSDP_UNITS = 4096
MAX_FSDP_WRAP_CHARS = 256


def _check_int(name: str, value, largest: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= largest:
        raise ValueError(f"{name} must be an integer within [1, {largest}], got {value!r}")


def _parallel_kind(parallel: Optional[str], fsdp_units: Optional[int],
                   fsdp_wrap: Optional[str] = None) -> str:
    """"ddp" or "fsdp" from parallel= (None: ddp), as the CLI's --parallel;
    fsdp_units= or fsdp_wrap= only with "fsdp", and not both."""
    kind = "ddp" if parallel is None else str(parallel).lower()
    if kind not in ("ddp", "fsdp"):
        raise ValueError(f"parallel must be 'ddp' or 'fsdp', not {parallel!r} (hybrid sharding, "
                         "tensor and pipeline parallelism are not modelled)")
    if fsdp_units is not None:
        if kind != "fsdp":
            raise ValueError("fsdp_units cuts an FSDP model: pass parallel='fsdp' with it")
        _check_int("fsdp_units", fsdp_units, MAX_FSDP_UNITS)
    if fsdp_wrap is not None:
        if kind != "fsdp":
            raise ValueError("fsdp_wrap cuts an FSDP model: pass parallel='fsdp' with it")
        if not isinstance(fsdp_wrap, str) or not fsdp_wrap or len(fsdp_wrap) > MAX_FSDP_WRAP_CHARS:
            raise ValueError(f"fsdp_wrap must be a module class name of 1 to "
                             f"{MAX_FSDP_WRAP_CHARS} characters, got {fsdp_wrap!r}")
        if fsdp_units is not None:
            raise ValueError("fsdp_units and fsdp_wrap both cut the units: give one of them")
    return kind


def _add_parallel(request, gpus_per_node, nodes, bucket_cap_mb, catalog_instances,
                  disable_nvls=False, parallel=None, fsdp_units=None, fsdp_wrap=None) -> None:
    """PredictRequest.parallel and catalog_instances, as the CLI's --gpus N
    [--nodes M] [--bucket-mb B] [--no-nvls] [--parallel ddp|fsdp]
    [--fsdp-units U | --fsdp-wrap CLASS] and --instances set them."""
    kind = _parallel_kind(parallel, fsdp_units, fsdp_wrap)
    if not isinstance(catalog_instances, bool):
        raise ValueError(f"catalog_instances must be True or False, got {catalog_instances!r}")
    if not isinstance(disable_nvls, bool):
        raise ValueError(f"disable_nvls must be True or False, got {disable_nvls!r}")
    if gpus_per_node is not None:
        _check_int("gpus_per_node", gpus_per_node, MAX_GPUS_PER_NODE)
    if nodes is not None:
        _check_int("nodes", nodes, MAX_NODES)
    if bucket_cap_mb is not None:
        _check_int("bucket_cap_mb", bucket_cap_mb, MAX_BUCKET_CAP_MB)
    if gpus_per_node is None and (nodes is not None or bucket_cap_mb is not None
                                  or disable_nvls or parallel is not None):
        raise ValueError("nodes, bucket_cap_mb, disable_nvls and parallel describe a "
                         "data-parallel configuration: give gpus_per_node too")
    if gpus_per_node is not None:
        config = request.parallel.add()
        config.gpus_per_node = gpus_per_node
        if nodes is not None:
            config.nodes = nodes
        if bucket_cap_mb is not None:
            config.bucket_cap_bytes = bucket_cap_mb << 20
        config.disable_nvls = disable_nvls
        if kind == "fsdp":
            config.kind = type(config).KIND_FULLY_SHARDED
        if fsdp_units is not None:
            config.fsdp_units = fsdp_units
        if fsdp_wrap is not None:
            config.fsdp_wrap = fsdp_wrap
    request.catalog_instances = catalog_instances


def _traced_batch(batch_size: Optional[int], traced_batch_size: Optional[int]) -> Optional[int]:
    """The trace's own batch: traced_batch_size=, as the CLI's
    --traced-batch-size (its --batch-size is the batch to predict at, here
    at_batch_size=); batch_size=, its older name here, with a
    DeprecationWarning."""
    if batch_size is None:
        return traced_batch_size
    if traced_batch_size is not None:
        raise ValueError("give traced_batch_size alone (batch_size is its older name)")
    warnings.warn("batch_size= is the trace's own batch and is now spelled traced_batch_size= "
                  "(at_batch_size= predicts at another batch)", DeprecationWarning, stacklevel=3)
    return batch_size


def build_predict_request(trace=None, devices: Union[str, Sequence[str], None] = None,
                          catalog: Optional[str] = None, price_kind: Optional[str] = None,
                          batch_size: Optional[int] = None,
                          target_host_speed: Optional[float] = None,
                          include_breakdown: bool = False, trace_id: Optional[str] = None,
                          habitat_cli: Optional[str] = None,
                          max_trace_bytes: int = _traces.MAX_TRACE_BYTES,
                          at_batch_size: Optional[int] = None, fit: bool = False,
                          fit_batch_step: Optional[int] = None,
                          gpus_per_node: Optional[int] = None, nodes: Optional[int] = None,
                          bucket_cap_mb: Optional[int] = None,
                          catalog_instances: bool = False, disable_nvls: bool = False,
                          traced_batch_size: Optional[int] = None,
                          parallel: Optional[str] = None, fsdp_units: Optional[int] = None,
                          fsdp_wrap: Optional[str] = None):
    """The habitat.v1.PredictRequest message Client.predict sends; see there."""
    batch_size = _traced_batch(batch_size, traced_batch_size)
    PredictRequest = _messages.messages()["PredictRequest"]
    request = PredictRequest()
    if at_batch_size is not None:
        if not _is_batch(at_batch_size):
            raise ValueError(f"at_batch_size must be an integer within [1, "
                             f"{_traces.MAX_BATCH_SIZE}], got {at_batch_size!r}")
        request.batch_size = at_batch_size
    if not isinstance(fit, bool):
        raise ValueError(f"fit must be True or False, got {fit!r} (fit_batch_step= sets "
                         "the batches it chooses from)")
    if fit_batch_step is not None:
        if not fit:
            raise ValueError("fit_batch_step sets the batches a fit chooses from: pass fit=True "
                             "with it")
        if not _is_batch(fit_batch_step):
            raise ValueError(f"fit_batch_step must be an integer within [1, "
                             f"{_traces.MAX_BATCH_SIZE}], got {fit_batch_step!r}")
    if fit:
        # The server's rule: a fit chooses each GPU's batch.
        if at_batch_size is not None:
            raise ValueError("fit chooses each GPU's batch size: drop at_batch_size (or drop "
                             "fit to predict one batch)")
        request.fit.SetInParent()  # set even with step 0 (powers of two)
        request.fit.batch_step = fit_batch_step or 0
    _add_parallel(request, gpus_per_node, nodes, bucket_cap_mb, catalog_instances,
                  disable_nvls, parallel, fsdp_units, fsdp_wrap)
    if isinstance(devices, str):
        devices = [devices]
    if devices is not None:
        for device in devices:
            if not isinstance(device, str) or not device:
                raise ValueError(f"devices must be non-empty device ids, got {device!r}")
        request.devices.extend(devices)
    if catalog:
        request.catalog = catalog
    if price_kind is not None:
        kind = _PRICE_KINDS.get(str(price_kind).lower())
        if kind is None:
            raise ValueError(f"price_kind must be 'on_demand' or 'spot', got {price_kind!r}")
        request.price_kind = _messages.enum_value(PredictRequest, "price_kind", kind)
    if target_host_speed is not None:
        # The server's range (kMinTargetHostSpeed, kMaxTargetHostSpeed).
        if not (isinstance(target_host_speed, (int, float)) and math.isfinite(target_host_speed)
                and 0.01 <= target_host_speed <= 100):
            raise ValueError("target_host_speed must be within [0.01, 100], "
                             f"got {target_host_speed!r}")
        request.target_host_speed = float(target_host_speed)
    request.include_breakdown = bool(include_breakdown)
    if (trace is None) == (trace_id is None):
        raise ValueError("give exactly one of trace and trace_id")
    if trace_id is not None:
        if batch_size is not None:
            raise ValueError("batch_size applies to a trace, not to a stored trace_id")
        request.trace_id = trace_id
    else:
        # The trace is parsed and re-encoded rather than spliced in as bytes:
        # a bad file fails here with a clear message, and the batch size is
        # set on the message. It costs little (a 1.3 MB trace: 0.05 s with
        # the upb/C++ runtimes, 0.5 s with protobuf 3.20's pure Python one).
        request.trace.CopyFrom(_traces.load_trace(trace, batch_size, habitat_cli,
                                                  max_trace_bytes))
    return request


def _report_warnings(result: PredictionResult) -> None:
    """The server's warnings: the response's own through the warnings module
    (they concern the whole request), each device's through logging at INFO
    (they stay in the result and in format_table; one line per distinct
    warning with the GPUs it concerns)."""
    for text in result.warnings:
        warnings.warn(text, PredictionWarning, stacklevel=3)
    grouped: dict = {}
    for p in result.predictions:
        for text in p.warnings:
            grouped.setdefault(text, []).append(p.device_id)
    for text, devices in grouped.items():
        logger.info("%s: %s", ", ".join(devices), text)


class Client:
    """A connection to one habitat-server; reuse it for several calls.

    server: "host:port". token: sent as `authorization: Bearer <token>`
    (default: $HABITAT_TOKEN). tls: verify the server against the system's
    CAs, or against tls_ca (a PEM file; implies TLS); tls_cert/tls_key: a
    client certificate for servers that require one; tls_server_name: the
    name the server's certificate must carry when `server` is an IP.
    timeout_s: for a whole call, retries included. UNAVAILABLE is retried
    by gRPC's own retry policy (the channel's service config), max_attempts
    (1 to 5) in all, every RPC of the service being idempotent. habitat_cli: the `habitat`
    CLI that converts torch.profiler JSON traces (default: $HABITAT_CLI, or
    `habitat` on PATH).
    """

    def __init__(self, server: str, token: Optional[str] = None, tls: bool = False,
                 tls_ca: Optional[str] = None, tls_cert: Optional[str] = None,
                 tls_key: Optional[str] = None, tls_server_name: Optional[str] = None,
                 timeout_s: float = 60.0, max_attempts: int = 3, max_message_mb: int = 64,
                 habitat_cli: Optional[str] = None):
        grpc = _messages.check_dependencies()
        self._grpc = grpc
        if not server or not isinstance(server, str):
            raise ValueError("server must be 'host:port' (habitat-server's --address)")
        if not timeout_s > 0:
            raise ValueError(f"timeout_s must be > 0, got {timeout_s!r}")
        if isinstance(max_attempts, bool) or not isinstance(max_attempts, int) \
                or not 1 <= max_attempts <= MAX_ATTEMPTS:
            raise ValueError(f"max_attempts must be 1 to {MAX_ATTEMPTS} (gRPC's limit), "
                             f"got {max_attempts!r}")
        self.server = server
        self.timeout_s = timeout_s
        self.max_attempts = max_attempts
        self.habitat_cli = habitat_cli
        self._max_message_bytes = max_message_mb << 20
        if token is None:
            token = os.environ.get("HABITAT_TOKEN") or None
        if token is not None:
            token = token.strip()
            if not token:
                raise ValueError("token is empty")
        self._metadata = (("authorization", f"Bearer {token}"),) if token else None
        options = [("grpc.max_send_message_length", max_message_mb << 20),
                   ("grpc.max_receive_message_length", max_message_mb << 20),
                   ("grpc.enable_retries", 1),
                   ("grpc.service_config_disable_resolution", 1),
                   ("grpc.service_config", retry_service_config(max_attempts))]
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
        self._messages = _messages.messages()

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _call(self, method: str, request, response_type: str):
        grpc = self._grpc
        callable_ = self._channel.unary_unary(
            f"/{_SERVICE}/{method}",
            request_serializer=type(request).SerializeToString,
            response_deserializer=self._messages[response_type].FromString)
        started = time.monotonic()
        try:
            response = callable_(request, timeout=self.timeout_s, metadata=self._metadata)
        except grpc.RpcError as e:
            code = e.code() if hasattr(e, "code") else None
            name = code.name if code is not None else "UNKNOWN"
            details = e.details() if hasattr(e, "details") else str(e)
            if code == grpc.StatusCode.UNAVAILABLE:
                details = f"{details} (up to {self.max_attempts} attempts)"
            raise ServiceError(name, details or "", self.server, method) from None
        logger.debug("%s on %s: %.3f s", method, self.server, time.monotonic() - started)
        return response

    def predict_message(self, trace=None, devices: Union[str, Sequence[str], None] = None,
                        catalog: Optional[str] = None, price_kind: Optional[str] = None,
                        batch_size: Optional[int] = None,
                        target_host_speed: Optional[float] = None,
                        include_breakdown: bool = False, trace_id: Optional[str] = None,
                        at_batch_size: Optional[int] = None, fit: bool = False,
                        fit_batch_step: Optional[int] = None,
                        gpus_per_node: Optional[int] = None, nodes: Optional[int] = None,
                        bucket_cap_mb: Optional[int] = None, catalog_instances: bool = False,
                        disable_nvls: bool = False, traced_batch_size: Optional[int] = None,
                        parallel: Optional[str] = None, fsdp_units: Optional[int] = None,
                        fsdp_wrap: Optional[str] = None):
        """As predict, returning the habitat.v1.PredictResponse message."""
        request = build_predict_request(
            trace, devices=devices, catalog=catalog, price_kind=price_kind,
            batch_size=batch_size, target_host_speed=target_host_speed,
            include_breakdown=include_breakdown, trace_id=trace_id,
            habitat_cli=self.habitat_cli, max_trace_bytes=self._max_message_bytes,
            at_batch_size=at_batch_size, fit=fit, fit_batch_step=fit_batch_step,
            gpus_per_node=gpus_per_node, nodes=nodes, bucket_cap_mb=bucket_cap_mb,
            catalog_instances=catalog_instances, disable_nvls=disable_nvls,
            traced_batch_size=traced_batch_size, parallel=parallel, fsdp_units=fsdp_units,
            fsdp_wrap=fsdp_wrap)
        return self._call("Predict", request, "PredictResponse")

    def predict(self, trace=None, devices: Union[str, Sequence[str], None] = None,
                catalog: Optional[str] = None, price_kind: Optional[str] = None,
                batch_size: Optional[int] = None, target_host_speed: Optional[float] = None,
                include_breakdown: bool = False,
                trace_id: Optional[str] = None,
                at_batch_size: Optional[int] = None, fit: bool = False,
                fit_batch_step: Optional[int] = None,
                gpus_per_node: Optional[int] = None, nodes: Optional[int] = None,
                bucket_cap_mb: Optional[int] = None,
                catalog_instances: bool = False,
                disable_nvls: bool = False,
                traced_batch_size: Optional[int] = None,
                parallel: Optional[str] = None,
                fsdp_units: Optional[int] = None,
                fsdp_wrap: Optional[str] = None) -> PredictionResult:
        """Predicts one iteration of `trace` or of an uploaded `trace_id` on
        `devices` (ids from list_devices; None: every listed GPU).

        trace: a habitat trace file's path or bytes (gzip or not), a
        habitat_agent.Trace from the agent, a Trace message, or a torch.profiler
        JSON trace (path or bytes, gzip or not), which the `habitat` CLI
        converts (see the Client's habitat_cli; without a CLI it is refused
        with a KinetoConversionError saying how to convert it).
        catalog: a server-side price catalog ("aws", ...; default: the
        server's default catalog; "none": no prices); price_kind:
        "on_demand" (default) or "spot"; traced_batch_size: the trace's
        batch size where it records none (a torch.profiler trace), as the
        CLI's --traced-batch-size (batch_size=, its older name, still works
        with a DeprecationWarning); target_host_speed:
        how fast the targets' CPUs run the host code relative to the
        origin's (wall-time predictions only); at_batch_size: predict at this
        batch instead of the trace's (the server scales the trace, 1/256 to
        256 times its batch, and says so in a warning).
        fit: predict each GPU at the largest batch whose predicted peak
        memory fits it (`habitat predict --fit`): each DevicePrediction's
        batch_size is its own, the result's batch_size is 0 (is_fit), and
        GPUs that no batch fits are unranked (ranks 0; ranked() lists them
        last; ranked(by="cost") compares the GPUs at the batch each can
        hold). Needs a trace with memory data (the habitat agent records
        it); excludes at_batch_size (ValueError, as the server refuses it).
        fit_batch_step: with fit, the batches are multiples of this step
        (1 to 2**30) instead of powers of two; within 1/256 to 256 times the
        trace's batch either way. Without fit it is a ValueError.
        Each DevicePrediction's memory (a MemoryPrediction: predicted peak,
        its expected error, usable bytes, fits, largest fitting batch) is
        there with or without fit where the trace has memory data, else
        None.
        gpus_per_node: also predict a data-parallel step (PyTorch DDP over
        NCCL; `habitat predict --gpus N`) on that many GPUs (1 to 64) of each
        kind in one node, each GPU at its batch above; nodes (1 to 4096;
        `--nodes M`): on that many such nodes (the network from the
        catalog's instance); bucket_cap_mb (1 to 2**20; `--bucket-mb B`):
        DDP's bucket_cap_mb (default 25); disable_nvls (`--no-nvls`): the
        all-reduces without NVLink SHARP (as NCCL_NVLS_ENABLE=0; by default
        NVLS where the node has it and it is faster, as NCCL does);
        parallel="fsdp" (`--parallel fsdp`): PyTorch FSDP2 instead of DDP,
        with the predicted peak memory per GPU, its parameters cut into
        fsdp_units units of about equal bytes (`--fsdp-units U`, 1 to 4096)
        or one per instance of the module class fsdp_wrap (`--fsdp-wrap
        CLASS`, a trace the agent took with OperationTracker(model=...));
        by default such a trace per repeated block, any other in 16. nodes,
        bucket_cap_mb, disable_nvls or parallel without gpus_per_node is a
        ValueError. catalog_instances (`--instances`):
        also predict one node of every multi-GPU instance type the catalog
        offers each GPU in. The steps are in each DevicePrediction's
        `parallel` (ParallelPrediction: step, exposed communication,
        scaling efficiency, samples/s, instance and its price per
        node-hour, or `unavailable` with the reason: no interconnect data,
        more GPUs than a node holds, no network figure), the configuration
        first, then the instance types; format_table prints them and
        PredictionResult.parallel_to_pandas tabulates them.

        Returns a PredictionResult. The server's warnings are in it, and are
        also reported: the response's own through warnings.warn
        (PredictionWarning), each device's through the logger
        "habitat_client" at INFO."""
        result = PredictionResult.from_message(self.predict_message(
            trace, devices=devices, catalog=catalog, price_kind=price_kind,
            batch_size=batch_size, target_host_speed=target_host_speed,
            include_breakdown=include_breakdown, trace_id=trace_id,
            at_batch_size=at_batch_size, fit=fit, fit_batch_step=fit_batch_step,
            gpus_per_node=gpus_per_node, nodes=nodes, bucket_cap_mb=bucket_cap_mb,
            catalog_instances=catalog_instances, disable_nvls=disable_nvls,
            traced_batch_size=traced_batch_size, parallel=parallel, fsdp_units=fsdp_units,
            fsdp_wrap=fsdp_wrap))
        _report_warnings(result)
        return result

    def upload(self, trace, batch_size: Optional[int] = None,
               traced_batch_size: Optional[int] = None) -> str:
        """Stores `trace` (as for predict, traced_batch_size too) on the
        server; returns its id ("sha256:...") for predict(trace_id=...)."""
        batch_size = _traced_batch(batch_size, traced_batch_size)
        request = self._messages["UploadTraceRequest"]()
        request.trace.CopyFrom(_traces.load_trace(trace, batch_size, self.habitat_cli,
                                                  self._max_message_bytes))
        return self._call("UploadTrace", request, "UploadTraceResponse").trace_id

    def list_devices(self, include_test_only: bool = False) -> list:
        """The GPUs the server predicts for, as dicts (DeviceSpec fields,
        every field the descriptor has: `interconnect`, a dict, where the
        server knows how the GPUs of a node reach each other)."""
        request = self._messages["ListDevicesRequest"](include_test_only=include_test_only)
        response = self._call("ListDevices", request, "ListDevicesResponse")
        return _messages.to_dict(response)["devices"]

    def list_catalogs(self) -> list:
        """The server's price catalogs, as dicts (PriceCatalog fields; each
        GpuPrice's network_gbps and network_source among them)."""
        request = self._messages["ListCatalogsRequest"]()
        response = self._call("ListCatalogs", request, "ListCatalogsResponse")
        return _messages.to_dict(response)["catalogs"]


CONNECTION_ARGS = ("token", "tls", "tls_ca", "tls_cert", "tls_key", "tls_server_name",
                   "timeout_s", "max_attempts", "max_message_mb", "habitat_cli")


def split_connection_args(kwargs: dict):
    """(the Client's arguments, the call's arguments) of `kwargs`."""
    connection = {k: v for k, v in kwargs.items() if k in CONNECTION_ARGS}
    call = {k: v for k, v in kwargs.items() if k not in CONNECTION_ARGS}
    return connection, call


def predict(trace=None, server: str = "", **kwargs) -> PredictionResult:
    """One-shot Client(server, ...).predict(trace, ...); see both."""
    connection, call = split_connection_args(kwargs)
    with Client(server, **connection) as client:
        return client.predict(trace, **call)


def upload(trace, server: str = "", **kwargs) -> str:
    connection, call = split_connection_args(kwargs)
    with Client(server, **connection) as client:
        return client.upload(trace, **call)


def list_devices(server: str = "", **kwargs) -> list:
    connection, call = split_connection_args(kwargs)
    with Client(server, **connection) as client:
        return client.list_devices(**call)


def list_catalogs(server: str = "", **kwargs) -> list:
    connection, call = split_connection_args(kwargs)
    with Client(server, **connection) as client:
        return client.list_catalogs(**call)
