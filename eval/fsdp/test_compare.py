"""Pure parts of compare.py and measure_fsdp_one_gpu.py, and the committed
run (no torch, no GPU)."""
import sys
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import compare  # noqa: E402
import measure_fsdp as measure_real  # noqa: E402
import measure_fsdp_one_gpu as measure  # noqa: E402

RESULTS = HERE / "results" / "h200_fakepg_2026-11-29"
MEASURED = HERE / "results" / "h200x2_2026-11-29"
MEASURED_4 = HERE / "results" / "h200x4_2026-11-29"
FIT_4 = HERE / "results" / "h200x4_fit_2026-11-29"


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


class MeasuredRunTest(unittest.TestCase):
    def test_every_planned_traced_case_ran_on_two_and_four_gpus_with_its_rank_trace(self):
        for run, world in ((MEASURED, 2), (MEASURED_4, 4)):
            got = compare.measured_cases(run)
            planned = {(m, p, world) for m, p, traced in measure_real.plan() if traced}
            self.assertEqual(set(got), planned)
            for r in got.values():
                self.assertTrue((run / r["trace"]).exists(), r["trace"])
                self.assertEqual(len(r["peak_allocated_bytes_per_rank"]), world)

    def test_a_fit_case_the_budget_skipped_has_no_world_size(self):
        lines = [r for r in compare.run_lines(FIT_4) if r["model"] == "gpt2_355m"
                 and r["precision"] == "fp32"]
        self.assertEqual([r["status"] for r in lines], ["skipped", "skipped"])
        self.assertEqual(compare.world_size_of(lines), 0)
        ran = [r for r in compare.run_lines(FIT_4) if r["model"] == "llama_2p8b"
               and r["precision"] == "fp32"]
        self.assertEqual(compare.world_size_of(ran), 4)

    def test_the_large_model_does_not_fit_one_gpu_but_two(self):
        r = compare.measured_cases(MEASURED)[("llama_13b", "bf16", 2)]
        # 16 bytes a parameter of fp32 state and AdamW: over one H200's 141 GB.
        self.assertGreater(16 * r["params"], 141e9)
        self.assertLess(r["peak_allocated_bytes"], 141e9)

    def test_a_rank_without_a_single_gpu_measurement_reports_dashes(self):
        rows = [{"model": "llama_13b", "precision": "bf16", "gpus": 2, "measured_ms": 807.4,
                 "predicted_ms": 769.3, "err_step_pct": -4.7, "single_predicted_ms": 905.2}]
        table = compare.rank_report(rows)
        self.assertIn("| llama_13b | bf16 | 2 | 807.4 | 769.3 | -4.7 | — | 905.2 | — | — | — | — |",
                      table)
        self.assertIn("Single-GPU step from a rank: none.", table)

    def test_a_fit_is_exact_when_its_batch_ran_and_twice_it_did_not(self):
        rows = [{"model": "m", "precision": "bf16", "gpus": 2, "batch": 16, "ran": "ok",
                 "next_ran": "oom", "predicted_gib": 1.0, "measured_gib": 1.0},
                {"model": "m", "precision": "fp32", "gpus": 2, "batch": 8, "ran": "oom",
                 "next_ran": None, "predicted_gib": 1.0, "measured_gib": 0.0}]
        self.assertEqual(compare.fit_report(rows)[-1],
                         "2 fits: exact (the batch ran, twice it ran out of memory) 1.")

    def test_host_bound_is_the_predictors_rule(self):
        self.assertTrue(compare.host_bound(84, 100))
        self.assertFalse(compare.host_bound(85, 100))


class PlanTest(unittest.TestCase):
    def test_the_real_run_ends_by_repeating_its_first_case_untraced(self):
        order = measure_real.plan()
        self.assertEqual(order[-1], order[0][:2] + (False,))
        self.assertTrue(all(traced for *_, traced in order[:-1]))
        self.assertEqual({m for m, _, _ in order} - set(measure.MODELS), {"llama_13b"})

    def test_smaller_models_first(self):
        order = [m for m, _ in measure.plan()]
        self.assertEqual(order[0], "gpt2_355m")
        self.assertEqual(order[-1], "llama_2p8b")

    def test_error_is_signed_percent_of_the_measured(self):
        self.assertEqual(compare.error_pct(110, 100), 10.0)
        self.assertEqual(compare.error_pct(90, 100), -10.0)


if __name__ == "__main__":
    unittest.main()
