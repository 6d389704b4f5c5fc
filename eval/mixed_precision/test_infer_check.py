"""Pure parts of infer_check.py and the committed inference capture (no
torch, no GPU)."""
import csv
import json
import sys
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import benchmark  # noqa: E402
import infer_check  # noqa: E402

RESULTS = HERE / "results" / "h200_2026-11-29_infer"


class ComparableTest(unittest.TestCase):
    capture = {"batch_size": 1024, "img_size": 224}

    def row(self, batch="1024", img="224", params="21.8"):
        return {"infer_batch_size": batch, "infer_img_size": img, "param_count": params}

    def test_same_batch_size_and_definition(self):
        self.assertTrue(infer_check.comparable(self.capture, self.row(), {"21.8"}))

    def test_a_halved_batch_or_another_size_does_not_compare(self):
        self.assertFalse(infer_check.comparable(self.capture, self.row(batch="512"), {"21.8"}))
        self.assertFalse(infer_check.comparable(self.capture, self.row(img="288"), {"21.8"}))
        self.assertFalse(infer_check.comparable(self.capture, None, {"21.8"}))

    def test_a_redefined_model_compares_only_by_its_recorded_count(self):
        self.assertFalse(infer_check.comparable(self.capture, self.row(), {"51.83", "57.42"}))
        recorded = dict(self.capture, param_count_m=57.42)
        self.assertTrue(infer_check.comparable(recorded, self.row(params="57.42"),
                                               {"51.83", "57.42"}))
        self.assertFalse(infer_check.comparable(recorded, self.row(params="51.83"),
                                                {"51.83", "57.42"}))


class CommittedDataTest(unittest.TestCase):
    def test_every_capture_has_its_trace_and_a_family(self):
        fam = benchmark.families()
        caps = infer_check.captures(RESULTS)
        self.assertGreaterEqual(len(caps), 40)
        for c in caps:
            self.assertIn(c["model"], fam)
            self.assertTrue((RESULTS / "infer_nchw" / f"{c['model']}.trace.gz").exists())
            self.assertGreater(c["origin_step_ns_host_mean"], 0)

    def test_measured_files_hold_one_row_per_model_of_the_benchmark(self):
        fam = benchmark.families()
        for path in sorted(infer_check.MEASURED.glob("*.csv")):
            with open(path, newline="") as f:
                models = [r["model"] for r in csv.DictReader(f)]
            self.assertEqual(len(models), len(set(models)), path.name)
            self.assertEqual(set(models) - set(fam), set(), path.name)
        for name in infer_check.TARGETS.values():
            self.assertTrue((infer_check.MEASURED / name).exists(), name)

    def test_the_capture_log_names_every_model_once(self):
        lines = (RESULTS / "infer_nchw.jsonl").read_text().splitlines()
        models = [json.loads(x)["model"] for x in lines if x.strip()]
        self.assertEqual(len(models), len(set(models)))


if __name__ == "__main__":
    unittest.main()
