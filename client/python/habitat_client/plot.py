"""Throughput against price per GPU-hour, with the Pareto front: which GPUs
give the most samples per second for what an hour of them costs.

    habitat predict ... --format json > prediction.json
    python3 -m habitat_client.plot prediction.json price.svg     # or .png; '-': stdin

From Python, with a PredictionResult, a PredictResponse message or the JSON
document as a dict:

    from habitat_client.plot import plot_throughput_vs_price
    plot_throughput_vs_price(result, "price.svg")     # or result.plot("price.svg")

One point per priced GPU at the batch it was predicted at (with a fit,
`--fit` / predict(fit=True), the largest batch that fits each GPU, which
the label shows); with data-parallel steps (`--gpus N`), each GPU's step
on N GPUs ("x8", "x8x2") at its node's price per GPU-hour. A GPU priced
as one of an instance of N is marked "(/N)"; the bars are the expected
error. GPUs the batch does not fit are drawn hollow and grey and
are left out of the front; GPUs without a price cannot be placed and are
listed under the plot. The Pareto front holds the GPUs no other GPU beats
on throughput at no higher price; its step line is the best throughput
each budget per GPU-hour buys.

Drawing needs matplotlib (`pip install 'habitat-client[plot]'`; Debian:
python3-matplotlib), imported only then, through its Agg canvas (no pyplot,
no display, the caller's backend left alone). points() and pareto_front()
need nothing.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence

# The file formats a plot is written in, by suffix.
FORMATS = {".svg": "svg", ".png": "png"}


@dataclass(frozen=True)
class Point:
    """One GPU of a prediction, as the plot sees it."""
    device_id: str
    samples_per_second: float
    price_per_hour: Optional[float]  # per GPU-hour; None: no price
    batch_size: int = 0  # the batch it was predicted at (0: not said)
    fits: Optional[bool] = None  # the batch fits its memory; None: no memory data
    error_percent: float = 0.0  # expected error of its time (0: none given)
    gpus_per_instance: int = 0  # GPUs of the instance priced (0, 1: one GPU)
    parallel: str = ""  # a data-parallel step's GPUs ("8", "8x2"); "": one GPU

    @property
    def plotted(self) -> bool:
        """It has a place on the plot: a price and finite values."""
        return (self.price_per_hour is not None and math.isfinite(self.price_per_hour)
                and math.isfinite(self.samples_per_second))

    @property
    def eligible(self) -> bool:
        """It may be on the Pareto front: plotted, and not out of memory."""
        return self.plotted and self.fits is not False


def pareto_front(points: Sequence[Point]) -> List[Point]:
    """The points no other point beats: none has higher-or-equal throughput
    at a lower-or-equal price, better in one of the two. Only eligible
    points (priced, finite, fitting their memory or not known not to) take
    part. Points tied on both price and throughput are all on the front.
    In order of price (then device id): throughput rises along it."""
    candidates = sorted((p for p in points if p.eligible),
                        key=lambda p: (p.price_per_hour, -p.samples_per_second, p.device_id))
    front: List[Point] = []
    for p in candidates:
        if not front or p.samples_per_second > front[-1].samples_per_second:
            front.append(p)
        elif (p.samples_per_second == front[-1].samples_per_second
              and p.price_per_hour == front[-1].price_per_hour):
            front.append(p)  # the same as the last on both: dominated by neither
    return front


# Input: a PredictionResult, a PredictResponse message, or a dict of the
# JSON `habitat predict --format json` prints (proto field names; the
# protobuf JSON mapping's lowerCamelCase names and number strings too).

def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(word.capitalize() for word in rest)


def _get(d: Dict[str, Any], name: str, default=None):
    if name in d:
        return d[name]
    return d.get(_camel(name), default)


def _number(value, where: str) -> float:
    if isinstance(value, bool):
        raise ValueError(f"{where}: expected a number, got {value!r}")
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):  # the JSON mapping's int64 strings, "NaN", "Infinity"
        try:
            return float(value)
        except ValueError:
            pass
    raise ValueError(f"{where}: expected a number, got {value!r}")


def _integer(value, where: str) -> int:
    number = _number(value, where)
    if not number.is_integer() or number < 0:
        raise ValueError(f"{where}: expected a batch size, got {value!r}")
    return int(number)


def _flag(value, where: str) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"{where}: expected true or false, got {value!r}")
    return value


def as_response_dict(prediction) -> Dict[str, Any]:
    """The prediction as the dict of `habitat predict --format json`."""
    if hasattr(prediction, "to_dict") and hasattr(prediction, "predictions"):
        return prediction.to_dict()  # a PredictionResult
    if hasattr(prediction, "DESCRIPTOR"):  # a PredictResponse message
        from ._messages import to_dict
        return to_dict(prediction)
    if not isinstance(prediction, dict):
        raise ValueError("expected a prediction: a PredictionResult, a PredictResponse or the "
                         "JSON object `habitat predict --format json` prints, got "
                         f"{type(prediction).__name__}")
    return prediction


def _parallel_point(p: Dict[str, Any], device_id: str, fits, where: str) -> Optional[Point]:
    """With data-parallel steps (`--gpus N`), the GPU's first one (the
    request's configuration): its samples/s, and its node's price per
    GPU-hour; None without steps."""
    steps = _get(p, "parallel") or []
    if not steps:
        return None
    step = steps[0]
    where = f"{where}.parallel[0]"
    if not isinstance(step, dict):
        raise ValueError(f"{where}: expected an object, got {step!r}")
    gpus = _integer(_get(step, "gpus_per_node", 0), f"{where}.gpus_per_node")
    nodes = max(1, _integer(_get(step, "nodes", 0), f"{where}.nodes"))
    priced = (_flag(_get(step, "has_price", False), f"{where}.has_price")
              and gpus > 0 and not _get(step, "unavailable", ""))
    price = _number(_get(step, "price_per_node_hour", 0), f"{where}.price_per_node_hour")
    return Point(device_id=device_id,
                 samples_per_second=_number(_get(step, "samples_per_second", 0),
                                            f"{where}.samples_per_second"),
                 price_per_hour=price / gpus if priced else None,
                 batch_size=_integer(_get(p, "batch_size", 0), f"{where}.batch_size"),
                 fits=fits,
                 error_percent=_number(_get(step, "expected_error_percent", 0),
                                       f"{where}.expected_error_percent"),
                 parallel=f"{gpus}x{nodes}" if nodes > 1 else str(gpus))


def points(prediction) -> List[Point]:
    """The prediction's GPUs as Points, in its order; ValueError saying
    what is wrong where the input is not a prediction."""
    response = as_response_dict(prediction)
    predictions = _get(response, "predictions")
    if not isinstance(predictions, list):
        raise ValueError("not a prediction: no \"predictions\" list (expected the JSON object "
                         "`habitat predict --format json` prints)")
    out = []
    for i, p in enumerate(predictions):
        where = f"predictions[{i}]"
        if not isinstance(p, dict):
            raise ValueError(f"{where}: expected an object, got {p!r}")
        device_id = _get(p, "device_id")
        if not isinstance(device_id, str) or not device_id:
            raise ValueError(f"{where}.device_id: expected a device id, got {device_id!r}")
        has_price = _flag(_get(p, "has_price", False), f"{where}.has_price")
        price = _number(_get(p, "price_per_hour", 0), f"{where}.price_per_hour")
        memory = _get(p, "memory")
        fits = None
        if memory is not None:
            if not isinstance(memory, dict):
                raise ValueError(f"{where}.memory: expected an object, got {memory!r}")
            fits = _flag(_get(memory, "fits", False), f"{where}.memory.fits")
        step = _parallel_point(p, device_id, fits, where)
        if step is not None:
            out.append(step)
            continue
        out.append(Point(
            device_id=device_id,
            samples_per_second=_number(_get(p, "samples_per_second", 0),
                                       f"{where}.samples_per_second"),
            price_per_hour=price if has_price else None,
            batch_size=_integer(_get(p, "batch_size", 0), f"{where}.batch_size"),
            fits=fits,
            error_percent=_number(_get(p, "expected_error_percent", 0),
                                  f"{where}.expected_error_percent"),
            gpus_per_instance=_integer(_get(p, "gpus_per_instance", 0),
                                       f"{where}.gpus_per_instance")))
    return out


def is_fit(response: Dict[str, Any]) -> bool:
    """A fit's response: batch size 0, each GPU at its own."""
    return not _get(response, "batch_size", 0) and bool(_get(response, "predictions"))


