"""The math settings the tracker records (habitat.v1.MathSettings), on CPU.

Needs the extension built (python setup.py build_ext --inplace in
agent/python) and a torch; run from agent/python:
    python -m unittest discover -s tests -v
"""

import contextlib
import unittest

import torch

import habitat_agent
from habitat_agent import tracker as tracker_module


@contextlib.contextmanager
def legacy_tf32(matmul: bool, cudnn: bool):
    """Sets the TF32 switches through the legacy API and restores PyTorch's
    defaults afterwards (setting the legacy switches also repairs a state
    the new fp32_precision API left)."""
    try:
        torch.backends.cuda.matmul.allow_tf32 = matmul
        torch.backends.cudnn.allow_tf32 = cudnn
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = True
        torch.set_float32_matmul_precision("highest")


class MathSettingsTest(unittest.TestCase):
    def test_pytorch_defaults(self):
        with legacy_tf32(False, True):
            m = tracker_module.math_settings()
        self.assertEqual(m, {"matmul_tf32": False, "cudnn_tf32": True,
                             "float32_matmul_precision": "highest",
                             "source": "recorded"})

    def test_legacy_switches(self):
        with legacy_tf32(True, False):
            m = tracker_module.math_settings()
            self.assertTrue(m["matmul_tf32"])
            self.assertFalse(m["cudnn_tf32"])
            self.assertEqual(m["float32_matmul_precision"], "high")

    def test_float32_matmul_precision(self):
        with legacy_tf32(False, True):
            torch.set_float32_matmul_precision("medium")
            m = tracker_module.math_settings()
            self.assertTrue(m["matmul_tf32"])
            self.assertEqual(m["float32_matmul_precision"], "medium")

    @unittest.skipUnless(hasattr(torch.backends.cuda.matmul, "fp32_precision"),
                         "torch without the fp32_precision API (before 2.9)")
    def test_new_api_after_the_legacy_one(self):
        # Torch refuses to read the legacy getters in this mixed state.
        with legacy_tf32(False, True):
            torch.backends.cuda.matmul.fp32_precision = "tf32"
            torch.backends.cudnn.conv.fp32_precision = "ieee"
            with self.assertRaises(RuntimeError):
                torch.backends.cuda.matmul.allow_tf32
            m = tracker_module.math_settings()
            self.assertTrue(m["matmul_tf32"])
            self.assertFalse(m["cudnn_tf32"])
            self.assertIn(m["float32_matmul_precision"], ("high", "medium"))


class TrackedMathSettingsTest(unittest.TestCase):
    def setUp(self):
        torch.manual_seed(0)
        self.lin = torch.nn.Linear(8, 4)
        self.x = torch.randn(2, 8)

    def track(self, precision="fp32", autocast=None):
        tracker = habitat_agent.OperationTracker(source="host", batch_size=2,
                                           precision=precision, verbose=False)
        with tracker.track():
            ctx = (torch.autocast("cpu", dtype=autocast) if autocast is not None
                   else contextlib.nullcontext())
            with ctx:
                y = self.lin(self.x)
            y.float().sum().backward()
        return tracker

    def test_before_tracking_it_is_an_error(self):
        tracker = habitat_agent.OperationTracker(source="host", batch_size=2)
        with self.assertRaises(habitat_agent.TrackingError):
            tracker.math_settings()

    def test_no_autocast(self):
        m = self.track().math_settings()
        self.assertEqual(m["autocast_dtype"], "")
        self.assertEqual(m["source"], "recorded")

    def test_autocast_in_the_region_is_seen(self):
        # The step enters autocast itself; the tracker was told "fp32".
        tracker = self.track(autocast=torch.bfloat16)
        seen = tracker._impl.autocast_seen()
        self.assertGreaterEqual(seen["ops"], 1)
        self.assertEqual(seen["dtype"], "BFloat16")
        self.assertEqual(tracker.math_settings()["autocast_dtype"], "bf16")
        linear = [o for o in tracker.recorded_ops()
                  if o["parent_id"] == 0 and o["name"] == "aten::linear"]
        self.assertEqual(len(linear), 1)

    def test_backward_and_nested_ops_are_not_counted(self):
        seen = self.track(autocast=torch.bfloat16)._impl.autocast_seen()
        top_forward = 1  # aten::linear; its nested casts and the backward are not
        self.assertEqual(seen["ops"], top_forward)

    def test_precision_argument_when_the_region_shows_none(self):
        m = self.track(precision="amp_fp16").math_settings()
        self.assertEqual(m["autocast_dtype"], "fp16")

    def test_settings_are_those_when_tracking_began(self):
        with legacy_tf32(False, True):
            tracker = self.track()
            torch.backends.cuda.matmul.allow_tf32 = True  # after the region
            m = tracker.math_settings()
        self.assertFalse(m["matmul_tf32"])
        self.assertTrue(m["cudnn_tf32"])
        self.assertEqual(m["float32_matmul_precision"], "highest")


if __name__ == "__main__":
    unittest.main()
