"""Unit tests of habitat_client.plot: the Pareto front, the plot and its
command line. No server, no torch, no network.

    python3 -m unittest discover -s client/python/tests -p 'test_*.py' -v

The Pareto front and the input checks need nothing; drawing needs
matplotlib (skipped without it), the PredictionResult case protobuf. Run
by CTest (python_client_unit_test, which discovers this file).
"""

import contextlib
import io
import json
import math
import os
import subprocess
import sys
import tempfile
import unittest
from unittest import mock

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE_ROOT = os.path.dirname(HERE)
sys.path.insert(0, PACKAGE_ROOT)

from habitat_client import plot  # noqa: E402
from habitat_client.plot import Point, pareto_front  # noqa: E402


def _importable(name):
    try:
        __import__(name)
        return True
    except ImportError:
        return False


HAVE_MATPLOTLIB = _importable("matplotlib")
HAVE_PROTOBUF = _importable("google.protobuf")
needs_matplotlib = unittest.skipUnless(HAVE_MATPLOTLIB, "matplotlib not importable here")

GIB = 1 << 30


def prediction(device_id, samples_per_second, price=None, batch_size=32, fits=None,
               rank_by_time=1, rank_by_cost=1):
    """One DevicePrediction as `habitat predict --format json` prints it
    (the fields the plot reads and a few more)."""
    p = {"device_id": device_id, "display_name": device_id, "gpu_time_ns": 10**7,
         "wall_time_ns": 10**7, "samples_per_second": samples_per_second,
         "has_price": price is not None, "price_per_hour": price or 0.0,
         "cost_per_1000_samples": 0.0, "rank_by_time": rank_by_time,
         "rank_by_cost": rank_by_cost if price is not None else 0, "is_origin": False,
         "warnings": [], "batch_size": batch_size}
    if fits is not None:
        p["memory"] = {"peak_allocated_bytes": 30 * GIB, "expected_error_percent": 4.0,
                       "usable_bytes": (40 if fits else 20) * GIB, "fits": fits,
                       "largest_fitting_batch": batch_size if fits else 0}
    return p


def response(predictions, batch_size=32, catalog="aws"):
    """A PredictResponse as `habitat predict --format json` prints it."""
    return {"trace_id": "sha256:" + "0" * 64, "origin_device_id": "H100-SXM",
            "catalog": catalog, "currency": "USD", "price_kind": "PRICE_KIND_ON_DEMAND",
            "batch_size": batch_size, "predictions": predictions, "warnings": [],
            "traced_batch_size": 32}


def fit_document(**extra):
    """A fit (batch_size 0): each GPU at its largest fitting batch; L4 fits
    none and T4 has no price. `extra`: fields added to every GPU."""
    document = response([
        prediction("H200", 5200.0, 6.2, batch_size=512, fits=True),
        prediction("H100-SXM", 4100.0, 4.1, batch_size=256, fits=True, rank_by_time=2),
        prediction("A100-SXM-80GB", 2000.0, 4.5, batch_size=256, fits=True, rank_by_time=3),
        prediction("L4", 9000.0, 0.8, batch_size=8, fits=False, rank_by_time=0, rank_by_cost=0),
        prediction("T4", 300.0, None, batch_size=32, fits=True, rank_by_time=4),
    ], batch_size=0)
    for p in document["predictions"]:
        p.update(extra)
    return document


def ids(points):
    return [p.device_id for p in points]


