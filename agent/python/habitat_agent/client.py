"""habitat_agent.client: the agent's name for the habitat-client package.

The client lives in the habitat-client distribution (import habitat_client;
client/python in the repository), which the agent depends on. This module
re-exports it so code written against habitat_agent.client keeps working, with
the one difference that kept its contract: predict() and Client.predict()
here return the PredictResponse as a dict (proto field names, int64 as
int, enums by name), as they always did. New code: habitat_client, whose
predict returns typed results (PredictionResult).

    from habitat_agent import client
    response = client.predict("resnet50.trace.gz", server="HOST:50051",
                              devices=["H100-SXM", "A100-SXM-40GB"])
    print(client.format_table(response))
    print(client.format_warnings(response))  # one line per kind of warning
"""

import importlib.util
import os
import sys

if importlib.util.find_spec("habitat_client") is None:
    # Run from a source checkout without installing (PYTHONPATH=agent/python,
    # as the tests and the README's build do): the package is in client/python.
    _source = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                           "..", "..", "..", "client", "python"))
    if not os.path.isfile(os.path.join(_source, "habitat_client", "__init__.py")):
        raise ImportError("habitat_agent.client needs the habitat-client package: "
                          "`pip install ./client/python` from the habitat repository")
    sys.path.append(_source)

import habitat_client as _client  # noqa: E402
from habitat_client import (  # noqa: E402,F401
    DESCRIPTOR_FILE, DevicePrediction, KinetoConversionError, MethodTotal, OperationPrediction,
    PredictionResult, PredictionWarning, ServiceError, check_dependencies, convert_kineto,
    format_table, format_warnings, list_catalogs, list_devices, messages, to_dict, trace_bytes,
    upload)

# The name the agent's tracker used before the split.
_import_grpc = check_dependencies


class Client(_client.Client):
    """habitat_client.Client whose predict returns the response as a dict."""

    def predict(self, *args, **kwargs) -> dict:
        return to_dict(self.predict_message(*args, **kwargs))


def predict(trace=None, server: str = "", **kwargs) -> dict:
    """habitat_client.predict, returning the PredictResponse as a dict."""
    connection, call = _client.split_connection_args(kwargs)
    with Client(server, **connection) as client:
        return client.predict(trace, **call)
