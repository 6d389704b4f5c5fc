"""Re-runs at other batch sizes (OperationTracker.measure_batch_scaling,
habitat/rerun.py measure_at_batches) on CPU tensors: a small CNN and an
LSTM tracked with source="host", their kernel-varying ops re-run with the
batch-carrying inputs scaled the way the engine scales them.

Run from agent/python (extension built):
    python -m unittest discover -s tests -v
"""

import unittest
from unittest import mock

import torch

import habitat_agent
from habitat_agent import _C, rerun

BATCH = 4


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.conv2 = torch.nn.Conv2d(8, 8, 3, padding=1)
        self.conv3 = torch.nn.Conv2d(8, 8, 3, padding=1)  # the same call as conv2
        self.fc = torch.nn.Linear(8 * 8 * 8, 10)

    def forward(self, x):
        x = torch.relu(self.conv1(x))
        x = torch.relu(self.conv2(x))
        x = torch.relu(self.conv3(x))
        return self.fc(x.flatten(1))


def top_level(ops, name):
    return [o for o in ops if o["parent_id"] == 0 and o["name"] == name]


class EngineRulesTest(unittest.TestCase):
    """The agent asks the engine's own C++ (compiled into _C)."""

    def test_batch_dimension_is_the_engines(self):
        d = _C.batch_dimension
        self.assertEqual(d([32, 197, 768], 32, False), 0)
        self.assertEqual(d([6304, 768], 32, False), 0)  # 197 x 32 tokens
        self.assertEqual(d([50, 32, 1024], 32, False), 1)  # sequence-first
        self.assertEqual(d([3, 7, 32], 32, False), 2)
        self.assertEqual(d([197, 768], 32, False), -1)
        self.assertEqual(d([4096, 1024], 32, True), -1)  # a parameter
        self.assertEqual(d([], 32, False), -1)

    def test_kernel_varying_names_are_the_engines(self):
        for name in ("aten::conv2d", "aten::linear", "aten::lstm", "aten::bmm",
                     "aten::scaled_dot_product_attention", "ConvolutionBackward0"):
            self.assertTrue(_C.is_kernel_varying(name), name)
        for name in ("aten::relu", "aten::add_", "aten::conv2d_backward_fake", ""):
            self.assertFalse(_C.is_kernel_varying(name), name)

    def test_scaled_event_keeps_parameters_and_values(self):
        event = {"name": "aten::lstm", "id": 7, "arguments": [
            {"name": "0", "shape": [50, 32, 1024], "dtype": "float"},
            {"name": "1.0", "shape": [2, 32, 1024], "dtype": "float"},
            {"name": "2.0", "shape": [4096, 1024], "dtype": "float"},
            {"name": "3", "integer": 1}]}
        out = rerun.scaled_event(event, 32, 128, {(4096, 1024)})
        self.assertEqual([a.get("shape") for a in out["arguments"]],
                         [[50, 128, 1024], [2, 128, 1024], [4096, 1024], None])
        self.assertEqual(event["arguments"][0]["shape"], [50, 32, 1024])  # a copy
        self.assertIsNone(rerun.scaled_event(
            {"name": "aten::mm", "arguments": [{"name": "0", "shape": [3, 5]}]}, 32, 64, set()))

    def test_target_batches(self):
        self.assertEqual(rerun.target_batches(16, (0.5, 2, 4)), [8, 16, 32, 64])
        self.assertEqual(rerun.target_batches(1, (0.5, 1, 2)), [1, 2])
        for batch, factors in ((0, (2,)), (4, (0,)), (4, (-1,)), (4, (float("nan"),)),
                               (1 << 29, (4,))):
            with self.assertRaises(ValueError):
                rerun.target_batches(batch, factors)


class MeasureBatchScalingCpuTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        torch.manual_seed(0)
        cls.model = Net()
        cls.opt = torch.optim.SGD(cls.model.parameters(), lr=0.1)
        cls.x = torch.randn(BATCH, 3, 8, 8)
        cls.y = torch.randint(0, 10, (BATCH,))

        def step():
            cls.opt.zero_grad()
            torch.nn.functional.cross_entropy(cls.model(cls.x), cls.y).backward()
            cls.opt.step()

        cls.step = staticmethod(step)
        step()
        cls.tracker = habitat_agent.OperationTracker(source="host", batch_size=BATCH,
                                               verbose=False)
        with cls.tracker.track():
            step()
        cls.ops = cls.tracker.recorded_ops()
        cls.report = cls.tracker.measure_batch_scaling(factors=(0.5, 2), repetitions=3,
                                                       warmup=1)
        cls.reruns = cls.tracker.batch_reruns()

    def test_kernel_varying_ops_at_every_batch(self):
        varying = top_level(self.ops, "aten::conv2d") + top_level(self.ops, "aten::linear")
        self.assertEqual(len(varying), 4)
        for op in varying:
            rows = self.reruns[op["id"]]
            self.assertEqual([r[0] for r in rows], [2, 4, 8], op["name"])
            for b, fwd, bwd in rows:
                self.assertGreater(fwd, 0, (op["name"], b))
                self.assertGreater(bwd, 0, (op["name"], b))

    def test_only_kernel_varying_ops(self):
        names = {o["name"] for o in self.ops if o["id"] in self.reruns}
        self.assertEqual(names, {"aten::conv2d", "aten::linear"})
        self.assertEqual(self.report["operations"], 4)
        self.assertEqual(self.report["measured"], 4)
        self.assertEqual(self.report["calls"], 3)  # conv2 and conv3 are one call
        self.assertEqual(self.report["batches"], [2, 4, 8])
        self.assertEqual(self.report["skipped"], {})
        self.assertEqual(self.report["batch_failed"], {})

    def test_identical_calls_share_their_median(self):
        conv2, conv3 = top_level(self.ops, "aten::conv2d")[1:]
        self.assertEqual(self.reruns[conv2["id"]], self.reruns[conv3["id"]])

    def test_a_failing_batch_is_left_out_and_the_traced_one_skips_the_op(self):
        real = rerun._measure_one

        def fail_at(batch_dim):
            def measure_one(event, *args, **kwargs):
                if event["arguments"][0]["shape"][0] == batch_dim:
                    raise RuntimeError("out of memory (simulated)")
                return real(event, *args, **kwargs)
            return measure_one

        ops = self.ops
        with mock.patch.object(rerun, "_measure_one", fail_at(8)):
            times, report = rerun.measure_at_batches(ops, "cpu", BATCH, (0.5, 2),
                                                     repetitions=1, warmup=0)
        self.assertTrue(times)
        for rows in times.values():
            self.assertEqual([r[0] for r in rows], [2, 4])
        self.assertIn("batch 8: re-run failed: RuntimeError: out of memory (simulated)",
                      report["batch_failed"]["aten::conv2d"])
        with mock.patch.object(rerun, "_measure_one", fail_at(BATCH)):
            times, report = rerun.measure_at_batches(ops, "cpu", BATCH, (2,),
                                                     repetitions=1, warmup=0)
        self.assertEqual(times, {})
        self.assertEqual(report["skipped"]["aten::conv2d"],
                         {"re-run failed: RuntimeError: out of memory (simulated)": 3})

    def test_out_of_time_is_counted(self):
        times, report = rerun.measure_at_batches(self.ops, "cpu", BATCH, (2,),
                                                 max_seconds=-1)
        self.assertEqual(times, {})
        self.assertEqual(report["out_of_time"], 4)

    def test_needs_a_batch_size_and_a_tracked_region(self):
        no_batch = habitat_agent.OperationTracker(source="host", verbose=False)
        with no_batch.track():
            self.step()
        with self.assertRaisesRegex(ValueError, "batch_size is not set"):
            no_batch.measure_batch_scaling()
        fresh = habitat_agent.OperationTracker(source="host", batch_size=BATCH, verbose=False)
        with self.assertRaises(habitat_agent.TrackingError):
            fresh.measure_batch_scaling()

    def test_a_new_region_forgets_the_reruns(self):
        tracker = habitat_agent.OperationTracker(source="host", batch_size=BATCH, verbose=False)
        with tracker.track():
            self.step()
        tracker.measure_batch_scaling(factors=(2,), repetitions=1, warmup=0)
        self.assertTrue(tracker.batch_reruns())
        with tracker.track():
            self.step()
        self.assertEqual(tracker.batch_reruns(), {})


if __name__ == "__main__":
    unittest.main()