class ParetoFrontTest(unittest.TestCase):
    def test_dominated_points_are_left_out(self):
        points = [Point("A", 100.0, 1.0), Point("B", 300.0, 3.0), Point("C", 200.0, 4.0),
                  Point("D", 250.0, 2.0), Point("E", 50.0, 2.5)]
        # C: B is faster and cheaper; E: A is faster and cheaper.
        self.assertEqual(ids(pareto_front(points)), ["A", "D", "B"])

    def test_front_is_in_price_order_with_rising_throughput(self):
        front = pareto_front([Point(str(i), s, p) for i, (s, p) in
                              enumerate([(9.0, 9.0), (1.0, 1.0), (5.0, 5.0), (3.0, 2.0)])])
        self.assertEqual([p.price_per_hour for p in front], [1.0, 2.0, 5.0, 9.0])
        self.assertEqual([p.samples_per_second for p in front], [1.0, 3.0, 5.0, 9.0])

    def test_ties(self):
        # Equal on both: neither beats the other, both are on the front.
        self.assertEqual(ids(pareto_front([Point("B", 100.0, 2.0), Point("A", 100.0, 2.0)])),
                         ["A", "B"])
        # The same price, less throughput: beaten.
        self.assertEqual(ids(pareto_front([Point("A", 100.0, 2.0), Point("B", 90.0, 2.0)])),
                         ["A"])
        # The same throughput at a higher price: beaten.
        self.assertEqual(ids(pareto_front([Point("A", 100.0, 2.0), Point("B", 100.0, 3.0)])),
                         ["A"])
        # A tie behind a better point is beaten too.
        self.assertEqual(ids(pareto_front([Point("A", 200.0, 1.0), Point("B", 100.0, 2.0),
                                           Point("C", 100.0, 2.0)])), ["A"])
        # Free and priced: a price of 0 is a price.
        self.assertEqual(ids(pareto_front([Point("A", 10.0, 0.0), Point("B", 20.0, 1.0)])),
                         ["A", "B"])

    def test_unpriced_and_out_of_memory_gpus_are_not_on_it(self):
        points = [Point("unpriced", 1000.0, None), Point("oom", 900.0, 0.5, fits=False),
                  Point("fits", 100.0, 2.0, fits=True), Point("unknown", 200.0, 3.0, fits=None)]
        # Both excluded ones would beat every other point.
        self.assertEqual(ids(pareto_front(points)), ["fits", "unknown"])
        self.assertEqual(pareto_front([Point("unpriced", 1.0, None),
                                       Point("oom", 1.0, 1.0, fits=False)]), [])
        self.assertEqual(pareto_front([]), [])

    def test_values_that_cannot_be_placed_are_not_on_it(self):
        points = [Point("nan", math.nan, 1.0), Point("inf", math.inf, 1.0),
                  Point("free-nan", 5.0, math.nan), Point("ok", 1.0, 2.0)]
        self.assertEqual(ids(pareto_front(points)), ["ok"])
        self.assertFalse(Point("nan", math.nan, 1.0).plotted)


