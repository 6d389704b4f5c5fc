"""Op recording through RecordFunction on CPU tensors (no GPU needed).

Needs the extension built (python setup.py build_ext --inplace in
agent/python) and a torch; run from agent/python:
    python -m unittest discover -s tests -v
"""

import unittest

import torch

import habitat_agent


def by_id(ops):
    return {o["id"]: o for o in ops}


def root(ops_by_id, o):
    while o["parent_id"]:
        o = ops_by_id[o["parent_id"]]
    return o


class RecorderCpuTest(unittest.TestCase):
    def setUp(self):
        torch.manual_seed(0)
        self.lin = torch.nn.Linear(8, 4)
        self.x = torch.randn(2, 8)
        self.tracker = habitat_agent.OperationTracker(source="host", batch_size=2)
        with self.tracker.track():
            y = torch.relu(self.lin(self.x)).sum()
            y.backward()
        self.ops = self.tracker.recorded_ops()
        self.by_id = by_id(self.ops)

    def top_level(self, name):
        return [o for o in self.ops if o["parent_id"] == 0 and o["name"] == name]

    def test_top_level_ops_with_shapes_and_dtypes(self):
        (linear,) = self.top_level("aten::linear")
        shapes = [a.get("shape") for a in linear["arguments"]]
        self.assertEqual(shapes, [[2, 8], [4, 8], [4]])
        self.assertEqual({a["dtype"] for a in linear["arguments"]}, {"float"})
        self.assertEqual(len(self.top_level("aten::relu")), 1)
        self.assertLessEqual(linear["start_ns"], linear["end_ns"])

    def test_scalars_and_int_lists(self):
        (addmm,) = [o for o in self.ops if o["name"] == "aten::addmm"]
        self.assertEqual(addmm["arguments"][3], {"name": "3", "integer": 1})
        transposes = [o for o in self.ops if o["name"] == "aten::transpose"]
        self.assertTrue(transposes)
        self.assertEqual(transposes[0]["arguments"][1], {"name": "1", "integer": 0})
        expand = [o for o in self.ops if o["name"] == "aten::expand"][0]
        self.assertEqual(expand["arguments"][1], {"name": "1", "integers": [2, 4]})

    def test_nesting_gives_parents_on_the_same_thread(self):
        (addmm,) = [o for o in self.ops if o["name"] == "aten::addmm"]
        parent = self.by_id[addmm["parent_id"]]
        self.assertEqual(parent["name"], "aten::linear")
        self.assertEqual(parent["thread_id"], addmm["thread_id"])

    def test_backward_nodes_carry_the_forward_sequence_number(self):
        nodes = {o["name"]: o for o in self.ops if o["is_backward"]}
        self.assertIn("ReluBackward0", nodes)
        self.assertIn("AddmmBackward0", nodes)
        self.assertIn("torch::autograd::AccumulateGrad", nodes)
        (relu,) = self.top_level("aten::relu")
        node = nodes["ReluBackward0"]
        self.assertGreaterEqual(relu["sequence_number"], 0)
        self.assertEqual(node["sequence_number"], relu["sequence_number"])
        self.assertEqual(node["forward_thread_id"], relu["thread_id"])
        # The node sits under the engine's evaluate_function range.
        self.assertEqual(root(self.by_id, node)["name"],
                         "autograd::engine::evaluate_function: ReluBackward0")
        # addmm, nested in linear, recorded the number of its node.
        (addmm,) = [o for o in self.ops if o["name"] == "aten::addmm"]
        self.assertEqual(nodes["AddmmBackward0"]["sequence_number"],
                         addmm["sequence_number"])

    def test_nothing_recorded_outside_the_region(self):
        n = len(self.ops)
        torch.relu(self.x)  # not tracked
        self.assertEqual(len(self.tracker.recorded_ops()), n)
        with self.tracker.track():
            torch.relu(self.x)
        names = [o["name"] for o in self.tracker.recorded_ops() if o["parent_id"] == 0]
        self.assertEqual(names, ["aten::relu"])

    def test_ids_are_unique_and_parents_precede_children(self):
        ids = [o["id"] for o in self.ops]
        self.assertEqual(len(ids), len(set(ids)))
        for o in self.ops:
            if o["parent_id"]:
                self.assertLess(o["parent_id"], o["id"])
                self.assertIn(o["parent_id"], self.by_id)

    def test_host_source_gives_no_trace(self):
        with self.assertRaises(habitat_agent.TrackingError) as ctx:
            self.tracker.get_tracked_trace()
        self.assertIn("source='cupti'", str(ctx.exception))

    def test_one_tracker_at_a_time(self):
        other = habitat_agent.OperationTracker(source="host", batch_size=1)
        with self.tracker.track():
            with self.assertRaises(habitat_agent.TrackingError) as ctx:
                with other.track():
                    pass
        self.assertIn("already tracking", str(ctx.exception))

    def test_bad_precision_is_a_clear_error(self):
        with self.assertRaises(ValueError) as ctx:
            habitat_agent.OperationTracker(source="host", precision="fp8")
        self.assertIn("precision must be one of", str(ctx.exception))




class InputSettingTest(unittest.TestCase):
    """A region without inputs (measure_gpu_busy uses one) must not leave
    later trackers without argument shapes: RecordFunction fixes
    needsInputs when the callback is added."""

    def linear_shapes(self, record_inputs):
        lin = torch.nn.Linear(8, 4)
        tracker = habitat_agent.OperationTracker(source="host", batch_size=2,
                                           record_inputs=record_inputs)
        with tracker.track():
            lin(torch.randn(2, 8))
        (linear,) = [o for o in tracker.recorded_ops()
                     if o["parent_id"] == 0 and o["name"] == "aten::linear"]
        return [a.get("shape") for a in linear["arguments"]]

    def test_inputs_after_a_region_without_them(self):
        self.assertEqual(self.linear_shapes(False), [])
        self.assertEqual(self.linear_shapes(True), [[2, 8], [4, 8], [4]])
        self.assertEqual(self.linear_shapes(False), [])
        self.assertEqual(self.linear_shapes(True), [[2, 8], [4, 8], [4]])


if __name__ == "__main__":
    unittest.main()