def _text(value) -> str:
    """Printable, and literal to matplotlib ('$' starts its math text)."""
    text = "".join("?" if ord(c) < 0x20 or ord(c) == 0x7F else c for c in str(value))
    return text.replace("$", r"\$")


def default_title(response: Dict[str, Any], model_name: str = "") -> str:
    """'Throughput against price per GPU-hour' and a line with what is known
    of the model, batch, catalog and currency."""
    details = []
    model_name = model_name or _get(response, "model_name", "")
    if model_name:
        details.append(f"model {model_name}")
    traced = _get(response, "traced_batch_size", 0)
    if is_fit(response):
        details.append("batch: the largest that fits each GPU"
                       + (f" (traced at {traced})" if traced else ""))
    elif _get(response, "batch_size", 0):
        details.append(f"batch {_get(response, 'batch_size')}")
    catalog = _get(response, "catalog", "")
    if catalog:
        spot = _get(response, "price_kind", "") == "PRICE_KIND_SPOT"
        details.append(f"catalog {catalog} ({'spot' if spot else 'on-demand'})")
    currency = _get(response, "currency", "")
    if currency:
        details.append(str(currency))
    title = "Throughput against price per GPU-hour"
    return title + ("\n" + ", ".join(details) if details else "")


def output_format(path) -> str:
    """'svg' or 'png' from the path's suffix; ValueError for others."""
    suffix = os.path.splitext(os.fspath(path))[1].lower()
    if suffix not in FORMATS:
        raise ValueError(f"the plot is written as SVG or PNG: '{os.fspath(path)}' must end in "
                         ".svg or .png")
    return FORMATS[suffix]


