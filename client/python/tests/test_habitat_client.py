"""Unit tests of habitat_client that need no server, no torch and no network.

    python3 -m unittest discover -s client/python/tests -p 'test_*.py' -v

Needs protobuf for most tests (grpcio for the Client ones); without them
those are skipped. Run by CTest (python_client_unit_test). With
$HABITAT_CLI (the `habitat` binary) a committed torch.profiler trace is
converted for real.
"""

import contextlib
import dataclasses
import gzip
import io
import json
import logging
import os
import re
import stat
import subprocess
import sys
import tempfile
import types
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


class ImportTest(unittest.TestCase):
    def test_import_loads_no_torch_grpc_or_protobuf(self):
        # In a fresh interpreter: the package is importable where only the
        # trace-reading part can work (the gzip bomb test runs it so).
        check = ("import sys; import habitat_client; "
                 "bad = [m for m in ('torch', 'grpc', 'google.protobuf', 'habitat') "
                 "if m in sys.modules]; assert not bad, bad")
        env = dict(os.environ, PYTHONPATH=PACKAGE_ROOT)
        run = subprocess.run([sys.executable, "-c", check], env=env, capture_output=True,
                             text=True, timeout=60)
        self.assertEqual(run.returncode, 0, run.stderr)


class TraceReadingTest(unittest.TestCase):
    def test_raw_gzip_path_and_bytes_read_the_same(self):
        raw = raw_trace()
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "t.trace")
            with open(path, "wb") as f:
                f.write(raw)
            self.assertEqual(habitat_client.trace_bytes(path), raw)
        self.assertEqual(habitat_client.trace_bytes(TRACE_GZ), raw)
        with open(TRACE_GZ, "rb") as f:
            self.assertEqual(habitat_client.trace_bytes(f.read()), raw)
        self.assertEqual(habitat_client.trace_bytes(bytearray(raw)), raw)
        # Several gzip members, as `cat a.gz b.gz` makes.
        half = len(raw) // 2
        self.assertEqual(habitat_client.trace_bytes(gzip.compress(raw[:half])
                                                    + gzip.compress(raw[half:])), raw)

    def test_bad_input_gives_clear_errors(self):
        with self.assertRaisesRegex(ValueError, "cannot read trace file '/nonexistent"):
            habitat_client.trace_bytes("/nonexistent/x.trace")
        with self.assertRaisesRegex(ValueError, "is empty"):
            habitat_client.trace_bytes(b"  \n")
        with self.assertRaisesRegex(ValueError, "is empty"):
            habitat_client.trace_bytes(gzip.compress(b""))
        with self.assertRaisesRegex(TypeError, "trace must be a path, bytes"):
            habitat_client.trace_bytes(42)
        data = gzip.compress(raw_trace())
        with self.assertRaisesRegex(ValueError, "not valid gzip: the data ends early"):
            habitat_client.trace_bytes(data[:len(data) // 2])
        with self.assertRaisesRegex(ValueError, "not valid gzip: unexpected bytes"):
            habitat_client.trace_bytes(data + b"garbage")

    def test_gzip_bomb_refused_at_the_limit(self):
        bomb = gzip.compress(b"\0" * (1 << 20))
        with self.assertRaisesRegex(ValueError, "inflates to more than 65536 bytes"):
            habitat_client.trace_bytes(bomb, max_bytes=1 << 16)

    @needs_protobuf
    def test_not_a_trace(self):
        with self.assertRaisesRegex(ValueError, "not a habitat trace"):
            habitat_client.load_trace(b"\xff\xff\xff\xff")

    @needs_protobuf
    def test_batch_size(self):
        trace = habitat_client.load_trace(TRACE_GZ)
        self.assertEqual(trace.batch_size, 8)
        self.assertEqual(habitat_client.load_trace(TRACE_GZ, batch_size=8).batch_size, 8)
        with self.assertRaisesRegex(ValueError, "records batch size 8; batch_size=16") as e:
            habitat_client.load_trace(TRACE_GZ, batch_size=16)
        # Other batches are predicted: the message says how.
        self.assertIn("pass at_batch_size=16 to predict", str(e.exception))
        self.assertNotIn("does not predict", str(e.exception))
        for bad in (0, -1, True, "8", 1 << 31):
            with self.assertRaisesRegex(ValueError, "batch_size must be an integer"):
                habitat_client.load_trace(TRACE_GZ, batch_size=bad)
        trace.batch_size = 0  # a trace that records none gets the one given
        self.assertEqual(habitat_client.load_trace(trace, batch_size=4).batch_size, 4)
        self.assertEqual(trace.batch_size, 0, "the caller's message is left alone")


class KinetoTest(unittest.TestCase):
    JSON = b'{"schemaVersion": 1, "traceEvents": []}'

    def fake_cli(self, tmp, exit_code=0, batch_size=0):
        """A `habitat` stand-in: records its arguments and keeps its input,
        then writes a trace as import-kineto would (source "kineto-import")
        or fails."""
        out = os.path.join(tmp, "converted.bin")
        Trace = habitat_client.messages()["Trace"]
        with open(out, "wb") as f:
            f.write(Trace(source="kineto-import", model_name="fake",
                          batch_size=batch_size).SerializeToString())
        script = os.path.join(tmp, "habitat")
        with open(script, "w") as f:  # Python: the tests run it with an empty PATH
            f.write(f"#!{sys.executable}\nimport shutil, sys\n"
                    f"open({os.path.join(tmp, 'args')!r}, 'w').write(' '.join(sys.argv[1:]))\n"
                    f"shutil.copy(sys.argv[2], {os.path.join(tmp, 'input')!r})\n"
                    f"if {exit_code}:\n"
                    f"    sys.exit('bad trace: no kernels')\n"
                    f"shutil.copy({out!r}, sys.argv[3])\n")
        os.chmod(script, os.stat(script).st_mode | stat.S_IXUSR)
        return script

    def test_json_without_a_cli_is_refused_with_the_way_out(self):
        with no_habitat_cli():
            for trace in (self.JSON, gzip.compress(self.JSON)):
                with self.assertRaises(habitat_client.KinetoConversionError) as raised:
                    habitat_client.trace_bytes(trace)
                message = str(raised.exception)
                self.assertIn("torch.profiler (Kineto) JSON trace", message)
                self.assertIn("habitat import-kineto", message)
                self.assertIn("habitat_cli=", message)
            # A ValueError, as the client raised for JSON before it converted.
            self.assertTrue(issubclass(habitat_client.KinetoConversionError, ValueError))

    def test_json_with_a_byte_order_mark_is_json(self):
        bom = b"\xef\xbb\xbf"
        with no_habitat_cli():
            for trace in (bom + self.JSON, gzip.compress(bom + b"\n" * 5000 + self.JSON)):
                with self.assertRaises(habitat_client.KinetoConversionError):
                    habitat_client.trace_bytes(trace)
        self.assertFalse(_traces.is_json(bom + b" \n"))

    def test_not_an_executable(self):
        with self.assertRaisesRegex(habitat_client.KinetoConversionError,
                                    "not an executable file"):
            habitat_client.trace_bytes(self.JSON, habitat_cli="/nonexistent/habitat")

    @needs_protobuf
    def test_converted_by_the_cli(self):
        with tempfile.TemporaryDirectory() as tmp, no_habitat_cli():
            cli = self.fake_cli(tmp)
            trace = habitat_client.load_trace(gzip.compress(self.JSON), batch_size=12,
                                              habitat_cli=cli)
            self.assertEqual((trace.source, trace.model_name, trace.batch_size),
                             ("kineto-import", "fake", 12))
            with open(os.path.join(tmp, "args")) as f:
                args = f.read().split()
            self.assertEqual(args[0], "import-kineto")
            self.assertEqual(args[3:], ["--traced-batch-size", "12"])
            # $HABITAT_CLI is the default.
            with mock.patch.dict(os.environ, {"HABITAT_CLI": cli}):
                self.assertEqual(habitat_client.load_trace(self.JSON, batch_size=3).batch_size, 3)

    @needs_protobuf
    def test_large_json_goes_to_the_importer_unbounded_here(self):
        # JSON inflates to far more than the trace it becomes: the 64 MiB
        # trace bound (here 1 KiB) is not applied to it; the importer's is.
        big = b"\n" * 5000 + b'{"traceEvents": [' + b'{"ph": "X"},' * 10000 + b'{}]}'
        with tempfile.TemporaryDirectory() as tmp:
            cli = self.fake_cli(tmp)
            trace = habitat_client.load_trace(gzip.compress(big), batch_size=2,
                                              habitat_cli=cli, max_bytes=1024)
            self.assertEqual(trace.source, "kineto-import")
            with gzip.open(os.path.join(tmp, "input"), "rb") as f:  # passed on as given
                self.assertEqual(f.read(), big)
        # A binary trace is still bounded.
        with self.assertRaisesRegex(ValueError, "inflates to more than 1024 bytes"):
            habitat_client.trace_bytes(gzip.compress(raw_trace()), max_bytes=1024)

    @needs_protobuf
    def test_kineto_trace_without_shapes_needs_a_batch_size(self):
        with tempfile.TemporaryDirectory() as tmp:
            cli = self.fake_cli(tmp)
            with self.assertRaisesRegex(ValueError, "does not show its batch size.*pass traced_batch_size"):
                habitat_client.load_trace(self.JSON, habitat_cli=cli)

    def test_cli_refusal_carries_its_message(self):
        if not HAVE_PROTOBUF:
            self.skipTest("protobuf not importable here")
        with tempfile.TemporaryDirectory() as tmp:
            cli = self.fake_cli(tmp, exit_code=1)
            with self.assertRaisesRegex(habitat_client.KinetoConversionError,
                                        "refused trace bytes.*bad trace: no kernels"):
                habitat_client.trace_bytes(self.JSON, habitat_cli=cli)

    @needs_protobuf
    def test_real_cli_converts_a_committed_profile(self):
        cli = os.environ.get("HABITAT_CLI")
        if not cli or not os.access(cli, os.X_OK):
            self.skipTest("HABITAT_CLI (the habitat binary) not set")
        trace = habitat_client.load_trace(KINETO_GZ, batch_size=64, habitat_cli=cli)
        self.assertEqual(trace.source, "kineto-import")
        self.assertEqual(trace.batch_size, 64)
        self.assertEqual(trace.model_name, "resnet50_b64_fp32")  # the file's stem
        self.assertGreater(len(trace.operations), 100)
        # Without batch_size the importer infers it from the layers' input
        # shapes and says so through the logger.
        with self.assertLogs("habitat_client", level="WARNING") as logs:
            inferred = habitat_client.load_trace(KINETO_GZ, habitat_cli=cli)
        self.assertEqual(inferred.batch_size, 64)
        self.assertTrue(any("batch size 64 inferred" in line for line in logs.output), logs.output)
        # Each note whole, though the CLI wraps it; no note about the
        # flag's spelling (the client passes --traced-batch-size).
        self.assertTrue(any(line.rstrip().endswith("--traced-batch-size N sets another")
                            for line in logs.output), logs.output)
        with self.assertLogs("habitat_client", level="WARNING") as logs:
            habitat_client.load_trace(KINETO_GZ, batch_size=64, habitat_cli=cli)
        self.assertFalse(any("now spelled" in line for line in logs.output), logs.output)

    def test_notes_are_joined_again(self):
        notes = habitat_client._traces._notes(
            "note: batch size 8 inferred from the\n  leading dimension\n"
            "wrote x.trace\n  not a note\nnote: precision fp32\n")
        self.assertEqual(notes, ["batch size 8 inferred from the leading dimension",
                                 "precision fp32"])


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


@needs_protobuf
class ResultsTest(unittest.TestCase):
    def test_dataclasses_mirror_the_proto(self):
        messages = habitat_client.messages()
        for cls, name in ((habitat_client.PredictionResult, "PredictResponse"),
                          (habitat_client.DevicePrediction, "DevicePrediction"),
                          (habitat_client.OperationPrediction, "OperationPrediction"),
                          (habitat_client.MethodTotal, "MethodTotal"),
                          (habitat_client.MemoryPrediction, "MemoryPrediction"),
                          (habitat_client.ParallelPrediction, "ParallelPrediction"),
                          (habitat_client.StructuredWarning, "Warning"),
                          (habitat_client.WarningDetail, "WarningDetail")):
            proto = {f.name for f in messages[name].DESCRIPTOR.fields}
            ours = {f.name for f in dataclasses.fields(cls) if f.metadata.get("proto", True)}
            self.assertEqual(ours, proto - _results.OMITTED_FIELDS.get(name, set()), name)

    def test_typed_fields(self):
        message = sample_response()
        result = habitat_client.PredictionResult.from_message(message)
        self.assertIs(result.message, message)
        self.assertEqual(result.price_kind, "PRICE_KIND_SPOT")
        self.assertEqual(result.warnings, ("the trace has no host timeline",))
        self.assertEqual([p.device_id for p in result.ranked()], ["H200", "H100-SXM", "T4"])
        h200 = result.device("H200")
        self.assertIsInstance(h200, habitat_client.DevicePrediction)
        self.assertEqual((h200.gpu_time_ns, h200.wall_time_ns, h200.wall_time_is_gpu_time),
                         (9 * 10**6, 11 * 10**6, False))
        self.assertEqual((h200.instance_type, h200.gpus_per_instance, h200.price_per_hour),
                         ("p5.48xlarge", 8, 4.5))
        self.assertEqual((h200.rank_by_time, h200.rank_by_cost), (1, 1))
        self.assertEqual(h200.method_totals[0],
                         habitat_client.MethodTotal("PREDICTION_METHOD_MLP", 3, 9 * 10**6, 0))
        self.assertEqual(h200.operations[0].warnings, ("slow",))
        self.assertEqual(result.origin.device_id, "H100-SXM")
        with self.assertRaisesRegex(KeyError, "no prediction for device 'B200'"):
            result.device("B200")
        with self.assertRaises(dataclasses.FrozenInstanceError):
            h200.gpu_time_ns = 1

    def test_to_dict_and_table_match_the_message(self):
        message = sample_response()
        result = habitat_client.PredictionResult.from_message(message)
        plain = result.to_dict()
        json.dumps(plain)  # plain values only
        expected = habitat_client.to_dict(message)
        for p in expected["predictions"]:
            del p["iteration_ns"]  # deprecated: the same as gpu_time_ns
        self.assertEqual(plain, expected)
        self.assertEqual(habitat_client.format_table(result, breakdown=True),
                         habitat_client.format_table(habitat_client.to_dict(message),
                                                     breakdown=True))
        self.assertIn("p5.48xlarge/8", result.format_table())

    def test_to_pandas_without_pandas(self):
        result = habitat_client.PredictionResult.from_message(sample_response())
        with mock.patch.dict(sys.modules, {"pandas": None}):  # import pandas fails
            with self.assertRaisesRegex(ImportError, "needs pandas.*pip install pandas"):
                result.to_pandas()
            with self.assertRaisesRegex(ImportError, "needs pandas"):
                result.operations_to_pandas()

    def test_to_pandas_rows(self):
        captured = []
        fake = types.ModuleType("pandas")
        fake.DataFrame = lambda rows, columns: captured.append((rows, columns)) or "frame"
        result = habitat_client.PredictionResult.from_message(sample_response())
        with mock.patch.dict(sys.modules, {"pandas": fake}):
            self.assertEqual(result.to_pandas(), "frame")
            result.operations_to_pandas()
        rows, columns = captured[0]
        self.assertEqual([r["device_id"] for r in rows], ["H200", "H100-SXM", "T4"])
        for name in ("gpu_time_ns", "wall_time_ns", "wall_time_is_gpu_time", "price_per_hour",
                     "instance_type", "rank_by_time", "rank_by_cost", "warnings"):
            self.assertIn(name, columns)
        self.assertNotIn("operations", columns)
        self.assertEqual(rows[0]["warnings"], ["old GPU"])
        op_rows, op_columns = captured[1]
        self.assertEqual(op_columns[0], "device_id")
        self.assertEqual([r["device_id"] for r in op_rows], ["H200", "H100-SXM", "T4"])

    @unittest.skipUnless(_importable("pandas"), "pandas not installed")
    def test_to_pandas_real(self):
        frame = habitat_client.PredictionResult.from_message(sample_response()).to_pandas()
        self.assertEqual(list(frame["device_id"]), ["H200", "H100-SXM", "T4"])

    def test_memory_and_batch(self):
        result = habitat_client.PredictionResult.from_message(sample_response())
        self.assertFalse(result.is_fit)
        h200 = result.device("H200")
        self.assertEqual(h200.batch_size, 8)
        self.assertIsNone(h200.memory, "unset in the message: None")
        self.assertNotIn("memory", result.to_dict()["predictions"][0], "left out, as to_dict")
        row = h200.row()
        self.assertEqual({c: row[c] for c in _results.MEMORY_COLUMNS},
                         dict.fromkeys(_results.MEMORY_COLUMNS))

        message = fit_response()
        result = habitat_client.PredictionResult.from_message(message)
        self.assertTrue(result.is_fit)
        self.assertEqual(result.batch_size, 0)
        l4 = result.device("L4")
        self.assertEqual(l4.memory, habitat_client.MemoryPrediction(
            peak_allocated_bytes=30 * GIB, expected_error_percent=4.0, usable_bytes=22 * GIB,
            fits=False, largest_fitting_batch=0))
        self.assertEqual((l4.batch_size, result.device("H200").batch_size), (16, 512))
        with self.assertRaises(dataclasses.FrozenInstanceError):
            l4.memory.fits = True
        row = l4.row()
        self.assertEqual((row["memory_peak_allocated_bytes"], row["memory_usable_bytes"],
                          row["memory_fits"], row["memory_largest_fitting_batch"],
                          row["memory_expected_error_percent"]),
                         (30 * GIB, 22 * GIB, False, 0, 4.0))
        self.assertNotIn("memory", row)
        self.assertEqual(row["batch_size"], 16)
        # to_dict mirrors the message, the memory a nested dict.
        expected = habitat_client.to_dict(message)
        for p in expected["predictions"]:
            del p["iteration_ns"]
        self.assertEqual(result.to_dict(), expected)
        self.assertEqual(result.to_dict()["predictions"][0]["memory"]["fits"], False)
        json.dumps(result.to_dict())

    def test_parallel(self):
        message = parallel_response()
        result = habitat_client.PredictionResult.from_message(message)
        h200 = result.device("H200")
        self.assertEqual(h200.parallel, (
            habitat_client.ParallelPrediction(
                gpus_per_node=8, nodes=2, step_ns=12_345_678, exposed_communication_ns=1_345_678,
                scaling_efficiency=0.891, samples_per_second=10370.4,
                instance_type="p5e.48xlarge", has_price=True, price_per_node_hour=43.26,
                cost_per_1000_samples=0.0123456, buckets=4, unavailable="", nvls=False,
                expected_error_percent=10.04, bandwidth_range=False,
                kind="KIND_DATA_PARALLEL", fsdp_units=0, unsharded_in_flight_bytes=0,
                peak_memory_bytes_per_gpu=0),
            habitat_client.ParallelPrediction(
                gpus_per_node=16, nodes=1, step_ns=0, exposed_communication_ns=0,
                scaling_efficiency=0.0, samples_per_second=0.0, instance_type="",
                has_price=False, price_per_node_hour=0.0, cost_per_1000_samples=0.0,
                buckets=0, unavailable="H200 nodes hold at most 8 GPUs", nvls=False,
                expected_error_percent=0.0, bandwidth_range=False,
                kind="KIND_DATA_PARALLEL", fsdp_units=0, unsharded_in_flight_bytes=0,
                peak_memory_bytes_per_gpu=0)))
        self.assertTrue(result.device("H100-SXM").parallel[0].nvls)
        self.assertEqual(result.device("T4").parallel[0].unavailable,
                         "T4: no interconnect data\x07")
        self.assertTrue(result.device("T4").parallel[1].bandwidth_range)
        with self.assertRaises(dataclasses.FrozenInstanceError):
            h200.parallel[0].nodes = 1
        # Without parallel steps in the response: an empty tuple.
        self.assertEqual(habitat_client.PredictionResult.from_message(sample_response())
                         .device("H200").parallel, ())
        # to_dict mirrors the message, the steps a list of dicts.
        expected = habitat_client.to_dict(message)
        for p in expected["predictions"]:
            del p["iteration_ns"]
        self.assertEqual(result.to_dict(), expected)
        self.assertEqual(result.to_dict()["predictions"][1]["parallel"][0]["step_ns"],
                         12_345_678)
        json.dumps(result.to_dict())
        # One row per GPU: the steps are not in row() nor in to_pandas's columns.
        self.assertNotIn("parallel", h200.row())
        self.assertNotIn("parallel", _results._row_columns())
        self.assertEqual(set(h200.row()), set(_results._row_columns()))

    def test_device_prediction_positional_construction_keeps_working(self):
        values = [f.name for f in dataclasses.fields(habitat_client.DevicePrediction)]
        # Every field up to memory, positionally, as before `parallel`.
        head = values[:values.index("memory") + 1]
        p = habitat_client.DevicePrediction(*range(len(head)))
        self.assertEqual(p.parallel, ())

    def test_parallel_to_pandas(self):
        captured = []
        fake = types.ModuleType("pandas")
        fake.DataFrame = lambda rows, columns: captured.append((rows, columns)) or "frame"
        result = habitat_client.PredictionResult.from_message(parallel_response())
        with mock.patch.dict(sys.modules, {"pandas": fake}):
            self.assertEqual(result.parallel_to_pandas(), "frame")
            habitat_client.PredictionResult.from_message(sample_response()).parallel_to_pandas()
        rows, columns = captured[0]
        self.assertEqual(columns[:2], ["device_id", "batch_size"])
        self.assertEqual(columns[2:], [f.name for f in
                                       dataclasses.fields(habitat_client.ParallelPrediction)])
        # One row per GPU and configuration, GPUs in rank order.
        self.assertEqual([(r["device_id"], r["gpus_per_node"], r["nodes"]) for r in rows],
                         [("H200", 8, 2), ("H200", 16, 1), ("H100-SXM", 8, 1), ("T4", 8, 2),
                          ("T4", 4, 1)])
        self.assertEqual([set(r) for r in rows], [set(columns)] * 5)
        self.assertEqual(rows[0]["batch_size"], 8)
        self.assertEqual(captured[1], ([], columns), "no steps: no rows, the same columns")
        with mock.patch.dict(sys.modules, {"pandas": None}):
            with self.assertRaisesRegex(ImportError, "needs pandas"):
                result.parallel_to_pandas()

    def test_nested_message_needs_metadata(self):
        @dataclasses.dataclass(frozen=True)
        class Bare:
            device_id: str
            memory: object  # a message field without `message` metadata

        with self.assertRaisesRegex(TypeError, "Bare.memory is a MemoryPrediction message"):
            _results._from_message(Bare, fit_response().predictions[0])

    def test_ranked_puts_unranked_last_and_ranks_by_cost(self):
        result = habitat_client.PredictionResult.from_message(fit_response())
        self.assertEqual([p.device_id for p in result.ranked()],
                         ["H200", "H100-SXM", "T4", "L4"])  # L4: rank 0, out of memory
        self.assertEqual([p.device_id for p in result.ranked(by="time")],
                         ["H200", "H100-SXM", "T4", "L4"])
        # By cost: T4 (no price) and L4 (out of memory) unranked, then by time.
        self.assertEqual([p.device_id for p in result.ranked(by="cost")],
                         ["H100-SXM", "H200", "T4", "L4"])
        with self.assertRaisesRegex(ValueError, "by must be 'time' or 'cost'"):
            result.ranked(by="price")

    def test_to_pandas_flattens_memory(self):
        captured = []
        fake = types.ModuleType("pandas")
        fake.DataFrame = lambda rows, columns: captured.append((rows, columns)) or "frame"
        result = habitat_client.PredictionResult.from_message(fit_response())
        with mock.patch.dict(sys.modules, {"pandas": fake}):
            result.to_pandas()
            result.to_pandas(by="cost")
        rows, columns = captured[0]
        self.assertEqual(len(columns), len(set(columns)))
        for name in ("batch_size",) + _results.MEMORY_COLUMNS:
            self.assertIn(name, columns)
        self.assertNotIn("memory", columns)
        self.assertEqual([set(r) for r in rows], [set(columns)] * 4)
        self.assertEqual([(r["device_id"], r["batch_size"], r["memory_fits"]) for r in rows],
                         [("H200", 512, True), ("H100-SXM", 256, True), ("T4", 32, True),
                          ("L4", 16, False)])
        self.assertEqual([r["device_id"] for r in captured[1][0]],
                         ["H100-SXM", "H200", "T4", "L4"])


@needs_protobuf
class TableTest(unittest.TestCase):
    """format_table's lines for a fit and for predicted memory, as
    client/cli_output.cc FormatPredictionTable prints them."""

    LEGEND_TAIL = (
        "  GPU ms: sum of the operations' predicted GPU time; ±err: its expected error (its\n"
        "          operations' expected errors weighted by their time)\n"
        "  wall ms: the origin's host timeline replayed with the predicted GPU times;\n"
        "           smp/s (samples per second), costs and ranks use it ('-': GPU ms instead)\n"
        "  USD/h: price per GPU-hour; USD/1k: cost per 1,000 samples; cost#: rank by cost, "
        "1 = cheapest\n"
        "  instance: the instance type priced, the smallest with that GPU in the catalog; /N:\n"
        "           it holds N GPUs, and the price is its price per GPU-hour\n")
    MEMORY_LEGEND = (
        "  GiB: predicted peak of PyTorch's allocated memory; '!': with headroom for its "
        "expected\n"
        "       error, more than the GPU leaves a process (unranked: '-')\n")

    def test_fit_table(self):
        result = habitat_client.PredictionResult.from_message(fit_response())
        table = habitat_client.format_table(result, model_name="resnet50", precision="fp32")
        self.assertEqual(table, (
            "model resnet50  batch fitted per GPU (traced at 32)  precision fp32"
            "  origin GPU H100-SXM\n"
            "prices: catalog aws, USD per GPU-hour, on-demand\n"
            "trace: sha256:" + "1" * 64 + "\n"
            "\n"
            # Columns as wide as their widest cell; milliseconds to four
            # significant digits, expected errors in whole percents.
            "cost# GPU       batch    GiB GPU ms ±err wall ms smp/s USD/h USD/1k time#  instance\n"
            # By cost rank (the fit's question), then time; unranked last.
            # The first column is the rank the rows are in.
            "    1 H100-SXM*   256  70.0   10.00    -   12.00  83.3 4.500 0.0100     2  "
            "p5.48xlarge/8\n"
            "    2 H200        512 130.0   9.000   8%   11.00  90.9 4.500 0.0100     1  "
            "p5.48xlarge/8\n"
            "    - T4           32  14.0   40.00   8%   42.00  23.8     -      -     3  -\n"
            "    - L4           16  30.0!  30.00   8%   32.00  31.2 4.500 0.0100     -  "
            "p5.48xlarge/8\n"
            "  * origin GPU: the measured time where its batch is the traced one, else scaled\n"
            "  batch: the largest batch whose predicted peak memory fits the GPU\n"
            + self.MEMORY_LEGEND + self.LEGEND_TAIL
            + "  rows in cost# order; time#: rank by wall time, 1 = fastest\n"))
        # The same from the message's dict, and from PredictionResult.format_table.
        self.assertEqual(habitat_client.format_table(habitat_client.to_dict(fit_response()),
                                                     model_name="resnet50", precision="fp32"),
                         table)
        self.assertEqual(result.format_table(model_name="resnet50", precision="fp32"), table)
        # The row order is ranked(by="cost"), whatever order the server sent.
        rows = table.splitlines()[5:9]
        self.assertEqual([r.split()[1].rstrip("*") for r in rows],
                         [p.device_id for p in result.ranked(by="cost")])

    def test_fit_unranked_ties_by_device_id(self):
        message = fit_response()
        messages = habitat_client.messages()
        # Both ranks 0 as L4 (out of memory), and before it by id.
        a10 = device_prediction(messages, "A10G", 0, 50, batch_size=8,
                                memory=dict(peak_allocated_bytes=25 * GIB, usable_bytes=22 * GIB,
                                            fits=False))
        a10.rank_by_cost = 0
        message.predictions.append(a10)
        table = habitat_client.format_table(habitat_client.to_dict(message))
        ids = [line.split()[1].rstrip("*") for line in table.splitlines()[5:10]]
        self.assertEqual(ids, ["H100-SXM", "H200", "T4", "A10G", "L4"])

    def memory_response(self):
        """One batch (not a fit), memory predicted for all GPUs but T4;
        H100-SXM is out of memory (both ranks 0)."""
        message = sample_response()
        by_id = {p.device_id: p for p in message.predictions}
        by_id["H200"].memory.CopyFrom(habitat_client.messages()["MemoryPrediction"](
            peak_allocated_bytes=int(1.96 * GIB), usable_bytes=139 * GIB, fits=True,
            largest_fitting_batch=512))
        by_id["H100-SXM"].memory.CopyFrom(habitat_client.messages()["MemoryPrediction"](
            peak_allocated_bytes=GIB + GIB // 4, usable_bytes=GIB, fits=False))
        by_id["H100-SXM"].rank_by_time = 0
        by_id["H100-SXM"].rank_by_cost = 0
        by_id["T4"].rank_by_time = 2
        return message

    def test_memory_without_fit(self):
        table = habitat_client.format_table(habitat_client.to_dict(self.memory_response()))
        lines = table.splitlines(keepends=True)
        self.assertEqual(lines[0], "model ?  batch 8  precision ?  origin GPU H100-SXM\n")
        self.assertEqual(lines[4],
                         "time# GPU        GiB GPU ms ±err wall ms smp/s USD/h USD/1k cost#"
                         "  instance\n")
        self.assertEqual(lines[5:8], [
            # 1.96 GiB is "2.0"; 1.25 GiB rounds to even, "1.2", as printf does.
            "    1 H200      2.0   9.000   8%   11.00  90.9 4.500 0.0100     1  p5.48xlarge/8\n",
            "    2 T4          -   40.00   8%   42.00  23.8     -      -     -  -\n",
            "    - H100-SXM* 1.2!  10.00    -   12.00  83.3 4.500 0.0100     -  p5.48xlarge/8\n",
        ])
        # Not a fit: the batch's origin note, no batch column or legend line.
        self.assertEqual(
            "".join(lines[8:11]),
            "  * origin GPU: the measured time, not a prediction\n" + self.MEMORY_LEGEND)
        self.assertNotIn("  batch: ", table)
        self.assertEqual("".join(lines[11:]), self.LEGEND_TAIL
                         + "  time#: rank by wall time, 1 = fastest (the rows' order)\n")

    def test_without_memory_or_fit_no_new_columns(self):
        table = habitat_client.format_table(habitat_client.to_dict(sample_response()))
        lines = table.splitlines(keepends=True)
        self.assertEqual(lines[0], "model ?  batch 8  precision ?  origin GPU H100-SXM\n")
        self.assertEqual(lines[4],
                         "time# GPU       GPU ms ±err wall ms smp/s USD/h USD/1k cost#  instance\n")
        self.assertEqual(lines[5],
                         "    1 H200       9.000   8%   11.00  90.9 4.500 0.0100     1  "
                         "p5.48xlarge/8\n")
        self.assertNotIn("GiB", table)
        self.assertNotIn("  batch: ", table)
        # The warnings are format_warnings', not the table's.
        self.assertNotIn("warning", table)
        self.assertNotIn("old GPU", table)
        # A dict from before batch_size and memory (no such keys) prints the same.
        old = habitat_client.to_dict(sample_response())
        for p in old["predictions"]:
            del p["batch_size"]
        self.assertEqual(habitat_client.format_table(old), table)

    def test_unscaled_column_only_where_something_was_unscaled(self):
        self.assertNotIn("unscaled", habitat_client.format_table(
            habitat_client.to_dict(sample_response())))
        message = sample_response()
        number = message.predictions[0].method_totals[0].DESCRIPTOR.fields_by_name["method"] \
            .enum_type.values_by_name["PREDICTION_METHOD_UNSCALED"].number
        message.predictions[0].method_totals.add(method=number, operations=1, origin_ns=10**6)
        message.predictions[0].method_totals[0].origin_ns = 3 * 10**6
        table = habitat_client.format_table(habitat_client.to_dict(message))
        self.assertIn(" cost# unscaled  instance\n", table)
        self.assertIn("   3 T4         40.00   8%   42.00  23.8     -      -     -    25.0%  -\n",
                      table)
        self.assertIn("  unscaled: share of the origin GPU time", table)

    def test_long_instance_names_give_way(self):
        message = fit_response()
        for p in message.predictions:
            if p.has_price:
                p.instance_type = "Standard_ND96isr_H100_v5_with_a_longer_name"
        table = habitat_client.format_table(habitat_client.to_dict(message))
        self.assertTrue(all(len(line) <= 100 for line in table.splitlines()))
        # At most 26 characters, the "/8" kept.
        self.assertIn("  Standard_ND96isr_H10.../8\n", table)

    def test_no_predictions_is_not_a_fit(self):
        message = habitat_client.messages()["PredictResponse"](
            origin_device_id="H100-SXM", batch_size=0, traced_batch_size=32)
        table = habitat_client.format_table(habitat_client.to_dict(message))
        self.assertEqual(table.splitlines()[0],
                         "model ?  batch 0  precision ?  origin GPU H100-SXM")
        self.assertEqual(table.splitlines()[3], "time# GPU GPU ms ±err smp/s")


@needs_protobuf
class WarningsTest(unittest.TestCase):
    """format_warnings, as client/cli_warnings.cc FormatPredictionWarnings
    prints them (`habitat predict` on stderr)."""

    def structured(self):
        """sample_response with its warnings grouped by kind, as a server
        sends them."""
        message = sample_response()
        for p in message.predictions:
            p.warning_kinds.extend(["gemm_ceiling"] * len(p.warnings))
        w = message.structured_warnings.add(kind="wall_time_from_gpu_time",
                                            summary="no wall time predicted")
        w.details.add(text="the trace has no host timeline")
        w = message.structured_warnings.add(kind="gemm_ceiling", summary="lowered to a ceiling",
                                            device_ids=["T4", "H200"])
        w.details.add(text="old GPU", device_ids=["T4"])
        w.details.add(text="2 operation(s) were lowered to the large-GEMM ceiling of the "
                           "kernel-varying model, which is long enough to wrap",
                      device_ids=["H200"])
        return message

    def test_one_line_per_kind(self):
        result = habitat_client.PredictionResult.from_message(self.structured())
        self.assertEqual(result.structured_warnings[1].details[0],
                         habitat_client.WarningDetail("old GPU", ("T4",)))
        self.assertEqual(result.device("T4").warning_kinds, ("gemm_ceiling",))
        # The GPUs in the table's order (H200 first), whatever the server's.
        expected = ("warnings (hint):\n"
                    "  no wall time predicted\n"
                    "  2 GPUs (H200, T4): lowered to a ceiling\n")
        self.assertEqual(habitat_client.format_warnings(result, hint="hint"), expected)
        self.assertEqual(habitat_client.format_warnings(habitat_client.to_dict(self.structured()),
                                                        hint="hint"), expected)
        self.assertEqual(result.format_warnings(),
                         expected.replace("warnings (hint):", "warnings:"))

    def test_a_long_line_wraps_within_100_columns(self):
        message = self.structured()
        message.structured_warnings[1].summary = (
            "the kernel-varying model extrapolated beyond its training data; expect larger "
            "errors there")
        self.assertEqual(habitat_client.format_warnings(habitat_client.to_dict(message)),
                         "warnings:\n"
                         "  no wall time predicted\n"
                         "  2 GPUs (H200, T4): the kernel-varying model extrapolated beyond its "
                         "training data; expect larger\n"
                         "    errors there\n")

    def test_explain(self):
        self.assertEqual(habitat_client.format_warnings(
            habitat_client.to_dict(self.structured()), explain=True),
            "warnings:\n"
            "  no wall time predicted [wall_time_from_gpu_time]\n"
            "    - the trace has no host timeline\n"
            "  2 GPUs (H200, T4): lowered to a ceiling [gemm_ceiling]\n"
            "    - T4: old GPU\n"
            "    - H200: 2 operation(s) were lowered to the large-GEMM ceiling of the "
            "kernel-varying model, which\n"
            "      is long enough to wrap\n")

    def test_gpu_names(self):
        table = [f"G{i}" for i in range(1, 13)]
        names = habitat_client._table._gpu_names
        self.assertEqual(names([], table, "G1", False), "")
        self.assertEqual(names(["G3"], table, "G1", False), "G3")
        self.assertEqual(names(table[::-1], table, "G1", False), "all 12 GPUs")
        self.assertEqual(names(table[1:], table, "G1", False), "11 GPUs (all but the origin)")
        self.assertEqual(names(table[2:], table, "G1", False), "10 GPUs (all but G1, G2)")
        self.assertEqual(names(["G6", "G5", "G4", "G3", "G2", "G1"], table, "G1", False),
                         "6 GPUs (G1, G2, G3, G4, G5, G6)")
        self.assertEqual(names(table[:7], table, "G1", False),
                         "7 GPUs (G1, G2, G3, G4, G5 and 2 more)")
        self.assertEqual(names(table[:7], table, "G1", True),
                         "7 GPUs (G1, G2, G3, G4, G5, G6, G7)")

    def test_a_server_before_kinds(self):
        """Without structured_warnings: one line per distinct text with its
        GPUs, then the response's own, with or without explain."""
        expected = ("warnings:\n"
                    "  2 GPUs (H200, T4): old GPU\n"
                    "  the trace has no host timeline\n")
        plain = habitat_client.to_dict(sample_response())
        self.assertEqual(habitat_client.format_warnings(plain), expected)
        self.assertEqual(habitat_client.format_warnings(plain, explain=True), expected)
        message = sample_response()
        del message.warnings[:]
        for p in message.predictions:
            del p.warnings[:]
        self.assertEqual(habitat_client.format_warnings(habitat_client.to_dict(message)), "")


class HostBoundShareTest(unittest.TestCase):
    def test_the_legends_threshold_is_the_servers(self):
        """_table's copy of kHostBoundIdleShare (core/predict/host_replay.h)."""
        with open(os.path.join(SOURCE, "core", "predict", "host_replay.h")) as f:
            match = re.search(r"kHostBoundIdleShare = ([0-9.]+);", f.read())
        self.assertIsNotNone(match)
        self.assertEqual(float(match.group(1)), _table.HOST_BOUND_IDLE_SHARE)


@needs_protobuf
class ParallelTableTest(unittest.TestCase):
    """The data-parallel section, as cli_output.cc ParallelTable prints it:
    after the legend."""

    SECTION = (
        "\n"
        "data-parallel steps (PyTorch DDP over NCCL, each GPU at its batch above):\n"
        "  GPU      GPUs step ms ±err comm ms eff.   smp/s  instance                 USD/node-h"
        " USD/1k\n"
        "  H200      8x2   12.35  10%   1.346  89% 10370.4  p5e.48xlarge                 43.260"
        " 0.0123\n"
        "  H200       16 -  H200 nodes hold at most 8 GPUs\n"
        "  H100-SXM   8+   13.00    -   0.500  90%  9846.1  a-very-long-instance-...          -"
        "      -\n"
        "  T4        8x2 -  T4: no interconnect data?\n"
        "  T4         4~   20.00  25%   4.000  80%   800.0  -                                 -"
        "      -\n"
        "  GPUs: per node (x nodes); step ms: the GPU's wall time above plus the all-reduce time\n"
        "        the backward pass does not hide (comm ms); eff.: one GPU's step / this step;\n"
        "        ±err: the GPU's own and the data-parallel model's measured error (larger where\n"
        "        the GPU waits on the host: DDP's host work is not modelled)\n"
        "        '+': all-reduces with NVLink SHARP where faster, as NCCL (--no-nvls: without)\n"
        "        '~': bandwidth known as a range (PCIe: the server's; a network: the fabric's):\n"
        "        the step is the middle of those at its lowest published and usual end;\n"
        "        ±err spans both\n"
        "  instance: the catalog's instance with that many of the GPU; USD/node-h: its price\n"
        "  USD/1k: cost per 1,000 samples\n")

    def test_section_after_the_legend(self):
        base = habitat_client.format_table(habitat_client.to_dict(sample_response()))
        self.assertNotIn("data-parallel", base, "nothing asked for: no section")
        result = habitat_client.PredictionResult.from_message(parallel_response())
        table = habitat_client.format_table(result)
        self.assertEqual(table, base + self.SECTION)
        self.assertEqual(habitat_client.format_table(habitat_client.to_dict(parallel_response())),
                         table)

    def test_unavailable_reasons_wrap_within_100_columns(self):
        message = parallel_response()
        message.predictions[0].parallel[0].unavailable = \
            "across nodes the network comes from an instance of 8 x T4, and catalog 'aws' " \
            "has none with a price of that kind"
        lines = habitat_client.format_table(habitat_client.to_dict(message)).splitlines()
        start = lines.index("  T4        8x2 -  across nodes the network comes from an instance "
                            "of 8 x T4, and catalog 'aws' has")
        self.assertEqual(lines[start + 1], "                   none with a price of that kind")
        self.assertTrue(all(len(line) <= 100 for line in lines))

    def test_no_prices_and_cost_decimals(self):
        # No price anywhere: "price/..." headers, '-' for the step's price.
        message = parallel_response()
        message.catalog = ""
        for p in message.predictions:
            p.has_price = False
            for c in p.parallel:
                c.has_price = False
        lines = habitat_client.format_table(habitat_client.to_dict(message)).splitlines()
        start = lines.index("data-parallel steps (PyTorch DDP over NCCL, each GPU at its batch "
                            "above):")
        self.assertEqual(lines[start + 1],
                         "  GPU      GPUs step ms ±err comm ms eff.   smp/s  instance"
                         "                 price/node-h price/1k")
        self.assertEqual(lines[start + 2],
                         "  H200      8x2   12.35  10%   1.346  89% 10370.4  p5e.48xlarge"
                         "                        -        -")
        # The main table's cost decimals (3 significant digits of its
        # cheapest cost) apply to the steps' costs too.
        message = parallel_response()
        message.predictions[1].cost_per_1000_samples = 0.000123
        lines = habitat_client.format_table(habitat_client.to_dict(message)).splitlines()
        row = next(line for line in lines if line.startswith("  H200      8x2"))
        self.assertTrue(row.endswith("  43.260 0.012346"), row)
        # A dict from before `parallel` (no such keys) prints no section.
        old = habitat_client.to_dict(sample_response())
        for p in old["predictions"]:
            p.pop("parallel", None)
        self.assertNotIn("data-parallel", habitat_client.format_table(old))


@needs_grpc
class RetryTest(unittest.TestCase):
    """UNAVAILABLE is retried by gRPC's retry policy, which marks retried
    attempts with grpc-previous-rpc-attempts (a hand-written loop does not);
    other codes are the server's answer and are not retried."""

    def flaky_server(self, code, failures):
        import grpc
        from concurrent import futures
        calls, marked = [], []

        def list_devices(request, context):
            if any(k == "grpc-previous-rpc-attempts" for k, _ in context.invocation_metadata()):
                marked.append(1)
            calls.append(1)
            if len(calls) <= failures:
                context.abort(code, "flaky")
            return b""  # an empty ListDevicesResponse

        handler = grpc.method_handlers_generic_handler("habitat.v1.PredictionService", {
            "ListDevices": grpc.unary_unary_rpc_method_handler(list_devices)})
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=2), handlers=[handler])
        port = server.add_insecure_port("127.0.0.1:0")
        server.start()
        self.addCleanup(server.stop, None)
        return f"127.0.0.1:{port}", calls, marked

    @unittest.skipUnless(HAVE_GRPC, "grpc not importable here")
    def test_unavailable_is_retried_by_grpc(self):
        import grpc
        address, calls, marked = self.flaky_server(grpc.StatusCode.UNAVAILABLE, 2)
        with habitat_client.Client(address, max_attempts=3, timeout_s=10) as client:
            self.assertEqual(client.list_devices(), [])
        self.assertEqual(len(calls), 3)
        self.assertEqual(len(marked), 2)

    @unittest.skipUnless(HAVE_GRPC, "grpc not importable here")
    def test_attempts_are_bounded_and_other_codes_not_retried(self):
        import grpc
        address, calls, _ = self.flaky_server(grpc.StatusCode.UNAVAILABLE, 100)
        with habitat_client.Client(address, max_attempts=2, timeout_s=10) as client:
            with self.assertRaisesRegex(habitat_client.ServiceError, "up to 2 attempts"):
                client.list_devices()
        self.assertEqual(len(calls), 2)
        address, calls, _ = self.flaky_server(grpc.StatusCode.INVALID_ARGUMENT, 1)
        with habitat_client.Client(address, max_attempts=3, timeout_s=10) as client:
            with self.assertRaises(habitat_client.ServiceError) as raised:
                client.list_devices()
        self.assertEqual(raised.exception.code, "INVALID_ARGUMENT")
        self.assertEqual(len(calls), 1)

    @unittest.skipUnless(HAVE_GRPC, "grpc not importable here")
    def test_service_config(self):
        from habitat_client import _client
        self.assertEqual(_client.retry_service_config(1), "{}")
        policy = json.loads(_client.retry_service_config(3))["methodConfig"][0]["retryPolicy"]
        self.assertEqual(policy["maxAttempts"], 3)
        self.assertEqual(policy["retryableStatusCodes"], ["UNAVAILABLE"])
        with self.assertRaisesRegex(ValueError, "gRPC's limit"):
            habitat_client.Client("127.0.0.1:1", max_attempts=6)


class ClientTest(unittest.TestCase):
    """Client.predict with the RPC replaced: request built, result typed,
    warnings reported."""

    def setUp(self):
        self.client = habitat_client.Client("127.0.0.1:1")  # never connected
        self.sent = []

        def call(method, request, response_type):
            self.sent.append((method, request, response_type))
            return sample_response()

        self.client._call = call

    def tearDown(self):
        self.client.close()

    def test_predict(self):
        log = io.StringIO()
        handler = logging.StreamHandler(log)
        logger = logging.getLogger("habitat_client")
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        try:
            with warnings.catch_warnings(record=True) as caught, \
                    contextlib.redirect_stdout(io.StringIO()) as out, \
                    contextlib.redirect_stderr(io.StringIO()) as err:
                warnings.simplefilter("always")
                result = self.client.predict(TRACE_GZ, devices=["H200", "T4"], catalog="aws",
                                             price_kind="spot", target_host_speed=2)
        finally:
            logger.removeHandler(handler)
            logger.setLevel(logging.NOTSET)
        self.assertIsInstance(result, habitat_client.PredictionResult)
        method, request, response_type = self.sent[0]
        self.assertEqual((method, response_type), ("Predict", "PredictResponse"))
        self.assertEqual(list(request.devices), ["H200", "T4"])
        self.assertEqual(request.catalog, "aws")
        self.assertEqual(request.price_kind, 2)  # PRICE_KIND_SPOT in device.proto
        self.assertEqual(request.target_host_speed, 2.0)
        self.assertEqual(request.batch_size, 0)  # the trace's own
        self.assertEqual(request.trace.SerializeToString(),
                         habitat_client.messages()["Trace"].FromString(raw_trace())
                         .SerializeToString())
        # The response's warning through warnings, each device's once through logging.
        self.assertEqual([(w.category, str(w.message)) for w in caught],
                         [(habitat_client.PredictionWarning, "the trace has no host timeline")])
        self.assertEqual(log.getvalue(), "T4, H200: old GPU\n")
        self.assertEqual((out.getvalue(), err.getvalue()), ("", ""), "nothing printed")

    def test_fit(self):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.client.predict(TRACE_GZ, fit=True)
            self.client.predict(trace_id="sha256:" + "0" * 64, fit=True, fit_batch_step=48)
            self.client.predict(TRACE_GZ)
        fit, stepped, plain = (sent[1] for sent in self.sent)
        self.assertTrue(fit.HasField("fit"), "set even with the default step")
        self.assertEqual((fit.fit.batch_step, fit.batch_size), (0, 0))
        self.assertTrue(stepped.HasField("fit"))
        self.assertEqual(stepped.fit.batch_step, 48)
        self.assertFalse(plain.HasField("fit"))
        request = habitat_client.build_predict_request(TRACE_GZ, fit=True, fit_batch_step=1)
        self.assertEqual(request.fit.batch_step, 1)

    def test_the_traced_batch_is_traced_batch_size(self):
        # As the CLI: the trace's own batch is traced_batch_size (the CLI's
        # --traced-batch-size), the batch to predict at at_batch_size.
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            request = habitat_client.build_predict_request(TRACE_GZ, traced_batch_size=8,
                                                           at_batch_size=16)
        self.assertEqual((request.trace.batch_size, request.batch_size), (8, 16))
        with self.assertWarnsRegex(DeprecationWarning, "now spelled traced_batch_size="):
            old = habitat_client.build_predict_request(TRACE_GZ, batch_size=8)
        self.assertEqual(old.trace.batch_size, 8)
        with self.assertRaisesRegex(ValueError, "traced_batch_size alone"):
            habitat_client.build_predict_request(TRACE_GZ, batch_size=8, traced_batch_size=8)

    def test_another_batch_is_asked_for_by_id_too(self):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.client.predict(trace_id="sha256:" + "0" * 64, at_batch_size=128)
        self.assertEqual(self.sent[0][1].batch_size, 128)

    def test_parallel_request(self):
        build = habitat_client.build_predict_request
        request = build(TRACE_GZ)
        self.assertEqual((len(request.parallel), request.catalog_instances), (0, False))
        request = build(TRACE_GZ, gpus_per_node=8)
        self.assertEqual([(c.gpus_per_node, c.nodes, c.bucket_cap_bytes)
                          for c in request.parallel], [(8, 0, 0)])  # 0: one node, DDP's 25 MiB
        request = build(trace_id="sha256:0", gpus_per_node=8, nodes=2, bucket_cap_mb=50,
                        catalog_instances=True)
        self.assertEqual([(c.gpus_per_node, c.nodes, c.bucket_cap_bytes)
                          for c in request.parallel], [(8, 2, 50 << 20)])
        self.assertTrue(request.catalog_instances)
        request = build(TRACE_GZ, catalog_instances=True)
        self.assertEqual((len(request.parallel), request.catalog_instances), (0, True))
        request = build(TRACE_GZ, gpus_per_node=64, nodes=4096, bucket_cap_mb=1 << 20)
        self.assertEqual((request.parallel[0].gpus_per_node, request.parallel[0].nodes,
                          request.parallel[0].bucket_cap_bytes), (64, 4096, 1 << 40))
        request = build(TRACE_GZ, gpus_per_node=1, nodes=1, bucket_cap_mb=1)
        self.assertEqual((request.parallel[0].nodes, request.parallel[0].bucket_cap_bytes,
                          request.parallel[0].disable_nvls), (1, 1 << 20, False))
        request = build(TRACE_GZ, gpus_per_node=8, disable_nvls=True)
        self.assertTrue(request.parallel[0].disable_nvls)
        # Through Client.predict and predict_message.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.client.predict(TRACE_GZ, gpus_per_node=4, nodes=3, bucket_cap_mb=10,
                                catalog_instances=True)
            self.client.predict_message(trace_id="sha256:0", gpus_per_node=2)
        sent, by_message = self.sent[0][1], self.sent[1][1]
        self.assertEqual((sent.parallel[0].gpus_per_node, sent.parallel[0].nodes,
                          sent.parallel[0].bucket_cap_bytes, sent.catalog_instances),
                         (4, 3, 10 << 20, True))
        self.assertEqual((by_message.parallel[0].gpus_per_node, by_message.catalog_instances),
                         (2, False))

    def test_request_arguments_are_checked(self):
        cases = [
            (dict(trace=TRACE_GZ, price_kind="cheap"), "price_kind must be"),
            (dict(trace=TRACE_GZ, target_host_speed=1000), "target_host_speed must be within"),
            (dict(trace=TRACE_GZ, devices=[""]), "non-empty device ids"),
            (dict(), "exactly one of trace and trace_id"),
            (dict(trace=TRACE_GZ, trace_id="sha256:0"), "exactly one of trace and trace_id"),
            (dict(trace_id="sha256:0", batch_size=8), "batch_size applies to a trace"),
            (dict(trace=TRACE_GZ, at_batch_size=0), "at_batch_size must be an integer"),
            (dict(trace=TRACE_GZ, at_batch_size=2.5), "at_batch_size must be an integer"),
            (dict(trace=TRACE_GZ, at_batch_size=1 << 31), "at_batch_size must be an integer"),
            (dict(trace=TRACE_GZ, fit_batch_step=8), "pass fit=True with it"),
            (dict(trace=TRACE_GZ, fit=False, fit_batch_step=8), "pass fit=True with it"),
            (dict(trace=TRACE_GZ, fit=True, fit_batch_step=0), "fit_batch_step must be an integer"),
            (dict(trace=TRACE_GZ, fit=True, fit_batch_step=-8),
             "fit_batch_step must be an integer"),
            (dict(trace=TRACE_GZ, fit=True, fit_batch_step=(1 << 30) + 1),
             "fit_batch_step must be an integer"),
            (dict(trace=TRACE_GZ, fit=True, fit_batch_step=8.0),
             "fit_batch_step must be an integer"),
            (dict(trace=TRACE_GZ, fit=True, fit_batch_step=True),
             "fit_batch_step must be an integer"),
            (dict(trace=TRACE_GZ, fit=True, at_batch_size=64), "drop at_batch_size"),
            (dict(trace_id="sha256:0", fit=True, at_batch_size=64), "drop at_batch_size"),
            (dict(trace=TRACE_GZ, fit=1), "fit must be True or False"),
            (dict(trace=TRACE_GZ, fit=64), "fit must be True or False"),
            (dict(trace=TRACE_GZ, nodes=2), "give gpus_per_node too"),
            (dict(trace=TRACE_GZ, bucket_cap_mb=25), "give gpus_per_node too"),
            (dict(trace=TRACE_GZ, disable_nvls=True), "give gpus_per_node too"),
            (dict(trace=TRACE_GZ, gpus_per_node=8, disable_nvls=1),
             "disable_nvls must be True or False"),
            (dict(trace=TRACE_GZ, nodes=2, bucket_cap_mb=25, catalog_instances=True),
             "give gpus_per_node too"),
            (dict(trace=TRACE_GZ, gpus_per_node=0), r"gpus_per_node must be an integer within "
             r"\[1, 64\]"),
            (dict(trace=TRACE_GZ, gpus_per_node=65), "gpus_per_node must be an integer"),
            (dict(trace=TRACE_GZ, gpus_per_node=8.0), "gpus_per_node must be an integer"),
            (dict(trace=TRACE_GZ, gpus_per_node="8"), "gpus_per_node must be an integer"),
            (dict(trace=TRACE_GZ, gpus_per_node=True), "gpus_per_node must be an integer"),
            (dict(trace=TRACE_GZ, gpus_per_node=8, nodes=0),
             r"nodes must be an integer within \[1, 4096\]"),
            (dict(trace=TRACE_GZ, gpus_per_node=8, nodes=4097), "nodes must be an integer"),
            (dict(trace=TRACE_GZ, gpus_per_node=8, nodes=-1), "nodes must be an integer"),
            (dict(trace=TRACE_GZ, gpus_per_node=8, nodes=True), "nodes must be an integer"),
            (dict(trace=TRACE_GZ, gpus_per_node=8, bucket_cap_mb=0),
             r"bucket_cap_mb must be an integer within \[1, 1048576\]"),
            (dict(trace=TRACE_GZ, gpus_per_node=8, bucket_cap_mb=(1 << 20) + 1),
             "bucket_cap_mb must be an integer"),
            (dict(trace=TRACE_GZ, gpus_per_node=8, bucket_cap_mb=2.5),
             "bucket_cap_mb must be an integer"),
            (dict(trace=TRACE_GZ, catalog_instances=1), "catalog_instances must be True or False"),
            (dict(trace=TRACE_GZ, catalog_instances="yes"),
             "catalog_instances must be True or False"),
        ]
        for kwargs, message in cases:
            with self.subTest(kwargs=kwargs):
                with self.assertRaisesRegex(ValueError, message):
                    self.client.predict(**kwargs)
        self.assertEqual(self.sent, [])

    def test_predict_by_id_and_upload(self):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", habitat_client.PredictionWarning)
            self.client.predict(trace_id="sha256:abc", devices="H200")
        request = self.sent[0][1]
        self.assertEqual((request.WhichOneof("trace_source"), request.trace_id),
                         ("trace_id", "sha256:abc"))
        self.client._call = lambda method, request, response_type: self.sent.append(
            (method, request)) or habitat_client.messages()["UploadTraceResponse"](
                trace_id="sha256:def")
        self.assertEqual(self.client.upload(TRACE_GZ), "sha256:def")
        self.assertEqual(self.sent[-1][0], "UploadTrace")
        self.assertEqual(self.sent[-1][1].trace.batch_size, 8)

    def test_connection_arguments(self):
        with self.assertRaisesRegex(ValueError, "server must be 'host:port'"):
            habitat_client.Client("")
        with self.assertRaisesRegex(ValueError, "tls_cert and tls_key go together"):
            habitat_client.Client("localhost:1", tls_cert="x.pem")
        connection, call = habitat_client.split_connection_args(
            {"token": "t", "habitat_cli": "/bin/habitat", "devices": ["H200"]})
        self.assertEqual(connection, {"token": "t", "habitat_cli": "/bin/habitat"})
        self.assertEqual(call, {"devices": ["H200"]})

    def test_agent_module_keeps_returning_dicts(self):
        sys.path.insert(0, os.path.join(SOURCE, "agent", "python"))
        try:
            from habitat import client as legacy
        finally:
            sys.path.pop(0)
        self.assertIs(legacy.ServiceError, habitat_client.ServiceError)
        with legacy.Client("127.0.0.1:1") as c:
            c._call = lambda *args: sample_response()
            response = c.predict(TRACE_GZ)
        self.assertIsInstance(response, dict)
        self.assertEqual(response["predictions"][1]["device_id"], "H200")
        self.assertEqual(response["price_kind"], "PRICE_KIND_SPOT")


if __name__ == "__main__":
    unittest.main(verbosity=2)
