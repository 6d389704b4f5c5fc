"""habitat_client's typed results: the dataclasses against the proto,
to_dict, to_pandas, memory, fits and data-parallel steps."""

import dataclasses
import json
import sys
import types
import unittest
import warnings
from unittest import mock

from client_fixtures import (  # noqa: F401 (puts the package on sys.path)
    habitat_client, _results, _importable, needs_protobuf, sample_response, GIB, fit_response,
    parallel_response)


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


if __name__ == "__main__":
    unittest.main(verbosity=2)
