#!/usr/bin/env python3
"""Checks the trace analysis of capture_fixtures.py without torch or a GPU.

Run: python3 -m unittest eval/capture/test_capture_fixtures.py
"""

import gzip
import json
import os
import sys
import tempfile
import unittest
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import capture_fixtures as cf  # noqa: E402


def _x(cat, name, ts, dur, **args):
    return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": 1,
            "ts": ts, "dur": dur, "args": args}


def _synthetic_trace():
    """Two steps; step 1 has overlapping kernels and a memcpy."""
    ev = [{"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "p"}}]
    ev.append(_x("user_annotation", "ProfilerStep#3", 1000.0, 100.0))
    ev.append(_x("cpu_op", "aten::mm", 1001.0, 5.0))
    ev.append(_x("cuda_runtime", "cudaLaunchKernel", 1002.0, 1.0, correlation=11))
    ev.append(_x("cuda_driver", "cuLaunchKernel", 1003.0, 1.0, correlation=12))
    ev.append(_x("kernel", "k1", 1010.0, 10.0, correlation=11))
    ev.append(_x("kernel", "k2", 1015.0, 10.0, correlation=12))  # overlaps k1
    ev.append({"ph": "s", "cat": "ac2g", "name": "ac2g", "id": 11, "pid": 1,
               "tid": 1, "ts": 1002.0})
    ev.append({"ph": "f", "cat": "ac2g", "name": "ac2g", "id": 11, "pid": 0,
               "tid": 7, "ts": 1010.0, "bp": "e"})
    ev.append(_x("user_annotation", "ProfilerStep#4", 1100.0, 100.0))
    ev.append(_x("cuda_runtime", "cudaMemcpyAsync", 1101.0, 1.0, correlation=21))
    ev.append(_x("cuda_runtime", "cudaLaunchKernel", 1102.0, 1.0, correlation=22))
    ev.append(_x("gpu_memcpy", "Memcpy DtoD", 1110.0, 2.5, correlation=21))
    ev.append(_x("kernel", "k3", 1120.0, 4.0, correlation=22))
    ev.append(_x("gpu_user_annotation", "ProfilerStep#4", 1110.0, 14.0))
    ev.append(_x("python_function", "ignored", 1101.0, 1.0))
    return {"schemaVersion": 1, "baseTimeNanoseconds": 5, "traceEvents": ev}


class AnalysisTest(unittest.TestCase):
    def test_to_ns_keeps_nanoseconds_of_large_timestamps(self):
        self.assertEqual(cf.to_ns(4486035818233.231), 4486035818233231)
        self.assertEqual(cf.to_ns(2), 2000)

    def test_union(self):
        self.assertEqual(cf.union_ns([(0, 10), (5, 15), (20, 25)]), 20)
        self.assertEqual(cf.union_ns([]), 0)

    def test_steps_busy_and_counts(self):
        steps = cf.analyze_steps(_synthetic_trace()["traceEvents"])
        self.assertEqual([s["name"] for s in steps],
                         ["ProfilerStep#3", "ProfilerStep#4"])
        self.assertEqual(steps[0]["gpu_busy_ns"], 15000)  # 1010..1025 us
        self.assertEqual(steps[0]["kernel_count"], 2)
        self.assertEqual(steps[1]["gpu_busy_ns"], 6500)
        self.assertEqual(steps[1]["memcpy_count"], 1)

    def test_shrink_keeps_one_step(self):
        trace = _synthetic_trace()
        steps = cf.analyze_steps(trace["traceEvents"])
        small = cf.shrink_trace(trace, steps[0])
        names = [e["name"] for e in small["traceEvents"]]
        self.assertIn("k1", names)
        self.assertNotIn("k3", names)
        self.assertNotIn("ignored", names)
        self.assertIn("ProfilerStep#4", names)  # annotations all kept
        self.assertEqual(sum(e.get("cat") == "ac2g" for e in small["traceEvents"]), 2)
        self.assertEqual(small["baseTimeNanoseconds"], 5)
        again = cf.analyze_steps(small["traceEvents"])
        self.assertEqual(again[0]["gpu_busy_ns"], steps[0]["gpu_busy_ns"])

    def test_process_trace_writes_gzip(self):
        with tempfile.TemporaryDirectory() as d:
            raw = Path(d) / "raw.json"
            trace = _synthetic_trace()
            # Five steps are required; replicate step 4 at later times.
            base = list(trace["traceEvents"])
            for i in range(3):
                off = 200.0 * (i + 1)
                for e in base:
                    if e.get("ph") == "X" and e["ts"] >= 1100.0:
                        c = dict(e, ts=e["ts"] + off, args=dict(e["args"]))
                        if "correlation" in c["args"]:
                            c["args"]["correlation"] += 100 * (i + 1)
                        if c["name"] == "ProfilerStep#4":
                            c["name"] = f"ProfilerStep#{5 + i}"
                        trace["traceEvents"].append(c)
            raw.write_text(json.dumps(trace))
            out = Path(d) / "x.json.gz"
            r = cf.process_trace(raw, out)
            self.assertEqual(len(r["active_steps"]), 5)
            self.assertEqual(r["gpu_busy_ns_median"], 6500)
            with gzip.open(out, "rt") as f:
                json.load(f)

    def test_percentile(self):
        self.assertEqual(cf.percentile_int([1, 2, 3, 4], 50), 2)  # 2.5 rounds to even
        self.assertEqual(cf.percentile_int(list(range(11)), 10), 1)


if __name__ == "__main__":
    unittest.main()
