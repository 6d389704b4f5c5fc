"""Per-op re-runs (OperationTracker.measure_ops, habitat/rerun.py) on CPU
tensors: a small CNN training step tracked with source="host", each op
rebuilt from its recorded inputs and timed with perf_counter.

Run from agent/python (extension built):
    python -m unittest discover -s tests -v
"""

import unittest
from unittest import mock

import torch

import habitat_agent
from habitat_agent import _C, rerun


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = torch.nn.BatchNorm2d(8)
        # Two identical blocks: the same calls twice, for the cache.
        self.conv2 = torch.nn.Conv2d(8, 8, 3, padding=1)
        self.conv3 = torch.nn.Conv2d(8, 8, 3, padding=1)
        self.fc = torch.nn.Linear(8 * 8 * 8, 10)

    def forward(self, x):
        x = torch.relu_(self.bn1(self.conv1(x)))
        x = torch.relu(self.conv2(x))
        x = torch.relu(self.conv3(x))
        return self.fc(x.flatten(1))


def top_level(ops, name):
    return [o for o in ops if o["parent_id"] == 0 and o["name"] == name]


class MeasureOpsCpuTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        torch.manual_seed(0)
        cls.model = Net()
        # foreach=True: the optimizer's _foreach_* ops over parameter lists.
        cls.opt = torch.optim.SGD(cls.model.parameters(), lr=0.1, momentum=0.9,
                                  foreach=True)
        cls.x = torch.randn(4, 3, 8, 8)
        cls.y = torch.randint(0, 10, (4,))

        def step():
            cls.opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(cls.model(cls.x), cls.y)
            loss.backward()
            cls.opt.step()

        step()
        step()  # momentum buffers exist: the step is the steady-state one
        cls.tracker = habitat_agent.OperationTracker(source="host", batch_size=4,
                                               verbose=False)
        with cls.tracker.track():
            step()
        cls.ops = cls.tracker.recorded_ops()
        cls.report = cls.tracker.measure_ops(repetitions=3, warmup=1)
        cls.times = cls.tracker.rerun_times()

    def test_conv_and_linear_have_forward_and_backward_times(self):
        convs = top_level(self.ops, "aten::conv2d")
        self.assertEqual(len(convs), 3)
        (linear,) = top_level(self.ops, "aten::linear")
        for op in convs + [linear]:
            fwd, bwd = self.times[op["id"]]
            self.assertGreater(fwd, 0, op["name"])
            self.assertGreater(bwd, 0, op["name"])

    def test_ops_without_backward_get_no_backward_time(self):
        # BatchNorm's num_batches_tracked += 1: an integer add_, no grad.
        adds = [o for o in top_level(self.ops, "aten::add_")
                if o["arguments"][0].get("dtype") == "long int"]
        self.assertTrue(adds)
        fwd, bwd = self.times[adds[0]["id"]]
        self.assertGreater(fwd, 0)
        self.assertEqual(bwd, 0)

    def test_cross_entropy_target_is_a_valid_class_index(self):
        (ce,) = top_level(self.ops, "aten::cross_entropy_loss")
        # An out-of-range target raises in nll_loss on CPU, so a time means
        # the rebuilt targets were valid; a skip must say why.
        if ce["id"] in self.times:
            self.assertGreater(self.times[ce["id"]][0], 0)
            self.assertGreater(self.times[ce["id"]][1], 0)
        else:
            self.assertIn("aten::cross_entropy_loss", self.report["skipped"])
        grouped = rerun._group_arguments(ce)
        overload, schema = rerun.resolve(ce["name"], grouped)
        for _ in range(20):
            call = rerun.Call(overload, schema, grouped, ce["name"],
                              torch.device("cpu"), grad_fallback=True)
            target = call.args[1]
            self.assertEqual(target.dtype, torch.int64)
            self.assertTrue(bool((target >= 0).all() and (target < 10).all()))

    def test_identical_calls_are_measured_once(self):
        conv2, conv3 = top_level(self.ops, "aten::conv2d")[1:]
        self.assertEqual(self.times[conv2["id"]], self.times[conv3["id"]])
        self.assertGreaterEqual(self.report["cached"], 1)
        self.assertLess(self.report["runs"], self.report["measured"])

    def test_optimizer_list_ops_are_skipped_with_a_reason(self):
        foreach = {o["name"] for o in self.ops
                   if o["parent_id"] == 0 and o["name"].startswith("aten::_foreach_")}
        self.assertTrue(foreach)
        for name in foreach:
            self.assertIn(name, self.report["skipped"])
            (reason,) = self.report["skipped"][name]
            self.assertIn("optimizer", reason)

    def test_report_accounts_for_every_forward_op(self):
        r = self.report
        skipped = sum(sum(v.values()) for v in r["skipped"].values())
        self.assertEqual(r["measured"] + skipped + r["out_of_time"], r["operations"])
        self.assertEqual(r["out_of_time"], 0)
        forward_ids = {o["id"] for o, _ in rerun.forward_operations(self.ops)}
        self.assertTrue(set(self.times) <= forward_ids)
        # Only the optimizer's list ops are skipped in this model.
        for name in r["skipped"]:
            self.assertTrue(name.startswith("aten::_foreach_"), (name, r["skipped"][name]))
        self.assertEqual(r["backward_skipped"], {})

    def test_requires_grad_is_recorded_per_tensor(self):
        conv1 = top_level(self.ops, "aten::conv2d")[0]
        flags = [a.get("requires_grad") for a in conv1["arguments"][:3]]
        self.assertEqual(flags, [False, True, True])  # data, weight, bias
        conv2 = top_level(self.ops, "aten::conv2d")[1]
        self.assertTrue(conv2["arguments"][0]["requires_grad"])  # activation

    def test_backward_detection_follows_the_assembler(self):
        has_bwd = {o["name"]: b for o, b in rerun.forward_operations(self.ops)}
        for name in ("aten::conv2d", "aten::batch_norm", "aten::relu_",
                     "aten::relu", "aten::linear", "aten::cross_entropy_loss",
                     "aten::flatten"):
            self.assertTrue(has_bwd[name], name)
        self.assertFalse(has_bwd["aten::ones_like"])

    def test_max_seconds_leaves_ops_unmeasured(self):
        times, report = rerun.measure(self.ops, "cpu", repetitions=1, warmup=0,
                                      max_seconds=0.0)
        self.assertEqual(times, {})
        self.assertGreater(report["out_of_time"], 0)

    def test_rerun_times_reach_the_assembler_through_info(self):
        # A host region has no GPU work, so assembly fails after the rerun
        # map is read and checked: a negative time names the op.
        (linear,) = top_level(self.ops, "aten::linear")
        with mock.patch.object(habitat_agent.tracker, "origin_device", lambda d: {}):
            info = self.tracker._info(4)  # what get_tracked_trace assembles with
        self.assertEqual(info["rerun_times"], self.times)
        info["rerun_times"] = {linear["id"]: (5, -1)}
        with self.assertRaises(ValueError) as ctx:
            self.tracker._impl.assemble(info)
        self.assertIn('("aten::linear")', str(ctx.exception))
        info["rerun_times"] = self.times
        with self.assertRaises(RuntimeError) as ctx:
            self.tracker._impl.assemble(info)
        self.assertIn("no GPU work", str(ctx.exception))

    def test_not_while_tracking_and_not_before(self):
        fresh = habitat_agent.OperationTracker(source="host", verbose=False)
        with self.assertRaises(habitat_agent.TrackingError):
            fresh.measure_ops()
        with self.assertRaises(habitat_agent.TrackingError) as ctx:
            with fresh.track():
                self.tracker.measure_ops()
        self.assertIn("outside `track()`", str(ctx.exception))
        self.assertFalse(_C.is_recording())


