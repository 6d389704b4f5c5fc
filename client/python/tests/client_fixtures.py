"""What the habitat_client unit tests share: where the package and the
committed traces are, which optional modules are importable, and sample
PredictResponse messages built as a server would send them."""

import contextlib
import gzip
import json
import os
import sys
import tempfile
import unittest
import warnings
from unittest import mock

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE_ROOT = os.path.dirname(HERE)
SOURCE = os.path.abspath(os.path.join(PACKAGE_ROOT, "..", ".."))
sys.path.insert(0, PACKAGE_ROOT)

import habitat_client  # noqa: E402
from habitat_client import _results, _table, _traces  # noqa: E402

TESTDATA = os.path.join(SOURCE, "tests", "testdata")
TRACE_GZ = os.path.join(TESTDATA, "agent", "h100", "smallcnn_b8_fp32.trace.gz")
KINETO_GZ = os.path.join(TESTDATA, "kineto", "h100", "resnet50_b64_fp32.json.gz")


def _importable(*names):
    try:
        for name in names:
            __import__(name)
        return True
    except ImportError:
        return False


HAVE_PROTOBUF = _importable("google.protobuf")
HAVE_GRPC = HAVE_PROTOBUF and _importable("grpc")
needs_protobuf = unittest.skipUnless(HAVE_PROTOBUF, "protobuf not importable here")
needs_grpc = unittest.skipUnless(HAVE_GRPC, "grpcio not importable here")


def raw_trace() -> bytes:
    with gzip.open(TRACE_GZ, "rb") as f:
        return f.read()


@contextlib.contextmanager
def no_habitat_cli():
    """Neither $HABITAT_CLI nor a `habitat` on PATH."""
    env = {k: v for k, v in os.environ.items() if k != "HABITAT_CLI"}
    with tempfile.TemporaryDirectory() as empty:
        env["PATH"] = empty
        with mock.patch.dict(os.environ, env, clear=True):
            yield


def device_prediction(messages, device_id, rank, gpu_ms, priced=True, warnings_=(),
                      origin=False, batch_size=8, memory=None):
    p = messages["DevicePrediction"](
        device_id=device_id, display_name=device_id + " GPU", iteration_ns=gpu_ms * 10**6,
        gpu_time_ns=gpu_ms * 10**6, wall_time_ns=(gpu_ms + 2) * 10**6, wall_ns=(gpu_ms + 2) * 10**6,
        gpu_busy_ns=gpu_ms * 10**6, samples_per_second=1000.0 / (gpu_ms + 2),
        has_price=priced, price_per_hour=4.5 if priced else 0.0,
        cost_per_1000_samples=0.01 if priced else 0.0, rank_by_time=rank,
        rank_by_cost=rank if priced else 0, is_origin=origin,
        expected_error_percent=0.0 if origin else 7.5,
        instance_type="p5.48xlarge" if priced else "", gpus_per_instance=8 if priced else 0,
        batch_size=batch_size)
    if memory is not None:  # a dict of MemoryPrediction fields
        p.memory.CopyFrom(messages["MemoryPrediction"](**memory))
    p.warnings.extend(warnings_)
    method = "PREDICTION_METHOD_MEASURED" if origin else "PREDICTION_METHOD_MLP"
    number = messages["MethodTotal"].DESCRIPTOR.fields_by_name["method"] \
        .enum_type.values_by_name[method].number
    p.method_totals.add(method=number, operations=3, predicted_ns=gpu_ms * 10**6)
    p.operations.add(index=0, name="aten::conv2d", predicted_forward_ns=10**6, method=number,
                     origin_math_mode="tf32", target_math_mode="fp32", warnings=["slow"])
    return p


def sample_response():
    messages = habitat_client.messages()
    response = messages["PredictResponse"](
        trace_id="sha256:" + "0" * 64, origin_device_id="H100-SXM", catalog="aws",
        currency="USD", batch_size=8, warnings=["the trace has no host timeline"])
    response.price_kind = response.DESCRIPTOR.fields_by_name["price_kind"] \
        .enum_type.values_by_name["PRICE_KIND_SPOT"].number
    # Not in rank order, as a server may send them.
    response.predictions.extend([
        device_prediction(messages, "T4", 3, 40, priced=False, warnings_=["old GPU"]),
        device_prediction(messages, "H200", 1, 9, warnings_=["old GPU"]),
        device_prediction(messages, "H100-SXM", 2, 10, origin=True),
    ])
    return response


GIB = 1 << 30


def fit_response():
    """A fit's response (batch_size 0): each GPU at its largest fitting
    batch; L4 fits none (unranked), T4 has no price (no cost rank)."""
    messages = habitat_client.messages()
    response = messages["PredictResponse"](
        trace_id="sha256:" + "1" * 64, origin_device_id="H100-SXM", catalog="aws",
        currency="USD", batch_size=0, traced_batch_size=32)

    def memory(peak_gib, usable_gib, fits, largest):
        return dict(peak_allocated_bytes=peak_gib * GIB, expected_error_percent=4.0,
                    usable_bytes=usable_gib * GIB, fits=fits, largest_fitting_batch=largest)

    h100 = device_prediction(messages, "H100-SXM", 2, 10, origin=True, batch_size=256,
                             memory=memory(70, 79, True, 256))
    h200 = device_prediction(messages, "H200", 1, 9, batch_size=512,
                             memory=memory(130, 139, True, 512))
    h200.rank_by_cost = 2
    h100.rank_by_cost = 1
    t4 = device_prediction(messages, "T4", 3, 40, priced=False, batch_size=32,
                           memory=memory(14, 15, True, 32))
    l4 = device_prediction(messages, "L4", 0, 30, batch_size=16,
                           memory=memory(30, 22, False, 0))
    l4.rank_by_cost = 0
    response.predictions.extend([l4, t4, h200, h100])
    return response


def parallel_response():
    """sample_response with data-parallel steps of 8 GPUs x 2 nodes:
    H200's priced on its instance, H100-SXM's (one node, NVLS) on an
    unpriced instance whose name is truncated, T4's unavailable (no
    interconnect data)."""
    message = sample_response()
    by_id = {p.device_id: p for p in message.predictions}
    by_id["H200"].parallel.add(
        gpus_per_node=8, nodes=2, step_ns=12_345_678, exposed_communication_ns=1_345_678,
        scaling_efficiency=0.891, samples_per_second=10370.4, instance_type="p5e.48xlarge",
        has_price=True, price_per_node_hour=43.26, cost_per_1000_samples=0.0123456, buckets=4,
        expected_error_percent=10.04)
    by_id["H200"].parallel.add(gpus_per_node=16, nodes=1,
                               unavailable="H200 nodes hold at most 8 GPUs")
    by_id["H100-SXM"].parallel.add(
        gpus_per_node=8, nodes=1, step_ns=13_000_000, exposed_communication_ns=500_000,
        scaling_efficiency=0.9, samples_per_second=9846.15,
        instance_type="a-very-long-instance-type-name.xl", buckets=4, nvls=True)
    by_id["T4"].parallel.add(gpus_per_node=8, nodes=2,
                             unavailable="T4: no interconnect data\x07")
    by_id["T4"].parallel.add(
        gpus_per_node=4, nodes=1, step_ns=20_000_000, exposed_communication_ns=4_000_000,
        scaling_efficiency=0.8, samples_per_second=800.0, buckets=4,
        expected_error_percent=25.0, bandwidth_range=True)
    return message
