"""Pure parts of occupancy_check.py and its committed runs (no torch, no GPU)."""
import sys
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import occupancy_check as oc  # noqa: E402

RESULTS = HERE / "results" / "h200_2026-11-30_occupancy"


class BlocksPerSmTest(unittest.TestCase):
    def test_threads_registers_and_block_slots_each_limit(self):
        # 128 threads, 32 registers: 16 by threads on a 2048-thread SM.
        self.assertEqual(oc.blocks_per_sm(128, 32, 2048, 65536, 32), 16)
        self.assertEqual(oc.blocks_per_sm(128, 32, 1536, 65536, 32), 12)
        # 1024 threads fit twice on a Hopper SM, once with 1536 free.
        self.assertEqual(oc.blocks_per_sm(1024, 32, 2048, 65536, 32), 2)
        self.assertEqual(oc.blocks_per_sm(1024, 32, 1536, 65536, 32), 1)
        # 33 registers round up to 40 a thread (256 a warp at a time).
        self.assertEqual(oc.blocks_per_sm(128, 33, 2048, 65536, 32), 12)
        self.assertEqual(oc.blocks_per_sm(32, 8, 2048, 65536, 4), 4)


class MeasuredGpuTest(unittest.TestCase):
    def test_the_run_names_its_gpu_and_an_unknown_one_is_refused(self):
        gpu = oc.measured_gpu({"device": "NVIDIA H200"})
        self.assertEqual(gpu["id"], "H200")
        self.assertEqual(gpu["max_threads_per_sm"], 2048)
        with self.assertRaisesRegex(ValueError, "not a driver name"):
            oc.measured_gpu({"device": "NVIDIA H999"})


class CommittedRunsTest(unittest.TestCase):
    def test_watchdog_runs_are_left_out_and_the_rest_compared(self):
        import json
        result = json.loads((RESULTS / "occupancy_h200.json").read_text())
        released = sum(1 for op in result["operations"] for r in op["runs"]
                       if r.get("released_by_watchdog"))
        self.assertGreater(released, 0)
        rows = oc.report_rows(result)
        held = sum(1 for op in result["operations"] for r in op["runs"]
                   if r["held_threads_per_sm"])
        self.assertEqual(len(rows), held - released)
        for r in rows:
            self.assertGreater(r["measured"], 0.9)
            self.assertGreaterEqual(r["model"], 1.0)
        # A grid of 96 blocks is one wave either way: nothing to slow down.
        bn = [r for r in rows if r["op"] == "bn_training_nchw"]
        self.assertTrue(bn and all(r["waves"] == 1.0 for r in bn))

    def test_the_three_runs_agree_where_each_measured(self):
        import json
        runs = [oc.report_rows(json.loads((RESULTS / f).read_text()))
                for f in ("occupancy_h200_carveout.json", "occupancy_h200.json",
                          "occupancy_h200_run1.json")]
        # The holder with the largest carveout lets all but one operation run.
        self.assertGreaterEqual(len(runs[0]), 34)
        first = {(r["op"], r["free_threads"]): r["measured"] for r in runs[0]}
        for other in runs[1:]:
            for r in other:
                key = (r["op"], r["free_threads"])
                if key in first:
                    self.assertAlmostEqual(r["measured"], first[key], delta=0.09, msg=key)


if __name__ == "__main__":
    unittest.main()