class PointsTest(unittest.TestCase):
    def test_from_the_json_document(self):
        points = {p.device_id: p for p in plot.points(fit_document())}
        self.assertEqual(points["H200"], Point("H200", 5200.0, 6.2, 512, True))
        self.assertEqual(points["L4"].fits, False)
        self.assertIsNone(points["T4"].price_per_hour)
        self.assertTrue(plot.is_fit(fit_document()))
        self.assertFalse(plot.is_fit(response([prediction("H200", 1.0, 1.0)])))
        self.assertEqual(ids(pareto_front(plot.points(fit_document()))), ["H100-SXM", "H200"])

    def test_data_parallel_steps_are_plotted_for_gpus_n(self):
        document = fit_document()
        steps = {"H200": {"gpus_per_node": 8, "nodes": 2, "samples_per_second": 80000.0,
                          "has_price": True, "price_per_node_hour": 63.2,
                          "expected_error_percent": 20.0},
                 "L4": {"gpus_per_node": 8, "nodes": 2, "unavailable": "no instance"}}
        for p in document["predictions"]:
            p["parallel"] = [steps.get(p["device_id"], {"gpus_per_node": 8})]
        points = {p.device_id: p for p in plot.points(document)}
        self.assertEqual(points["H200"].samples_per_second, 80000.0)
        self.assertAlmostEqual(points["H200"].price_per_hour, 63.2 / 8)
        self.assertEqual((points["H200"].parallel, points["H200"].error_percent), ("8x2", 20.0))
        self.assertIsNone(points["L4"].price_per_hour)  # unavailable: not placed
        self.assertIsNone(points["H100-SXM"].price_per_hour)  # no node price

    def test_without_memory_data_and_in_the_json_mappings_spelling(self):
        document = {"predictions": [
            {"deviceId": "H200", "samplesPerSecond": "NaN", "hasPrice": True,
             "pricePerHour": 6.2, "batchSize": "64"},
            {"device_id": "A100", "samples_per_second": 10}]}  # proto3 JSON leaves out zeros
        h200, a100 = plot.points(document)
        self.assertTrue(math.isnan(h200.samples_per_second))
        self.assertEqual((h200.price_per_hour, h200.batch_size, h200.fits), (6.2, 64, None))
        self.assertEqual((a100.samples_per_second, a100.price_per_hour), (10.0, None))

    def test_bad_input_says_where(self):
        cases = [
            ({}, "no \"predictions\" list"),
            ({"predictions": {}}, "no \"predictions\" list"),
            ({"predictions": [1]}, r"predictions\[0\]: expected an object"),
            ({"predictions": [{"device_id": ""}]}, r"predictions\[0\].device_id"),
            ({"predictions": [{"device_id": "A", "samples_per_second": "fast"}]},
             r"predictions\[0\].samples_per_second: expected a number"),
            ({"predictions": [{"device_id": "A", "has_price": "yes"}]},
             r"predictions\[0\].has_price: expected true or false"),
            ({"predictions": [{"device_id": "A", "price_per_hour": True}]},
             r"predictions\[0\].price_per_hour: expected a number"),
            ({"predictions": [{"device_id": "A", "batch_size": 2.5}]}, "expected a batch size"),
            ({"predictions": [{"device_id": "A", "memory": {"fits": 1}}]},
             r"predictions\[0\].memory.fits"),
            ([1, 2], "expected a prediction"),
        ]
        for document, message in cases:
            with self.subTest(document=document):
                with self.assertRaisesRegex(ValueError, message):
                    plot.points(document)

    @unittest.skipUnless(HAVE_PROTOBUF, "protobuf not importable here")
    def test_from_a_result_and_a_message(self):
        import habitat_client
        messages = habitat_client.messages()
        message = messages["PredictResponse"](catalog="aws", currency="USD", batch_size=0)
        p = message.predictions.add(device_id="H200", samples_per_second=5.0, has_price=True,
                                    price_per_hour=2.0, batch_size=128)
        p.memory.fits = True
        message.predictions.add(device_id="T4", samples_per_second=1.0, batch_size=8)
        result = habitat_client.PredictionResult.from_message(message)
        expected = [Point("H200", 5.0, 2.0, 128, True), Point("T4", 1.0, None, 8, None)]
        self.assertEqual(plot.points(result), expected)
        self.assertEqual(plot.points(message), expected)


class TitleAndFormatTest(unittest.TestCase):
    def test_title(self):
        self.assertEqual(plot.default_title(fit_document(), "resnet50"),
                         "Throughput against price per GPU-hour\nmodel resnet50, batch: the "
                         "largest that fits each GPU (traced at 32), catalog aws (on-demand), USD")
        document = response([prediction("H200", 1.0, 1.0)], batch_size=64)
        document["price_kind"] = "PRICE_KIND_SPOT"
        self.assertEqual(plot.default_title(document).split("\n")[1],
                         "batch 64, catalog aws (spot), USD")
        self.assertEqual(plot.default_title({"predictions": []}),
                         "Throughput against price per GPU-hour")

    def test_only_svg_and_png(self):
        self.assertEqual(plot.output_format("a/b.svg"), "svg")
        self.assertEqual(plot.output_format("B.PNG"), "png")
        for bad in ("plot.pdf", "plot", "plot.svg.gz"):
            with self.assertRaisesRegex(ValueError, "must end in .svg or .png"):
                plot.output_format(bad)
        # Refused before anything is drawn, matplotlib or not.
        with self.assertRaisesRegex(ValueError, "must end in .svg or .png"):
            plot.plot_throughput_vs_price(fit_document(), "plot.jpg")

    def test_without_matplotlib(self):
        with mock.patch.dict(sys.modules, {"matplotlib": None}):
            with self.assertRaisesRegex(ImportError,
                                        r"needs matplotlib.*habitat-client\[plot\]"):
                plot.plot_throughput_vs_price(fit_document(), "plot.svg")

    def test_nothing_priced(self):
        document = response([prediction("H200", 1.0, None)], catalog="")
        with self.assertRaisesRegex(ValueError, "no GPU in the prediction has a price"):
            plot.plot_throughput_vs_price(document, "plot.svg")