def _require_matplotlib():
    try:
        import matplotlib
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
        from matplotlib.lines import Line2D
    except ImportError as e:
        raise ImportError(
            "plotting needs matplotlib, which habitat-client does not install: "
            "`pip install matplotlib` (or `pip install 'habitat-client[plot]'`; "
            "Debian: `apt install python3-matplotlib`)") from e
    return matplotlib, FigureCanvasAgg, Figure, Line2D


# Where a point's label may go, in offset points from it: right and above
# first, then below, left, and further out.
_LABEL_SPOTS = [(6, 4, "left", "bottom"), (6, -4, "left", "top"), (-6, 4, "right", "bottom"),
                (-6, -4, "right", "top"), (6, 18, "left", "bottom"), (6, -18, "left", "top"),
                (-6, 18, "right", "bottom"), (-6, -18, "right", "top"),
                (6, 32, "left", "bottom"), (6, -32, "left", "top")]


def _place_labels(axes, shown: Sequence[Point], fit: bool) -> None:
    """Labels each point where it overlaps no label placed before it
    (highest throughput first), trying _LABEL_SPOTS in order; the first
    spot where none is free."""
    renderer = axes.figure.canvas.get_renderer()
    placed = []
    for p in sorted(shown, key=lambda p: (-p.samples_per_second, p.price_per_hour)):
        label = _text(p.device_id)
        if p.parallel:
            label += f" x{p.parallel}"
        elif p.gpus_per_instance > 1:  # priced per GPU of an instance of N
            label += f" (/{p.gpus_per_instance})"
        if fit and p.batch_size:
            label += f"\nbatch {p.batch_size}"

        def annotate(spot):
            dx, dy, ha, va = spot
            return axes.annotate(label, (p.price_per_hour, p.samples_per_second),
                                 xytext=(dx, dy), textcoords="offset points", ha=ha, va=va,
                                 fontsize=8, color="0.45" if p.fits is False else "black",
                                 zorder=5)

        box = None
        for spot in _LABEL_SPOTS:
            text = annotate(spot)
            box = text.get_window_extent(renderer)
            if not any(box.overlaps(b) for b in placed):
                break
            text.remove()
            box = None
        if box is None:
            box = annotate(_LABEL_SPOTS[0]).get_window_extent(renderer)
        placed.append(box)


