"""Unit tests of the training side's readers (no xgboost, no data set)."""
import tempfile
import unittest
from pathlib import Path

from habitat_models import features as feat
from habitat_models import legacy_v1_features as legacy

DEVICES = Path(__file__).resolve().parent.parent / "data" / "devices.textproto"

NESTED = """
devices {
  id: "A"
  sm_count: 10
  interconnect {
    nvlink: true
    max_gpus_per_node: 8
    source: "x"
  }
  peak_fp32_tflops: 2.5
}
devices {
  id: "B"
  driver_names: "Board B"
  driver_names: "Board B2"
  sm_count: 20
}
"""


class LoadDevicesTest(unittest.TestCase):
    def test_nested_messages_are_skipped_and_the_device_continues(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp, "devices.textproto")
            path.write_text(NESTED)
            devices = feat.load_devices(path)
        self.assertEqual(sorted(devices), ["A", "B"])
        self.assertEqual(devices["A"]["sm_count"], 10)
        self.assertEqual(devices["A"]["peak_fp32_tflops"], 2.5)
        self.assertNotIn("nvlink", devices["A"])
        self.assertNotIn("max_gpus_per_node", devices["A"])
        self.assertEqual(devices["B"]["driver_names"], ["Board B", "Board B2"])
        self.assertEqual(devices["B"]["memory_bandwidth_gbps"], 0.0)

    def test_the_spec_database_reads_whole(self):
        devices = feat.load_devices(DEVICES)
        self.assertIn("H100-SXM", devices)
        self.assertIn("RTX3090", devices)  # follows a device with an interconnect block
        for device_id, device in devices.items():
            self.assertGreater(device["sm_count"], 0, device_id)
            self.assertGreater(device["peak_fp32_tflops"], 0, device_id)
            self.assertNotIn("allreduce_busbw_gbps", device, device_id)
        self.assertEqual(legacy.load_devices(DEVICES)["H100-SXM"]["sm_count"],
                         devices["H100-SXM"]["sm_count"])


class LargeGemmTest(unittest.TestCase):
    def setUp(self):
        self.devices = feat.load_devices(DEVICES)
        self.ffn = {k: 0 for k in feat.CONFIG_COLUMNS}
        self.ffn.update(m=8 * 512, n=4096, k=1024, bias=1)  # BERT-large's FFN linear

    def test_a_large_fp32_gemm_gets_its_sustained_roofline(self):
        t4 = self.devices["T4"]
        roofline = feat.large_gemm_roofline_ns("linear", self.ffn, "fp32", False, t4)
        flop = 2 * 4096 * 4096 * 1024
        self.assertAlmostEqual(roofline, flop / (t4["measured_fp32_gemm_tflops"] * 1e3))
        self.assertAlmostEqual(
            feat.large_gemm_roofline_ns("linear", self.ffn, "fp32", True, t4), 2 * roofline)

    def test_a_large_tf32_gemm_gets_its_tf32_roofline(self):
        a100 = self.devices["A100-PCIE-40GB"]
        flop = 2 * 4096 * 4096 * 1024
        self.assertAlmostEqual(feat.large_gemm_roofline_ns("linear", self.ffn, "tf32", False, a100),
                               flop / (a100["measured_tf32_gemm_tflops"] * 1e3))

    def test_a_mode_change_adds_the_extra_arithmetic_at_the_typical_multiple(self):
        h100 = self.devices["H100-SXM"]
        flop = 2 * 4096 * 4096 * 1024
        extra = flop / (h100["measured_fp32_gemm_tflops"] * 1e3) - flop / (
            h100["measured_bf16_gemm_tflops"] * 1e3)
        self.assertAlmostEqual(
            feat.mode_change_extra_ns("linear", self.ffn, "bf16", "fp32", False, h100, 1.25),
            1.25 * extra)
        # No extra where the mode stays, nor where the new mode is faster.
        self.assertEqual(
            feat.mode_change_extra_ns("linear", self.ffn, "fp32", "fp32", False, h100, 1.25), 0)
        self.assertEqual(
            feat.mode_change_extra_ns("linear", self.ffn, "fp32", "bf16", False, h100, 1.25), 0)

    def test_other_modes_families_and_small_gemms_get_none(self):
        t4 = self.devices["T4"]
        self.assertEqual(feat.large_gemm_roofline_ns("linear", self.ffn, "fp16", False, t4), 0)
        conv = {k: 0 for k in feat.CONFIG_COLUMNS}
        conv.update(b=256, c_in=256, c_out=256, kernel=3, stride=1, padding=1, size=56)
        self.assertEqual(feat.large_gemm_roofline_ns("conv2d", conv, "fp32", False, t4), 0)
        small = dict(self.ffn, m=64)  # 32 tiles of 128x128 on the T4's 40 SMs: under a wave
        self.assertEqual(feat.large_gemm_roofline_ns("linear", small, "fp32", False, t4), 0)
        # Memory-bound: a matrix-vector product.
        gemv = dict(self.ffn, m=1, n=65536, k=65536)
        self.assertEqual(feat.large_gemm_roofline_ns("linear", gemv, "fp32", False, t4), 0)


if __name__ == "__main__":
    unittest.main()
