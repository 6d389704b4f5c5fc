"""Pure parts of compare.py and measure_fsdp_one_gpu.py, and the committed
run (no torch, no GPU)."""
import sys
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import compare  # noqa: E402
import measure_fsdp_one_gpu as measure  # noqa: E402

RESULTS = HERE / "results" / "h200_fakepg_2026-11-29"


class CommittedRunTest(unittest.TestCase):
    def test_every_model_and_precision_at_every_world_size(self):
        got = compare.cases(RESULTS)
        self.assertEqual(set(got), set(measure.plan()))
        for key, by_n in got.items():
            self.assertEqual(sorted(by_n), list(measure.WORLD_SIZES), key)
            self.assertTrue((RESULTS / by_n[1]["trace"]).exists(), key)

    def test_sharding_lowers_the_peak_of_the_large_models(self):
        got = compare.cases(RESULTS)
        for precision in measure.PRECISIONS:
            by_n = got[("llama_2p8b", precision)]
            self.assertGreater(by_n[1]["peak_allocated_bytes"], by_n[2]["peak_allocated_bytes"])
            self.assertGreater(by_n[2]["peak_allocated_bytes"], by_n[4]["peak_allocated_bytes"])


class PlanTest(unittest.TestCase):
    def test_smaller_models_first(self):
        order = [m for m, _ in measure.plan()]
        self.assertEqual(order[0], "gpt2_355m")
        self.assertEqual(order[-1], "llama_2p8b")

    def test_error_is_signed_percent_of_the_measured(self):
        self.assertEqual(compare.error_pct(110, 100), 10.0)
        self.assertEqual(compare.error_pct(90, 100), -10.0)


if __name__ == "__main__":
    unittest.main()