def _draw_error_bars(axes, shown: Sequence[Point]) -> None:
    """±err as error bars: the time's expected error as a share of the
    throughput (as the table's ±err column)."""
    with_error = [p for p in shown if p.error_percent > 0]
    if with_error:
        axes.errorbar([p.price_per_hour for p in with_error],
                      [p.samples_per_second for p in with_error],
                      yerr=[p.samples_per_second * p.error_percent / 100 for p in with_error],
                      fmt="none", ecolor="0.6", elinewidth=0.8, capsize=2, zorder=1)


def _label_axes(axes, response: Dict[str, Any], shown: Sequence[Point], fit: bool) -> None:
    """The axes' labels, with what the points' marks mean."""
    currency = _get(response, "currency", "")
    spot = _get(response, "price_kind", "") == "PRICE_KIND_SPOT"
    shared = any(p.gpus_per_instance > 1 for p in shown)
    axes.set_xlabel(f"price per GPU-hour ({_text(currency) or '?'}"
                    f"{', spot' if spot else ''})"
                    + ("; (/N): one GPU of an instance of N" if shared else ""))
    steps = any(p.parallel for p in shown)
    axes.set_ylabel("samples per second"
                    + (" of the data-parallel step (xN: its GPUs)" if steps else "")
                    + (" (each GPU at its largest batch)" if fit else ""))


