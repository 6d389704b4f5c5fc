"""habitat-client: the Python client of habitat-server (habitat.v1.PredictionService).

Needs only `grpcio` and `protobuf` (any protobuf 3.20 to 7.x runtime), not
torch and not the protobuf/gRPC C++ libraries, so it runs on the training
machine next to the agent, or anywhere else:

    import habitat_client
    result = habitat_client.predict("resnet50.trace.gz", server="HOST:50051",
                                    devices=["H200", "A100-SXM-80GB"], catalog="aws")
    print(result.format_table())
    print(result.format_warnings())        # one line per kind; explain=True: in full
    h200 = result.device("H200")
    print(h200.gpu_time_ns, h200.wall_time_ns, h200.instance_type)
    df = result.to_pandas()                # needs pandas
    result.plot("price.svg")               # throughput against price; needs matplotlib

`predict` takes a habitat trace (path or bytes, gzip or not) or a
torch.profiler JSON trace, which the `habitat` CLI converts (the server
accepts only habitat traces; see Client). Results are dataclasses
(PredictionResult, DevicePrediction, ...). The server's warnings are in
them (structured_warnings: one per kind, with the GPUs it concerns) and
are reported through `warnings` (the response's) and `logging` (logger
"habitat_client", each GPU's); nothing is printed.

The message classes are built at run time from habitat_v1.desc, the
descriptor set of proto/habitat/v1 shipped in this package, so no protoc
and no generated code are needed. Importing this package imports neither
grpc nor protobuf; the first call that needs them does.
"""

from ._client import (CONNECTION_ARGS, Client, PredictionWarning, ServiceError,
                      build_predict_request, list_catalogs, list_devices, predict,
                      split_connection_args, upload)
from ._messages import DESCRIPTOR_FILE, check_dependencies, messages, to_dict
from ._results import (DevicePrediction, MemoryPrediction, MethodTotal, OperationPrediction,
                       ParallelPrediction, PredictionResult, StructuredWarning, WarningDetail)
from ._table import format_table, format_warnings
from ._traces import (MAX_TRACE_BYTES, KinetoConversionError, convert_kineto,
                      find_habitat_cli, load_trace, read_trace, trace_bytes)

__version__ = "0.1.0"

__all__ = [
    "CONNECTION_ARGS", "Client", "DESCRIPTOR_FILE", "DevicePrediction", "KinetoConversionError",
    "MAX_TRACE_BYTES", "MemoryPrediction", "MethodTotal", "OperationPrediction",
    "ParallelPrediction", "PredictionResult", "PredictionWarning", "ServiceError",
    "StructuredWarning", "WarningDetail", "build_predict_request", "check_dependencies",
    "convert_kineto", "find_habitat_cli", "format_table", "format_warnings", "list_catalogs",
    "list_devices",
    "load_trace", "messages", "predict", "read_trace", "split_connection_args", "to_dict",
    "trace_bytes", "upload",
]