class RebuildTest(unittest.TestCase):
    def record(self, fn):
        t = habitat_agent.OperationTracker(source="host", verbose=False)
        with t.track():
            fn()
        return t.recorded_ops()

    def test_dtype_names_map_to_torch_dtypes(self):
        dtypes = [torch.float32, torch.float64, torch.float16, torch.bfloat16,
                  torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8,
                  torch.bool, torch.complex64, torch.complex128]
        tensors = [torch.zeros(2, dtype=d) for d in dtypes]
        ops = self.record(lambda: [t.clone() for t in tensors])
        clones = [o for o in ops if o["parent_id"] == 0 and o["name"] == "aten::clone"]
        self.assertEqual([rerun.DTYPES[o["arguments"][0]["dtype"]] for o in clones],
                         dtypes)

    def test_factories_with_dtype_and_device_arguments(self):
        ops = self.record(lambda: (torch.zeros(3, 5, dtype=torch.float16),
                                   torch.full((2,), 7, device="cpu")))
        times, report = rerun.measure(ops, "cpu", repetitions=1, warmup=0)
        self.assertEqual(report["skipped"], {})
        self.assertEqual(report["measured"], report["operations"])

    def test_failures_and_unrebuildable_ops_do_not_stop_the_others(self):
        ops = self.record(lambda: (torch.relu(torch.randn(4)),
                                   torch.bincount(torch.tensor([1, 2, 2]))))
        relu = [o for o in ops if o["name"] == "aten::relu"][0]
        bad = dict(relu, id=10_000, name="aten::no_such_op_anywhere")
        unknown = dict(relu, id=10_001, name="aten::sqrt",
                       arguments=[{"name": "0", "none": True}])
        failing = dict(relu, id=10_002, name="aten::reshape",
                       arguments=[{"name": "0", "shape": [4], "dtype": "float",
                                   "requires_grad": False},
                                  {"name": "1", "integers": [3]}])
        times, report = rerun.measure(ops + [bad, unknown, failing], "cpu",
                                      repetitions=1, warmup=0)
        self.assertIn(relu["id"], times)
        s = report["skipped"]
        self.assertIn("no operator schema", s["aten::no_such_op_anywhere"])
        self.assertIn("no overload matches the recorded arguments", s["aten::sqrt"])
        (reason,) = s["aten::reshape"]
        self.assertTrue(reason.startswith("re-run failed: RuntimeError"), reason)
        (reason,) = s["aten::bincount"]
        self.assertIn("indices whose valid range is unknown", reason)

    def test_in_place_op_backward_is_timed_without_touching_a_leaf(self):
        x = torch.randn(16, 16, requires_grad=True)
        ops = self.record(lambda: torch.relu_(x * 2).sum().backward())
        times, report = rerun.measure(ops, "cpu", repetitions=2, warmup=1)
        (relu,) = [o for o in ops if o["parent_id"] == 0 and o["name"] == "aten::relu_"]
        self.assertGreater(times[relu["id"]][0], 0)
        self.assertGreater(times[relu["id"]][1], 0)
        self.assertEqual(report["backward_skipped"], {})


if __name__ == "__main__":
    unittest.main()
