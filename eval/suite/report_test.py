#!/usr/bin/env python3
"""Tests of report.py: its arithmetic, its input checks, and that the committed
docs/accuracy_e2e.md and .svg (and docs/accuracy_e2e_agent.md and .svg) are what
it makes of the committed CSVs."""
import csv
import io
import os
import re
import sys
import tempfile
import unittest
import xml.etree.ElementTree as ElementTree
from contextlib import redirect_stderr

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import report  # noqa: E402

CSV = "eval/results/h100_h200_fixtures.csv"


class ArithmeticTest(unittest.TestCase):
    def test_error_and_mape(self):
        self.assertAlmostEqual(report.error_pct(103, 100), 3.0)
        self.assertAlmostEqual(report.error_pct(90, 100), -10.0)
        self.assertIsNone(report.error_pct(None, 100))
        self.assertIsNone(report.error_pct(5, 0))
        self.assertAlmostEqual(report.mape([3.0, -10.0, None]), 6.5)
        self.assertIsNone(report.mape([]))

    def test_ticks_are_one_two_five(self):
        self.assertEqual(report.nice_ticks(3, 60), [5, 10, 20, 50])

    def test_gpu_bound_share_is_the_servers_host_bound_threshold(self):
        with open(os.path.join(ROOT, "core", "predict", "host_replay.h")) as f:
            match = re.search(r"kHostBoundIdleShare = ([0-9.]+);", f.read())
        self.assertIsNotNone(match)
        self.assertEqual(float(match.group(1)), report.GPU_BOUND_SHARE)


class InputTest(unittest.TestCase):
    def run_main(self, text):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "in.csv")
            with open(path, "w") as f:
                f.write(text)
            err = io.StringIO()
            with redirect_stderr(err):
                code = report.main([path, "--md", os.path.join(d, "r.md"),
                                    "--svg", os.path.join(d, "r.svg")])
            return code, err.getvalue()

    def test_wrong_header_is_named(self):
        code, err = self.run_main("case,model\n")
        self.assertEqual(code, 1)
        self.assertIn("in.csv: header", err)

    def test_short_row_and_bad_number_are_named(self):
        header = ",".join(report.COLUMNS) + "\n"
        code, err = self.run_main(header + "a,b\n")
        self.assertEqual(code, 1)
        self.assertIn("in.csv:2: 2 fields", err)
        with open(os.path.join(ROOT, CSV)) as f:
            row = f.read().splitlines()[1].split(",")
        row[report.COLUMNS.index("target_busy_ns")] = "12ms"
        code, err = self.run_main(header + ",".join(row) + "\n")
        self.assertEqual(code, 1)
        self.assertIn("target_busy_ns is not a number: '12ms'", err)

    def test_missing_file(self):
        err = io.StringIO()
        with redirect_stderr(err):
            self.assertEqual(report.main(["/nonexistent.csv", "--md", "x", "--svg", "y"]), 1)
        self.assertIn("/nonexistent.csv", err.getvalue())


class CommittedReportTest(unittest.TestCase):
    """The committed report is regenerated from the committed CSV, unchanged."""

    def test_committed_report_is_current(self):
        with tempfile.TemporaryDirectory() as d:
            cwd = os.getcwd()
            os.chdir(ROOT)
            try:
                code = report.main([CSV, "--md", os.path.join(d, "accuracy_e2e.md"),
                                    "--svg", os.path.join(d, "accuracy_e2e.svg")])
            finally:
                os.chdir(cwd)
            self.assertEqual(code, 0)
            for name in ("accuracy_e2e.md", "accuracy_e2e.svg"):
                with open(os.path.join(d, name)) as f, \
                        open(os.path.join(ROOT, "docs", name)) as g:
                    self.assertEqual(f.read(), g.read(), f"docs/{name} is stale: run "
                                     + report.REGENERATE)

    def test_every_row_is_in_the_tables_and_plot(self):
        with open(os.path.join(ROOT, CSV)) as f:
            rows = list(csv.DictReader(f))
        with open(os.path.join(ROOT, "docs", "accuracy_e2e.md")) as f:
            md = f.read()
        for r in rows:
            # Once in the GPU-time table and once in the wall-time table of its
            # direction.
            for table in ("GPU time", "wall time"):
                section = md.split(f"## {r['origin']} → {r['target']}: {table}")[1]
                section = section.split("\n## ")[0]
                self.assertEqual(section.count(f"\n| {r['case']} |"), 1, (r["case"], table))
        plot = ElementTree.parse(os.path.join(ROOT, "docs", "accuracy_e2e.svg"))
        ns = "{http://www.w3.org/2000/svg}"
        markers = [e for e in plot.iter() if e.tag in (ns + "circle", ns + "rect")
                   and e.find(ns + "title") is not None]
        predicted = [r for r in rows if not r["error"]]
        self.assertEqual(len(markers), 2 * len(predicted))


