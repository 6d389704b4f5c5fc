"""Unit tests of rerun_study.py's pure functions (no torch, no GPU, no CLI)."""

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rerun_study as R  # noqa: E402


def op(name, fwd, bwd, predicted_fwd=None, predicted_bwd=None):
    return {"name": name, "origin_forward_ns": fwd, "origin_backward_ns": bwd,
            "predicted_forward_ns": fwd if predicted_fwd is None else predicted_fwd,
            "predicted_backward_ns": bwd if predicted_bwd is None else predicted_bwd}


class EngineCasesTest(unittest.TestCase):
    """The agent's traces carry their re-runs and lose them for the rule; the
    study's get them written in from the .rerun.json.gz beside them."""

    def test_agent_traces_and_study_captures(self):
        import tempfile
        from pathlib import Path
        with tempfile.TemporaryDirectory() as d:
            d = Path(d)
            for name in ("inception_v3_b16_bf16.trace.gz", "gnmt_b32_fp32.trace.gz",
                         "gnmt_b32_fp32.rerun.json.gz", "gnmt_b32_fp32.rule.trace.gz"):
                (d / name).write_bytes(b"")
            cases = R.engine_cases(d, d / "out",
                                   write_in=lambda study, out: ("written", study.name),
                                   strip=lambda trace, out: ("stripped", trace.name))
        self.assertEqual(cases, [
            ("gnmt", "fp32", 32, ("written", "gnmt_b32_fp32.rerun.json.gz"),
             d / "gnmt_b32_fp32.trace.gz"),
            ("inception_v3", "bf16", 16, d / "inception_v3_b16_bf16.trace.gz",
             ("stripped", "inception_v3_b16_bf16.trace.gz"))])


class BoundedTest(unittest.TestCase):
    def test_a_gain_shrinks_with_the_work_and_never_grows(self):
        self.assertEqual(R.bounded(100, 120, 60), 50)   # delta: 40
        self.assertEqual(R.bounded(100, 120, 240), 220)  # as delta
        self.assertEqual(R.bounded(100, 90, 45), 55)    # a loss stays: as delta
        self.assertEqual(R.bounded(100, 90, 180), 190)
        self.assertEqual(R.ESTIMATORS["bounded"](100, 120, 60), 50)


class MatchingTest(unittest.TestCase):
    def test_kth_of_a_name_is_the_traces_kth(self):
        trace = {0: op("aten::linear", 1, 1), 3: op("torch::autograd::AccumulateGrad", 1, 0),
                 5: op("aten::conv2d", 1, 1), 9: op("aten::linear", 1, 1)}
        rerun = {"1": {"name": "aten::linear"}, "4": {"name": "aten::conv2d"},
                 "6": {"name": "aten::linear"}}
        self.assertEqual([i for i, _ in R.matched(rerun, trace, "t")], [0, 5, 9])

    def test_a_rerun_the_trace_lacks_is_an_error(self):
        with self.assertRaises(ValueError):
            list(R.matched({"1": {"name": "aten::bmm"}}, {0: op("aten::mm", 1, 1)}, "t"))


class DenoisedTest(unittest.TestCase):
    def test_twins_take_the_median_and_singles_keep_theirs(self):
        rows = {str(i): {"name": "aten::sdpa", "signature": "s",
                         "times": {"1": [27000, 94000], "2": [48000, 178000]}}
                for i in range(3)}
        rows["1"]["times"] = {"1": [1243000, 95000], "2": [48500, 179000]}
        rows["9"] = {"name": "aten::mm", "signature": "t", "times": {"1": [5, 6], "2": [7, 8]}}
        out = R.denoised(rows)
        self.assertEqual(out["1"]["times"]["1"], [27000, 94000])
        self.assertEqual(out["0"]["times"]["2"], [48000, 178000])
        self.assertEqual(out["9"]["times"], {"1": [5, 6], "2": [7, 8]})
        self.assertEqual(rows["1"]["times"]["1"], [1243000, 95000])  # input untouched


class RerunTotalTest(unittest.TestCase):
    def test_delta_and_ratio_on_the_origin(self):
        # Traced 60 us forward; re-runs 61 us at b and 80 us at 2b (a fixed
        # part of the re-run's own): delta adds 19 us, ratio scales by 80/61.
        origin = {0: op("aten::linear", 60000, 0)}
        engine = {0: op("aten::linear", 0, 0, predicted_fwd=100000, predicted_bwd=0)}
        pairs = [(0, {"times": {"1": [61000, 0], "2": [80000, 0]}})]
        total, covered = R.rerun_total(1000000, origin, origin, engine, pairs, 2, "delta")
        self.assertEqual(total, 1000000 - 100000 + 79000)
        self.assertEqual(covered, 1.0)
        total, _ = R.rerun_total(1000000, origin, origin, engine, pairs, 2, "ratio")
        self.assertAlmostEqual(total, 1000000 - 100000 + 60000 * 80 / 61)

    def test_another_gpu_takes_the_engines_ratio_between_the_gpus(self):
        origin = {0: op("aten::linear", 60000, 0)}
        device = {0: op("aten::linear", 60000, 0, predicted_fwd=30000)}  # 2x faster there
        engine = {0: op("aten::linear", 0, 0, predicted_fwd=50000, predicted_bwd=0)}
        pairs = [(0, {"times": {"1": [61000, 0], "2": [80000, 0]}})]
        total, _ = R.rerun_total(500000, origin, device, engine, pairs, 2, "delta")
        self.assertAlmostEqual(total, 500000 - 50000 + 79000 * 0.5)

    def test_a_pass_without_reruns_keeps_the_engines_time(self):
        origin = {0: op("aten::linear", 60000, 40000)}
        engine = {0: op("aten::linear", 0, 0, predicted_fwd=100000, predicted_bwd=70000)}
        pairs = [(0, {"times": {"1": [61000, 0], "2": [80000, 0]}})]  # no backward re-run
        total, covered = R.rerun_total(1000000, origin, origin, engine, pairs, 2, "delta")
        self.assertEqual(total, 1000000 - 100000 + 79000)
        self.assertAlmostEqual(covered, 0.6)

    def test_delta_never_goes_below_zero(self):
        self.assertEqual(R.ESTIMATORS["delta"](5000, 60000, 20000), 0.0)


if __name__ == "__main__":
    unittest.main()
