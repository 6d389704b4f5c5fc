"""Unit tests of the study's pure functions (no trace files, no GPU).

/usr/bin/python3 -m unittest eval/batch_scaling/test_study.py
"""

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import study  # noqa: E402


class ToNs(unittest.TestCase):
    def test_exact_beyond_double_precision(self):
        self.assertEqual(study.to_ns("4487200092719.371"), 4487200092719371)
        self.assertEqual(study.to_ns("0.7"), 700)
        self.assertEqual(study.to_ns(12), 12000)


class OpShapes(unittest.TestCase):
    def test_tensor_lists_flattened_and_factory_sizes_read(self):
        args = {"Input Dims": [[32, 50, 2048], [[1, 32, 1024], [1, 32, 1024]], [], []],
                "Input type": ["float", "TensorList", "ScalarList", "Scalar"],
                "Concrete Inputs": ["", "", "[1, 32, 1024]", "6"]}
        self.assertEqual(study.op_shapes(args),
                         [[32, 50, 2048], [1, 32, 1024], [1, 32, 1024], [1, 32, 1024]])


class BatchDimension(unittest.TestCase):
    def test_batch_first_flattened_and_sequence_first(self):
        self.assertTrue(study.carries_batch([32, 3, 224, 224], 32, set()))
        self.assertTrue(study.carries_batch([1600, 32000], 32, set()))  # 32 x 50 tokens
        self.assertTrue(study.carries_batch([1, 32, 1024], 32, set()))  # LSTM hidden
        self.assertTrue(study.carries_batch([3, 50, 32, 512], 32, set()))  # packed qkv
        self.assertTrue(study.carries_batch([50, 256, 64], 32, set()))  # batch x heads

    def test_parameters_and_unrelated_shapes_are_not_batch(self):
        self.assertFalse(study.carries_batch([64, 3, 4, 4], 64, {(64, 3, 4, 4)}))
        self.assertFalse(study.carries_batch([50, 512], 32, set()))  # positions
        self.assertFalse(study.carries_batch([], 32, set()))
        self.assertFalse(study.carries_batch([8], 32, set()))

    def test_innermost_op_with_shapes_decides(self):
        linear = study.Op("aten::linear", 0, 10, [[32, 512], [512, 512]])
        cast = study.Op("aten::copy_", 1, 2, [[512, 512], [512, 512]], linear)
        shapeless = study.Op("aten::fill_", 3, 4, [], linear)
        self.assertEqual(study.classify_op(cast, 32, {(512, 512)}), "fixed")
        self.assertEqual(study.classify_op(shapeless, 32, {(512, 512)}), "batch")
        self.assertEqual(study.classify_op(None, 32, set()), "unknown")

    def test_optimizer_and_accumulate_grad_are_fixed(self):
        step = study.Op("Optimizer.step#Adam.step", 0, 10, [])
        inner = study.Op("aten::mul_", 1, 2, [[32, 512]], step)
        self.assertEqual(study.classify_op(inner, 32, set()), "fixed")
        foreach = study.Op("aten::_foreach_add_", 0, 1, [])
        self.assertEqual(study.classify_op(foreach, 32, set()), "fixed")


class Occupancy(unittest.TestCase):
    def test_limits(self):
        self.assertEqual(study.blocks_per_sm(256, 32, 0), 8)      # threads
        self.assertEqual(study.blocks_per_sm(32, 16, 0), 32)      # block cap
        self.assertEqual(study.blocks_per_sm(256, 128, 0), 2)     # registers
        self.assertEqual(study.blocks_per_sm(128, 32, 100 * 1024), 2)  # shared memory
        self.assertEqual(study.blocks_per_sm(1024, 255, 0), 1)    # never below 1

    def test_waves(self):
        self.assertEqual(study.waves(132, 1), 1)
        self.assertEqual(study.waves(133, 1), 2)
        self.assertEqual(study.waves(1, 8), 1)
        self.assertEqual(study.waves(1056 * 3, 8), 3)


class ScalingFormulas(unittest.TestCase):
    def test_naive_and_overhead(self):
        self.assertEqual(study.scale_naive(10.0, 2), 20.0)
        self.assertEqual(study.scale_overhead(10.0, 2, 3.0), 17.0)
        self.assertEqual(study.scale_overhead(10.0, 0.5, 3.0), 6.5)
        self.assertEqual(study.scale_overhead(2.0, 4, 3.0), 2.0)  # t0 capped at t

    def test_waves_model(self):
        # one wave of 132 blocks -> 264 blocks = two waves: the varying part doubles
        self.assertEqual(study.scale_waves(10.0, 2, 132, 132, 2.0), 18.0)
        # half a wave stays one wave
        self.assertEqual(study.scale_waves(10.0, 2, 66, 132, 2.0), 10.0)

    def test_fill_model(self):
        self.assertEqual(study.scale_fill(10.0, 2, 66, 132, 0.0), 10.0)   # fills up
        self.assertEqual(study.scale_fill(10.0, 2, 264, 132, 0.0), 20.0)  # already full
        self.assertEqual(study.scale_fill(10.0, 4, 66, 132, 0.0), 20.0)


class KernelPrediction(unittest.TestCase):
    def kernel(self, family, batched="batch", dur=10000):
        return study.Kernel("k", "kernel", dur, (1056, 1, 1), (128, 1, 1), 32, 0,
                            batched=batched, family=family)

    def test_fixed_kernels_do_not_move(self):
        k = self.kernel("aten::_foreach_add_", batched="fixed")
        self.assertEqual(study.predict_kernel(k, 4, "naive", 0), 10000)
        k = self.kernel("aten::add_", batched="unknown")
        self.assertEqual(study.predict_kernel(k, 4, "overhead", 3000), 10000)

    def test_two_overheads_pick_by_family(self):
        self.assertEqual(study.predict_kernel(self.kernel("aten::mm"), 2, "kv", (1000, 8000)),
                         12000)
        self.assertEqual(study.predict_kernel(self.kernel("aten::add"), 2, "kv", (1000, 8000)),
                         19000)


if __name__ == "__main__":
    unittest.main()
