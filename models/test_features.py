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


if __name__ == "__main__":
    unittest.main()
