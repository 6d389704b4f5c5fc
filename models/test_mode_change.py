"""Tests of mode_change.py's pairing and statistics (no model, no GPU)."""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mode_change  # noqa: E402
from habitat_models import features as feat  # noqa: E402

DEVICES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data",
                       "devices.textproto")


def row(mode, device, ns, m=4096, backward=False):
    config = {k: 0 for k in feat.CONFIG_COLUMNS}
    config.update(m=m, n=4096, k=4096, bias=1)
    return ("habitat", "linear", config, mode, backward, device, ns)


class CasesTest(unittest.TestCase):
    def test_pairs_an_origin_mode_on_one_gpu_with_fp32_on_the_other(self):
        by = mode_change.joined([
            row("tf32", "H100-SXM", 90_000), row("fp32", "H200", 600_000),
            row("fp32", "H100-SXM", 610_000),
            # Under data.MIN_NS on the target: not a case.
            row("tf32", "H100-SXM", 30_000, m=64), row("fp32", "H200", 15_000, m=64),
            # Not one of the two Hopper GPUs: ignored.
            row("tf32", "A100", 200_000), row("fp32", "A100", 900_000)])
        cases = list(mode_change.cases(by, "tf32"))
        self.assertEqual(len(cases), 1)
        family, config, backward, origin, target, origin_ns, target_ns = cases[0]
        self.assertEqual((family, config["m"], backward, origin, target, origin_ns, target_ns),
                         ("linear", 4096, False, "H100-SXM", "H200", 90_000, 600_000))
        self.assertEqual(list(mode_change.cases(by, "bf16")), [])


class LargeOverRooflineTest(unittest.TestCase):
    def test_percentiles_of_the_large_gemms_only(self):
        devices = feat.load_devices(DEVICES)
        h100 = devices["H100-SXM"]
        big = row("tf32", "H100-SXM", 0, m=16384)[2]
        roofline = feat.large_gemm_roofline_ns("linear", big, "tf32", False, h100)
        self.assertGreater(roofline, 0)
        rows = [row("tf32", "H100-SXM", f * roofline, m=16384) for f in (1.1, 1.3, 2.0)]
        rows.append(row("tf32", "H100-SXM", 50 * roofline, m=8))  # no large GEMM
        stats = mode_change.large_over_roofline(rows, devices)
        self.assertEqual(stats["rows"], 3)
        self.assertEqual(stats["median"], 1.3)
        self.assertEqual(mode_change.large_over_roofline([], devices), {"rows": 0})


if __name__ == "__main__":
    unittest.main()