class AgentReportTest(unittest.TestCase):
    """docs/accuracy_e2e_agent.* from eval/results/*_agent.csv (--source=agent)."""

    def test_committed_agent_report_is_current(self):
        with tempfile.TemporaryDirectory() as d:
            cwd = os.getcwd()
            os.chdir(ROOT)
            try:
                code = report.main(["--source=agent"] + report.AGENT_CSVS +
                                   ["--md", os.path.join(d, "accuracy_e2e_agent.md"),
                                    "--svg", os.path.join(d, "accuracy_e2e_agent.svg")])
            finally:
                os.chdir(cwd)
            self.assertEqual(code, 0)
            for name in ("accuracy_e2e_agent.md", "accuracy_e2e_agent.svg"):
                with open(os.path.join(d, name)) as f, \
                        open(os.path.join(ROOT, "docs", name)) as g:
                    self.assertEqual(f.read(), g.read(), f"docs/{name} is stale: run "
                                     + report.REGENERATE_AGENT)

    def test_every_row_is_in_the_tables_and_plot(self):
        rows = []
        for path in report.AGENT_CSVS:
            with open(os.path.join(ROOT, path)) as f:
                rows += list(csv.DictReader(f))
        with open(os.path.join(ROOT, "docs", "accuracy_e2e_agent.md")) as f:
            md = f.read()
        for r in rows:
            direction = f"{r['origin']} ({r['origin_tag']}) → {r['target']} ({r['target_tag']})"
            for table in ("GPU time", "wall time"):
                section = md.split(f"## {direction}: {table}")[1].split("\n## ")[0]
                self.assertEqual(section.count(f"\n| {r['case']} |"), 1,
                                 (r["case"], direction, table))
        # Four directions: circles, squares, triangles and diamonds.
        plot = ElementTree.parse(os.path.join(ROOT, "docs", "accuracy_e2e_agent.svg"))
        ns = "{http://www.w3.org/2000/svg}"
        markers = [e for e in plot.iter()
                   if e.tag in (ns + "circle", ns + "rect", ns + "polygon")
                   and e.find(ns + "title") is not None]
        measured = [r for r in rows if not r["error"]]
        self.assertEqual(len(markers), 2 * len(measured))
        self.assertEqual(sum(1 for e in markers if e.tag == ns + "polygon"),
                         2 * sum(1 for r in measured if r["origin_tag"] == "h100_run2" or
                                 r["target_tag"] == "h100_run2"))

    def test_kineto_csv_is_not_an_agent_csv(self):
        err = io.StringIO()
        with tempfile.TemporaryDirectory() as d, redirect_stderr(err):
            code = report.main(["--source=agent", os.path.join(ROOT, CSV),
                                "--md", os.path.join(d, "r.md"),
                                "--svg", os.path.join(d, "r.svg")])
        self.assertEqual(code, 1)
        self.assertIn("header is not the habitat_eval_suite --source=agent header",
                      err.getvalue())


if __name__ == "__main__":
    unittest.main()
