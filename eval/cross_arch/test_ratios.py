"""Tests of ratios.py's pure functions (no CLI, no GPU)."""
import os
import tempfile
import unittest

import ratios


class LargestBatchTracesTest(unittest.TestCase):
    def test_keeps_the_largest_batch_per_model_and_precision(self):
        with tempfile.TemporaryDirectory() as suite:
            for name in ("gpt2_b4_fp32.trace.gz", "gpt2_b16_fp32.trace.gz",
                         "gpt2_b8_bf16.trace.gz", "inception_v3_b64_fp32.trace.gz",
                         "measurements.json", "gpt2_b32_fp16.trace.gz",
                         "gpt2_b16_int8.trace.gz"):
                open(os.path.join(suite, name), "w").close()
            self.assertEqual(ratios.largest_batch_traces(suite), {
                ("gpt2", "bf16"): "gpt2_b8_bf16.trace.gz",
                ("gpt2", "fp16"): "gpt2_b32_fp16.trace.gz",
                ("gpt2", "fp32"): "gpt2_b16_fp32.trace.gz",
                ("inception_v3", "fp32"): "inception_v3_b64_fp32.trace.gz"})


class BoundRatiosTest(unittest.TestCase):
    def spec(self, tflops, peak, streaming, datasheet):
        return {"measured_fp32_gemm_tflops": tflops, "peak_fp32_tflops": peak,
                "peak_tf32_tflops": 0.0, "peak_fp16_tensor_tflops": 0.0,
                "peak_bf16_tensor_tflops": 0.0,
                "streaming_bandwidth_gbps": streaming, "memory_bandwidth_gbps": datasheet}

    def test_measured_figures_else_the_predictors_default_fractions(self):
        specs = {ratios.ORIGIN: self.spec(50.0, 60.0, 3000.0, 3350.0),
                 "X": self.spec(10.0, 12.0, 600.0, 700.0),
                 # Nothing measured: 0.75 of the peak, 0.82 of the datasheet.
                 "Y": self.spec(0.0, 20.0, 0.0, 1000.0)}
        self.assertEqual(ratios.bound_ratios(specs, "X"), (5.0, 5.0))
        gemm, memory = ratios.bound_ratios(specs, "Y")
        self.assertAlmostEqual(gemm, 50.0 / 15.0)
        self.assertAlmostEqual(memory, 3000.0 / 820.0)


if __name__ == "__main__":
    unittest.main()