def plot_throughput_vs_price(prediction, path, *, model_name: str = "",
                             title: Optional[str] = None, dpi: int = 150):
    """Draws samples per second (y) against price per GPU-hour (x), one
    labelled point per priced GPU, with the Pareto front, and writes it to
    `path` (.svg or .png, else ValueError; None: only drawn). Returns the
    matplotlib Figure.

    prediction: a PredictionResult, a PredictResponse message, or the dict
    of `habitat predict --format json`. A fit's points carry their batch
    in the label; GPUs the batch does not fit are hollow and grey, and not
    on the front. model_name (not in the response) goes into the title;
    title replaces it. ValueError when no GPU has a price; ImportError
    saying how to install matplotlib without it."""
    fmt = output_format(path) if path is not None else None
    response = as_response_dict(prediction)
    all_points = points(response)
    shown = [p for p in all_points if p.plotted]
    if not shown:
        raise ValueError("no GPU in the prediction has a price to plot it against: predict with "
                         "a price catalog (catalog='aws', or `habitat predict --catalog aws`)")
    front = pareto_front(all_points)
    on_front = {id(p) for p in front}
    fit = is_fit(response)
    matplotlib, FigureCanvasAgg, Figure, Line2D = _require_matplotlib()

    figure = Figure(figsize=(8, 5.5))
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    front_color = "C3"
    fitting = [p for p in shown if p.fits is not False and id(p) not in on_front]
    out_of_memory = [p for p in shown if p.fits is False]
    handles = []
    if front:
        xs = [p.price_per_hour for p in front]
        ys = [p.samples_per_second for p in front]
        right = max(p.price_per_hour for p in shown)
        if right > xs[-1]:  # the best a larger budget buys stays the last step's
            xs, ys = xs + [right], ys + [ys[-1]]
        axes.step(xs, ys, where="post", color=front_color, linewidth=1.5, alpha=0.8, zorder=2)
        axes.scatter([p.price_per_hour for p in front], [p.samples_per_second for p in front],
                     s=70, color=front_color, edgecolors="black", linewidths=0.8, zorder=4)
        handles.append(Line2D([], [], color=front_color, marker="o", markersize=8,
                              markeredgecolor="black",
                              label="Pareto front: most samples/s at no higher price"))
    if fitting:
        axes.scatter([p.price_per_hour for p in fitting],
                     [p.samples_per_second for p in fitting], s=36, color="C0", zorder=3)
        handles.append(Line2D([], [], color="C0", marker="o", linestyle="", label="other GPUs"))
    if out_of_memory:
        axes.scatter([p.price_per_hour for p in out_of_memory],
                     [p.samples_per_second for p in out_of_memory], s=36, facecolors="none",
                     edgecolors="0.55", linewidths=1.2, zorder=3)
        handles.append(Line2D([], [], color="0.55", marker="o", markerfacecolor="none",
                              linestyle="", label="batch does not fit GPU memory"))
    _draw_error_bars(axes, shown)
    _label_axes(axes, response, shown, fit)
    title = default_title(response, model_name) if title is None else title
    axes.set_title("\n".join(_text(line) for line in str(title).split("\n")), fontsize=10)
    # From zero, with room for the labels right of and above the points.
    axes.set_xlim(0, max(p.price_per_hour for p in shown) * 1.2 or 1)
    top = max(p.samples_per_second * (1 + p.error_percent / 100) for p in shown)
    axes.set_ylim(0, top * 1.12 or 1)
    _place_labels(axes, shown, fit)
    axes.grid(True, alpha=0.3)
    axes.legend(handles=handles, loc="lower right", fontsize=8)
    unpriced = [_text(p.device_id) for p in all_points if p.price_per_hour is None]
    if unpriced:
        axes.annotate("no price, not shown: " + ", ".join(unpriced), xy=(0, 0),
                      xycoords="axes fraction", xytext=(0, -36), textcoords="offset points",
                      va="top", fontsize=8, color="0.35")

    if path is not None:
        # Text stays text in SVG (searchable, the labels readable in the
        # file); fixed ids and no date keep the SVG the same run to run.
        with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "habitat"}):
            figure.savefig(path, format=fmt, dpi=dpi, bbox_inches="tight",
                           metadata={"Date": None} if fmt == "svg" else None)
    return figure


PROG = "python3 -m habitat_client.plot"


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Plots samples per second against price per GPU-hour for each GPU of a "
                    "prediction, with the Pareto front marked.")
    parser.add_argument("prediction", help="the output of `habitat predict --format json` "
                                           "('-': standard input)")
    parser.add_argument("output", help="the plot to write: FILE.svg or FILE.png")
    parser.add_argument("--model", default="", help="the model's name, for the title")
    parser.add_argument("--title", default=None, help="the title instead of the default one")
    args = parser.parse_args(argv)

    def fail(message: str, code: int = 2) -> int:
        print(f"{PROG}: error: {message}", file=sys.stderr)
        return code

    try:
        output_format(args.output)
    except ValueError as e:
        return fail(str(e))
    source = "standard input" if args.prediction == "-" else f"'{args.prediction}'"
    try:
        if args.prediction == "-":
            text = sys.stdin.read()
        else:
            with open(args.prediction, encoding="utf-8") as f:
                text = f.read()
    except (OSError, UnicodeDecodeError) as e:
        return fail(f"cannot read {source}: {e}")
    try:
        document = json.loads(text)
    except ValueError as e:
        return fail(f"{source} is not JSON ({e}); expected `habitat predict --format json`")
    try:
        if not isinstance(document, dict):
            raise ValueError("expected the JSON object `habitat predict --format json` prints")
        plot_throughput_vs_price(document, args.output, model_name=args.model,
                                 title=args.title)
    except ValueError as e:
        return fail(f"{source}: {e}")
    except ImportError as e:
        return fail(str(e), 1)
    except OSError as e:
        return fail(f"cannot write '{args.output}': {e}", 1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
