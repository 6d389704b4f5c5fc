"""Pure parts of benchmark.py and the committed capture (no torch, no GPU)."""
import json
import sys
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import benchmark  # noqa: E402

RESULTS = HERE / "results" / "h200_2026-11-28"


class FamiliesTest(unittest.TestCase):
    def test_every_model_has_a_known_family(self):
        fam = benchmark.families()
        self.assertGreaterEqual(len(fam), 40)
        self.assertEqual(set(fam.values()) - set(benchmark.FAMILIES), set())
        for family in benchmark.FAMILIES:
            self.assertIn(family, fam.values())

    def test_every_capture_has_its_trace_and_a_family(self):
        fam = benchmark.families()
        for layout in ("nchw", "nhwc"):
            for line in (RESULTS / f"{layout}.jsonl").read_text().splitlines():
                r = json.loads(line)
                self.assertEqual(r["status"], "ok", r["model"])
                self.assertIn(r["model"], fam)
                self.assertTrue((RESULTS / layout / f"{r['model']}.trace.gz").exists())
                self.assertGreater(r["origin_step_ns_median"], 0)


class SummaryTest(unittest.TestCase):
    def row(self, model, family, err, expected, layout="nchw"):
        r = {"model": model, "family": family, "layout": layout, "err_pct": err,
             "expected_err_pct": expected}
        for b in benchmark.BASELINES:
            r[f"{b}_pct"] = 2 * err
        return r

    def test_mape_coverage_and_worst(self):
        rows = [self.row("a", "mobile", 10, 5), self.row("b", "mobile", -30, 40),
                self.row("c", "dense", 2, 3, "nhwc")]
        lines = benchmark.summary(rows)
        everything = [x for x in lines if x.startswith("| all ")][0]
        self.assertIn("| 3 | 14.0 | 10.0 | -30.0 (b) | 2/3 | 28.0 |", everything)
        mobile = [x for x in lines if x.startswith("| mobile ")][0]
        self.assertIn("| 2 | 20.0 |", mobile)
        self.assertFalse(any(x.startswith("| mlp ") for x in lines))

    def test_stacks_agree_only_where_both_layouts_run_alike(self):
        rows = []
        # "same": both stacks run NCHW 1.2x slower than NHWC; "odd": the
        # origin 3x, the target 1.2x (the origin's NCHW software is slower).
        for model, origin_nchw in (("same", 120.0), ("odd", 300.0)):
            for layout, origin, measured, err in (("nchw", origin_nchw, 240.0, 5),
                                                  ("nhwc", 100.0, 200.0, -1)):
                r = self.row(model, "dense", err if model == "same" else 4 * err, 50, layout)
                r.update(origin_ms=origin, measured_ms=measured)
                rows.append(r)
        rows.append(self.row("nchw_only", "dense", 60, 50))
        agreement = benchmark.layout_agreement(rows)
        self.assertEqual(set(agreement), {"same", "odd"})
        self.assertAlmostEqual(agreement["same"], 1.0)
        self.assertAlmostEqual(agreement["odd"], 2.5)
        lines = benchmark.summary(rows)
        agree = [x for x in lines if x.startswith("| stacks agree on layout ")][0]
        self.assertIn("| 2 | 3.0 |", agree)
        disagree = [x for x in lines if x.startswith("| stacks disagree ")][0]
        self.assertIn("| 2 | 12.0 |", disagree)

    def test_mape_of_nothing_is_nan(self):
        self.assertNotEqual(benchmark.mape([]), benchmark.mape([]))


if __name__ == "__main__":
    unittest.main()