@needs_matplotlib
class DrawTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)

    def path(self, name):
        return os.path.join(self.tmp.name, name)

    def test_svg_with_labels(self):
        path = self.path("fit.svg")
        figure = plot.plot_throughput_vs_price(fit_document(), path, model_name="resnet50")
        with open(path, encoding="utf-8") as f:
            svg = f.read()
        self.assertTrue(svg.startswith("<?xml"), svg[:80])
        self.assertIn("<svg", svg)
        self.assertTrue(svg.rstrip().endswith("</svg>"))
        for text in ("H200", "H100-SXM", "A100-SXM-80GB", "L4", "batch 512", "batch 8",
                     "model resnet50", "Pareto front", "price per GPU-hour (USD)",
                     "no price, not shown: T4", "batch does not fit GPU memory"):
            self.assertIn(text, svg)
        axes = figure.axes[0]
        # The front's step line: H100-SXM, H200, then on to the dearest point.
        (step,) = axes.lines
        self.assertEqual(list(step.get_xdata()), [4.1, 6.2])
        # Labelled points: every priced GPU, not the unpriced T4.
        labels = sorted(t.get_text().split("\n")[0] for t in axes.texts
                        if not t.get_text().startswith("no price"))
        self.assertEqual(labels, ["A100-SXM-80GB", "H100-SXM", "H200", "L4"])
        # The GPU that does not fit is hollow.
        hollow = [c for c in axes.collections if len(c.get_facecolors()) == 0]
        self.assertEqual(len(hollow), 1)
        self.assertEqual([tuple(o) for o in hollow[0].get_offsets()], [(0.8, 9000.0)])
        # The same input, the same file.
        plot.plot_throughput_vs_price(fit_document(), self.path("again.svg"),
                                      model_name="resnet50")
        with open(self.path("again.svg"), encoding="utf-8") as f:
            self.assertEqual(f.read(), svg)

    def test_error_bars_and_shared_instances(self):
        figure = plot.plot_throughput_vs_price(
            fit_document(expected_error_percent=20.0, gpus_per_instance=8), None)
        axes = figure.axes[0]
        labels = sorted(t.get_text().split("\n")[0] for t in axes.texts
                        if not t.get_text().startswith("no price"))
        self.assertEqual(labels, ["A100-SXM-80GB (/8)", "H100-SXM (/8)", "H200 (/8)", "L4 (/8)"])
        self.assertIn("(/N): one GPU of an instance of N", axes.get_xlabel())
        # One bar per priced GPU, y ± 20 %.
        (bars,) = [c for c in axes.collections if c.__class__.__name__ == "LineCollection"]
        spans = sorted((round(s[0][1], 3), round(s[1][1], 3)) for s in bars.get_segments())
        self.assertEqual(spans[0], (1600.0, 2400.0))
        self.assertEqual(len(spans), 4)

    def test_labels_do_not_overlap(self):
        # Six GPUs close together in price and throughput.
        crowded = response([prediction(f"GPU-{i}", 1000.0 + 10 * i, 2.0 + 0.05 * i,
                                       fits=True) for i in range(6)], batch_size=0)
        figure = plot.plot_throughput_vs_price(crowded, None)
        renderer = figure.canvas.get_renderer()
        boxes = [t.get_window_extent(renderer) for t in figure.axes[0].texts]
        self.assertEqual(len(boxes), 6)
        for i, a in enumerate(boxes):
            for b in boxes[i + 1:]:
                self.assertFalse(a.overlaps(b), (a, b))

    def test_png_and_one_batch(self):
        document = response([prediction("H200", 500.0, 6.0),
                             prediction("A$100", 200.0, 4.0, rank_by_time=2),
                             prediction("B200", 400.0, 9.0, rank_by_time=3)])
        path = self.path("plot.png")
        figure = plot.plot_throughput_vs_price(document, path, title="my title")
        with open(path, "rb") as f:
            self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")
        texts = [t.get_text() for t in figure.axes[0].texts]
        self.assertIn("H200", texts)  # one batch: no batch in the labels
        self.assertIn(r"A\$100", texts)  # '$' literal, not math text
        self.assertEqual(figure.axes[0].get_title(), "my title")
        # The step line runs on to the dearest point's price (B200, beaten).
        (step,) = figure.axes[0].lines
        self.assertEqual(list(step.get_xdata()), [4.0, 6.0, 9.0])
        self.assertEqual(list(step.get_ydata()), [200.0, 500.0, 500.0])

    @unittest.skipUnless(HAVE_PROTOBUF, "protobuf not importable here")
    def test_result_plot_method(self):
        import habitat_client
        message = habitat_client.messages()["PredictResponse"](catalog="aws", currency="EUR",
                                                               batch_size=16)
        message.predictions.add(device_id="H200", samples_per_second=5.0, has_price=True,
                                price_per_hour=2.0, batch_size=16)
        path = self.path("result.svg")
        habitat_client.PredictionResult.from_message(message).plot(path)
        with open(path, encoding="utf-8") as f:
            svg = f.read()
        self.assertIn("H200", svg)
        self.assertIn("batch 16, catalog aws (on-demand), EUR", svg)


class CommandLineTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)

    def write(self, name, text):
        path = os.path.join(self.tmp.name, name)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        return path

    def run_module(self, *args, stdin=""):
        """python3 -m habitat_client.plot, as a user runs it."""
        env = dict(os.environ, PYTHONPATH=PACKAGE_ROOT, PYTHONDONTWRITEBYTECODE="1")
        return subprocess.run([sys.executable, "-m", "habitat_client.plot", *args], input=stdin,
                              env=env, capture_output=True, text=True, timeout=120)

    def main(self, *args, stdin=""):
        """plot.main in this process: (exit status, stderr)."""
        err = io.StringIO()
        with contextlib.redirect_stderr(err), mock.patch("sys.stdin", io.StringIO(stdin)):
            code = plot.main(list(args))
        return code, err.getvalue()

    @needs_matplotlib
    def test_plots_a_file_and_stdin(self):
        document = json.dumps(fit_document(), indent=1)
        source = self.write("prediction.json", document)
        out = os.path.join(self.tmp.name, "out.svg")
        run = self.run_module(source, out, "--model", "resnet50")
        self.assertEqual(run.returncode, 0, run.stderr)
        self.assertEqual((run.stdout, run.stderr), ("", ""))
        with open(out, encoding="utf-8") as f:
            svg = f.read()
        self.assertIn("<svg", svg)
        for device in ("H200", "H100-SXM", "A100-SXM-80GB", "L4", "model resnet50"):
            self.assertIn(device, svg)
        out_png = os.path.join(self.tmp.name, "out.png")
        code, err = self.main("-", out_png, stdin=document)
        self.assertEqual((code, err), (0, ""))
        with open(out_png, "rb") as f:
            self.assertEqual(f.read(4), b"\x89PNG")

    def test_bad_input_exits_2(self):
        good = self.write("good.json", json.dumps(fit_document()))
        out = os.path.join(self.tmp.name, "out.svg")
        cases = [
            ((self.write("bad.json", "{not json"), out), "is not JSON"),
            ((self.write("list.json", "[1, 2]"), out), "expected the JSON object"),
            ((self.write("empty.json", "{}"), out), "no \"predictions\" list"),
            ((self.write("unpriced.json", json.dumps(response(
                [prediction("H200", 1.0, None)], catalog=""))), out), "has a price"),
            ((os.path.join(self.tmp.name, "missing.json"), out), "cannot read"),
            ((good, os.path.join(self.tmp.name, "out.pdf")), "must end in .svg or .png"),
        ]
        for args, message in cases:
            with self.subTest(args=args):
                code, err = self.main(*args)
                self.assertEqual(code, 2, err)
                self.assertIn("python3 -m habitat_client.plot: error:", err)
                self.assertIn(message, err)
        code, err = self.main("-", out, stdin="")
        self.assertEqual(code, 2)
        self.assertIn("standard input is not JSON", err)
        self.assertFalse(os.path.exists(out), "nothing written on bad input")
        # Usage errors are argparse's: exit 2 too.
        run = self.run_module(good)
        self.assertEqual(run.returncode, 2)
        self.assertIn("usage:", run.stderr)

    def test_without_matplotlib_exits_1(self):
        good = self.write("good.json", json.dumps(fit_document()))
        with mock.patch.dict(sys.modules, {"matplotlib": None}):
            code, err = self.main(good, os.path.join(self.tmp.name, "out.svg"))
        self.assertEqual(code, 1)
        self.assertIn("needs matplotlib", err)


if __name__ == "__main__":
    unittest.main(verbosity=2)
