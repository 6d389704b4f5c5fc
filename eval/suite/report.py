#!/usr/bin/env python3
"""Turns habitat_eval_suite CSVs into a Markdown accuracy report and an SVG plot.

    python3 eval/suite/report.py eval/results/h100_h200_fixtures.csv \
        --md docs/accuracy_e2e.md --svg docs/accuracy_e2e.svg
    python3 eval/suite/report.py --source=agent eval/results/h100_h200_agent.csv \
        eval/results/h100run2_h200_agent.csv \
        --md docs/accuracy_e2e_agent.md --svg docs/accuracy_e2e_agent.svg

Every row of the CSVs appears in the tables; rows the suite could not
predict are listed with their error and left out of the averages (the
report says how many). Python 3 standard library only: CI has nothing else.
"""
import argparse
import csv
import math
import os
import sys

# eval/suite/eval_row.cc, CsvHeader().
COLUMNS = [
    "case", "model", "batch", "precision", "origin", "target",
    "origin_wall_ns", "origin_busy_ns", "origin_host_share",
    "target_wall_ns", "target_busy_ns", "target_host_share",
    "trace_busy_ns", "origin_op_sum_ns", "replayed_origin_wall_ns", "replayed_origin_busy_ns",
    "predicted_wall_ns", "predicted_gpu_busy_ns", "predicted_op_sum_ns", "host_bound",
    "predicted_busy_scaled_ns",
    "same_flops_busy_ns", "same_flops_wall_ns", "bandwidth_busy_ns", "bandwidth_wall_ns",
    "trace_id", "error",
]
# habitat_eval_suite --source=agent appends these (eval_row.h).
HOST_SPEED_COLUMNS = [
    "origin_tag", "target_tag", "host_speed_hostbench", "predicted_wall_hostbench_ns",
    "host_speed_calibrated", "predicted_wall_calibrated_ns",
]
AGENT_COLUMNS = COLUMNS + HOST_SPEED_COLUMNS
TEXT_COLUMNS = {"case", "model", "precision", "origin", "target", "trace_id", "error",
                "origin_tag", "target_tag"}

# A target's iteration is GPU-bound below this measured host share: the
# server's host-bound threshold, kHostBoundIdleShare in core/predict/host_replay.h.
GPU_BOUND_SHARE = 0.15
SHARE_TEXT = f"{100 * GPU_BOUND_SHARE:.0f}%"
TARGET_GPU = 3.0
TARGET_WALL_GPU_BOUND = 4.0
TARGET_WALL_HOST_BOUND = 10.0

REGENERATE = ("python3 eval/suite/report.py eval/results/h100_h200_fixtures.csv "
              "--md docs/accuracy_e2e.md --svg docs/accuracy_e2e.svg")
AGENT_CSVS = ["eval/results/h100_h200_agent.csv", "eval/results/h100run2_h200_agent.csv"]
REGENERATE_AGENT = ("python3 eval/suite/report.py --source=agent " + " ".join(AGENT_CSVS) +
                    " --md docs/accuracy_e2e_agent.md --svg docs/accuracy_e2e_agent.svg")

# Marker colours by model, in order of first appearance (sorted model names).
PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
           "#7f7f7f", "#bcbd22", "#17becf"]


# Marker shape of the n-th direction in the plot.
SHAPE_NAMES = ["circle", "square", "triangle", "diamond"]


class ReportError(Exception):
    pass


def read_rows(paths, source="kineto"):
    expected = AGENT_COLUMNS if source == "agent" else COLUMNS
    rows = []
    for path in paths:
        try:
            with open(path, newline="") as f:
                reader = csv.reader(f)
                header = next(reader, None)
                if header != expected:
                    raise ReportError(f"{path}: header is not the habitat_eval_suite "
                                      f"--source={source} header "
                                      f"(expected {','.join(expected)})")
                for line_number, fields in enumerate(reader, start=2):
                    if len(fields) != len(expected):
                        raise ReportError(f"{path}:{line_number}: {len(fields)} fields, "
                                          f"expected {len(expected)}")
                    rows.append(parse_row(path, line_number, dict(zip(expected, fields))))
        except OSError as e:
            raise ReportError(f"{path}: {e.strerror}") from e
    if not rows:
        raise ReportError("no rows in " + ", ".join(paths))
    return rows


def parse_row(path, line_number, raw):
    row = {}
    for name, value in raw.items():
        if name in TEXT_COLUMNS:
            row[name] = value
        elif value == "":
            row[name] = None
        else:
            try:
                row[name] = (float(value) if "share" in name or "speed" in name
                             else int(value))
            except ValueError as e:
                raise ReportError(f"{path}:{line_number}: {name} is not a number: "
                                  f"{value!r}") from e
    if row.get("origin_tag"):
        # Capture sets of one GPU kind from different leases stay apart.
        row["direction"] = (f"{row['origin']} ({row['origin_tag']}) → "
                            f"{row['target']} ({row['target_tag']})")
    else:
        row["direction"] = f"{row['origin']} → {row['target']}"
    # Usable in the averages: measured on the target and predicted.
    row["ok"] = (not row["error"] and row["target_busy_ns"] is not None
                 and row["predicted_gpu_busy_ns"] is not None)
    return row


def error_pct(predicted, measured):
    if predicted is None or measured is None or measured == 0:
        return None
    return 100.0 * (predicted - measured) / measured


def mape(values):
    values = [abs(v) for v in values if v is not None]
    return sum(values) / len(values) if values else None


def ms(ns):
    return "" if ns is None else f"{ns / 1e6:.2f}"


def signed(pct):
    return "" if pct is None else f"{pct:+.1f}"


def plain(pct):
    return "n/a" if pct is None else f"{pct:.1f}"


def cell(text):
    return text.replace("|", "\\|").replace("\n", " ")


def directions(rows):
    seen = []
    for row in rows:
        if row["direction"] not in seen:
            seen.append(row["direction"])
    return seen


# --- Markdown -------------------------------------------------------------

def gpu_table(rows):
    out = ["| case | measured origin ms | measured target ms | predicted ms | error % | "
           "Σ op times error % | eval_fixtures scaling error % | same-FLOPS error % | "
           "bandwidth-ratio error % | replay on origin error % | note |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        t = r["target_busy_ns"]
        out.append("| " + " | ".join([
            r["case"], ms(r["origin_busy_ns"]), ms(t), ms(r["predicted_gpu_busy_ns"]),
            signed(error_pct(r["predicted_gpu_busy_ns"], t)),
            signed(error_pct(r["predicted_op_sum_ns"], t)),
            signed(error_pct(r["predicted_busy_scaled_ns"], t)),
            signed(error_pct(r["same_flops_busy_ns"], t)),
            signed(error_pct(r["bandwidth_busy_ns"], t)),
            signed(error_pct(r["replayed_origin_busy_ns"], r["origin_busy_ns"])),
            cell(r["error"])]) + " |")
    return out


def speed(value):
    return "" if value is None else f"{value:.2f}"


def wall_table(rows, host_speeds=False):
    out = ["| case | measured origin ms | measured target ms | target host share % | "
           "predicted ms | error % | flagged host-bound | Σ op times error % | "
           "same-FLOPS error % | bandwidth-ratio error % | replay on origin error % | note |",
           "|---|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---|"]
    if host_speeds:
        # The host-speed predictions go before the note.
        out = [out[0][:-len(" note |")] + " hostbench host speed | error % with it | "
               "calibrated host speed | error % with it | note |",
               out[1][:-len("---|")] + "---:|---:|---:|---:|---|"]
    for r in rows:
        t = r["target_wall_ns"]
        share = r["target_host_share"]
        flag = "" if r["host_bound"] is None else ("yes" if r["host_bound"] else "no")
        out.append("| " + " | ".join([
            r["case"], ms(r["origin_wall_ns"]), ms(t),
            "" if share is None else f"{100 * share:.0f}",
            ms(r["predicted_wall_ns"]), signed(error_pct(r["predicted_wall_ns"], t)), flag,
            signed(error_pct(r["predicted_op_sum_ns"], t)),
            signed(error_pct(r["same_flops_wall_ns"], t)),
            signed(error_pct(r["bandwidth_wall_ns"], t)),
            signed(error_pct(r["replayed_origin_wall_ns"], r["origin_wall_ns"]))] +
            ([speed(r["host_speed_hostbench"]),
              signed(error_pct(r["predicted_wall_hostbench_ns"], t)),
              speed(r["host_speed_calibrated"]),
              signed(error_pct(r["predicted_wall_calibrated_ns"], t))] if host_speeds else []) +
            [cell(r["error"])]) + " |")
    return out


def median(values):
    values = sorted(v for v in values if v is not None)
    if not values:
        return None
    n = len(values)
    return values[n // 2] if n % 2 else 0.5 * (values[n // 2 - 1] + values[n // 2])


def host_speed_lines(rows):
    """Wall-time MAPE with the target host assumed as fast as the origin's, at
    the hostbench speed, and at the speed calibrated on the other models."""
    out = ["| direction | class | cases | host speed 1.0 MAPE % | hostbench speed | "
           "hostbench MAPE % | calibrated speed (median, range) | calibrated MAPE % | target |",
           "|---|---|---:|---:|---:|---:|---|---:|---:|"]
    for direction in directions(rows):
        ok = [r for r in rows if r["direction"] == direction and r["ok"]]
        for label, group, target in [
                ("GPU-bound", [r for r in ok if r["target_host_share"] < GPU_BOUND_SHARE],
                 TARGET_WALL_GPU_BOUND),
                ("host-bound", [r for r in ok if r["target_host_share"] >= GPU_BOUND_SHARE],
                 TARGET_WALL_HOST_BOUND)]:
            def m(column):
                return mape([error_pct(r[column], r["target_wall_ns"]) for r in group])
            bench = median(r["host_speed_hostbench"] for r in group)
            calibrated = [r["host_speed_calibrated"] for r in group
                          if r["host_speed_calibrated"] is not None]
            with_bench = [r for r in group if r["predicted_wall_hostbench_ns"] is not None]
            with_cal = [r for r in group if r["predicted_wall_calibrated_ns"] is not None]
            out.append("| " + " | ".join([
                direction, label, str(len(group)), plain(m("predicted_wall_ns")),
                "none" if bench is None else speed(bench),
                plain(m("predicted_wall_hostbench_ns")) if len(with_bench) == len(group)
                else "n/a",
                "none" if not calibrated else
                f"{median(calibrated):.2f} ({min(calibrated):.2f}–{max(calibrated):.2f})",
                plain(m("predicted_wall_calibrated_ns")) if len(with_cal) == len(group)
                else "n/a",
                f"≤ {target:.0f}"]) + " |")
    return out


def summary_lines(rows):
    """Per-direction MAPEs: GPU time, and wall time of GPU-bound and of
    host-bound cases."""
    out = ["| direction | quantity | cases | Habitat (server) MAPE % | target | met | "
           "Σ op times MAPE % | eval_fixtures scaling MAPE % | same-FLOPS MAPE % | "
           "bandwidth-ratio MAPE % | replay on origin MAPE % |",
           "|---|---|---:|---:|---:|---|---:|---:|---:|---:|---:|"]
    for direction in directions(rows):
        ok = [r for r in rows if r["direction"] == direction and r["ok"]]
        gpu_bound = [r for r in ok if r["target_host_share"] < GPU_BOUND_SHARE]
        host_bound = [r for r in ok if r["target_host_share"] >= GPU_BOUND_SHARE]
        groups = [
            ("GPU time, all cases", ok, "busy", TARGET_GPU),
            (f"wall time, GPU-bound (host share < {SHARE_TEXT})", gpu_bound, "wall",
             TARGET_WALL_GPU_BOUND),
            (f"wall time, host-bound (host share ≥ {SHARE_TEXT})", host_bound, "wall",
             TARGET_WALL_HOST_BOUND),
        ]
        for label, group, kind, target in groups:
            measured = "target_busy_ns" if kind == "busy" else "target_wall_ns"
            predicted = "predicted_gpu_busy_ns" if kind == "busy" else "predicted_wall_ns"

            def m(column, against=measured):
                return mape([error_pct(r[column], r[against]) for r in group])

            habitat = m(predicted)
            met = "" if habitat is None else ("yes" if habitat <= target else "**no**")
            out.append("| " + " | ".join([
                direction, label, str(len(group)),
                "n/a" if habitat is None else f"**{habitat:.1f}**", f"≤ {target:.0f}", met,
                plain(m("predicted_op_sum_ns")),
                plain(m("predicted_busy_scaled_ns")) if kind == "busy" else "n/a",
                plain(m("same_flops_busy_ns" if kind == "busy" else "same_flops_wall_ns")),
                plain(m("bandwidth_busy_ns" if kind == "busy" else "bandwidth_wall_ns")),
                plain(m("replayed_origin_busy_ns", "origin_busy_ns") if kind == "busy" else
                      m("replayed_origin_wall_ns", "origin_wall_ns")),
            ]) + " |")
    return out


def flag_lines(rows):
    out = [f"| direction | host-bound on the target (measured share ≥ {SHARE_TEXT}) | flagged | "
           "flagged, of those | flagged but GPU-bound |",
           "|---|---:|---:|---:|---:|"]
    for direction in directions(rows):
        ok = [r for r in rows if r["direction"] == direction and r["ok"]]
        bound = [r for r in ok if r["target_host_share"] >= GPU_BOUND_SHARE]
        flagged = [r for r in ok if r["host_bound"]]
        out.append(f"| {direction} | {len(bound)} | {len(flagged)} | "
                   f"{sum(1 for r in bound if r['host_bound'])} | "
                   f"{sum(1 for r in flagged if r['target_host_share'] < GPU_BOUND_SHARE)} |")
    return out


AGENT_INTRO = [
    "The CSVs come from `habitat_eval_suite --source=agent` (`eval/suite/`), which "
    "starts the real `habitat-server` (in-memory store, the source tree's `models/`), "
    "uploads each trace the project's own agent recorded (`habitat_agent.OperationTracker`: "
    "RecordFunction + CUPTI; `tests/testdata/agent_suite/<set>/<case>.trace.gz`, binary "
    "`habitat.v1.Trace`) with the measured unprofiled wall time as the iteration's wall "
    "time, and asks `Predict` for the other GPU by trace id. Measured values are the "
    "captures' medians over 30 iterations (`<set>/measurements.json`, written by "
    "`eval/capture/capture_agent.py`): wall time between CUDA events around each "
    "untracked iteration, GPU-busy time from `habitat_agent.measure_gpu_busy` (union of kernel, "
    "memcpy and memset intervals of each iteration). Capture sets: `h100` and `h200` from "
    "one lease each, `h100_run2` from another H100 lease (another host, 31 cases). "
    "How and when the CSVs were made: "
    "[`eval/results/README.md`](../eval/results/README.md).",
    "",
    "Host speed. A host-bound iteration's wall time depends on the target machine's CPU, "
    "which the origin's trace cannot show. *host speed 1.0*: the target's host taken as "
    "fast as the origin's (the default; the *Habitat (server)* wall column). *hostbench*: "
    "`target_host_speed` = origin / target `tiny_mlp_adam_step_ns` (8 × Linear(64) + Adam "
    "training steps; mean of the lease's `hostbench_before.json` and "
    "`hostbench_after.json`), measured on the same leases as the captures, independent "
    "of the models; only `h100_run2` and `h200` have them. *calibrated*: the median over "
    "the OTHER models' cases of origin / target Σ op CPU time in the two sets' traces "
    "(the leave-the-model-out estimate of `eval/fixtures`).",
]

KINETO_TITLE = "# End-to-end accuracy through the server (H100 ↔ H200)"
AGENT_TITLE = "# End-to-end accuracy through the server, agent captures (H100 ↔ H200)"


def markdown(rows, csv_paths, svg_link, source="kineto"):
    agent = source == "agent"
    failed = [r for r in rows if not r["ok"]]
    lines = [
        AGENT_TITLE if agent else KINETO_TITLE,
        "",
        "Generated by a committed command from committed CSVs; do not edit by hand. "
        "Regenerate with:",
        "",
        "```",
        REGENERATE_AGENT if agent else REGENERATE,
        "```",
        "",
    ]
    kineto_intro = [
        "The CSVs come from `habitat_eval_suite` (`eval/suite/`), which starts the "
        "real `habitat-server` (in-memory store, the source tree's `models/`), imports each "
        "committed Kineto capture (`tests/testdata/kineto/{h100,h200}`) with the measured "
        "unprofiled wall time as the iteration's wall time, uploads it with `UploadTrace` "
        "and asks `Predict` for the other GPU by trace id. Measured values are the "
        "captures' medians (`tests/testdata/measurements/*.json`): wall time over 30 "
        "unprofiled iterations, GPU-busy time (union of kernel, memcpy and memset "
        "intervals) over 5 profiled ones. How and when the CSVs were made: "
        "[`eval/results/README.md`](../eval/results/README.md).",
    ]
    lines += AGENT_INTRO if agent else kineto_intro
    lines += [
        "",
        "Source: " + ", ".join(f"`{p}`" for p in csv_paths) +
        f" ({len(rows)} rows, {len(failed)} without a prediction).",
        "",
        "Columns. *Habitat (server)*: the response's `gpu_busy_ns` (GPU time) and "
        "`wall_ns` (wall time) from replaying the trace's host timeline with the predicted "
        "kernel times, and its `host_bound` flag. *Σ op times*: the response's "
        "`gpu_time_ns`, the paper's method without a host model, compared with both GPU "
        "and wall time. *eval_fixtures scaling*: measured origin busy × Σ predicted / "
        "Σ measured op times, the estimate of `eval/fixtures` (docs/accuracy.md §2). "
        "*Same FLOPS* and *bandwidth ratio*: the origin's measured time × the origin/target "
        "ratio of fp32 peak FLOPS or of datasheet memory bandwidth. Error % = (predicted − "
        "measured) / measured; MAPE = mean of |error %|. A target is GPU-bound when its "
        f"measured host share (1 − busy / wall) is below {SHARE_TEXT}. *Replay on origin*: the "
        "server's answer for the trace's own GPU (`is_origin`), against that GPU's "
        "measurement: the replay before any kernel is scaled (its wall time is calibrated "
        "to the measured one, so it differs only where the calibration could not reach it).",
        "",
        "## Summary",
        "",
    ]
    lines += summary_lines(rows)
    lines += ["", "Host-bound flag against the target's measured host share:", ""]
    lines += flag_lines(rows)
    if agent:
        lines += ["", "Wall time by the target host's speed (MAPE against the measured "
                  "target wall time; class by the target's measured host share):", ""]
        lines += host_speed_lines(rows)
    if failed:
        lines += ["", f"Not in the averages ({len(failed)} rows):", ""]
        lines += [f"- {r['case']} {r['direction']}: {r['error'] or 'no measurement'}"
                  for r in failed]
    lines += ["", "## Plot", "",
              f"![Predicted against measured GPU and wall time, log-log]({svg_link})", "",
              ("One marker per case and direction (" +
               ", ".join(f"{SHAPE_NAMES[i]}: {d}" for i, d in enumerate(directions(rows))) +
               "), coloured by model; the diagonal is a perfect prediction, the dashed "
               "lines ±10%." if agent else
               "One marker per case and direction (circle: first direction, square: "
               "second), coloured by model; the diagonal is a perfect prediction, the "
               "dashed lines ±10%."), ""]
    for direction in directions(rows):
        group = [r for r in rows if r["direction"] == direction]
        lines += [f"## {direction}: GPU time", ""] + gpu_table(group) + [""]
        lines += [f"## {direction}: wall time", ""] + wall_table(group, agent) + [""]
    return "\n".join(lines)


# --- SVG ------------------------------------------------------------------

def nice_ticks(low, high):
    ticks = []
    decade = 10 ** math.floor(math.log10(low))
    while decade <= high:
        for step in (1, 2, 5):
            value = step * decade
            if low <= value <= high:
                ticks.append(value)
        decade *= 10
    return ticks


def svg_panel(x0, y0, size, title, points, colors, directions_seen):
    """points: (measured_ms, predicted_ms, model, direction, label)."""
    values = [v for p in points for v in p[:2] if v > 0]
    low = 10 ** (math.floor(math.log10(min(values)) * 4) / 4) if values else 1
    high = 10 ** (math.ceil(math.log10(max(values)) * 4) / 4) if values else 10

    def pos(value):
        return size * (math.log10(value) - math.log10(low)) / (math.log10(high) -
                                                               math.log10(low))

    def px(value):
        return x0 + pos(value)

    def py(value):
        return y0 + size - pos(value)

    out = [f'<rect x="{x0}" y="{y0}" width="{size}" height="{size}" fill="white" '
           f'stroke="#444"/>',
           f'<text x="{x0 + size / 2:.1f}" y="{y0 - 10}" text-anchor="middle" '
           f'font-size="15">{title}</text>']
    for tick in nice_ticks(low, high):
        label = f"{tick:g}"
        out.append(f'<line x1="{px(tick):.1f}" y1="{y0}" x2="{px(tick):.1f}" '
                   f'y2="{y0 + size}" stroke="#e4e4e4"/>')
        out.append(f'<line x1="{x0}" y1="{py(tick):.1f}" x2="{x0 + size}" '
                   f'y2="{py(tick):.1f}" stroke="#e4e4e4"/>')
        out.append(f'<text x="{px(tick):.1f}" y="{y0 + size + 16}" text-anchor="middle" '
                   f'font-size="11">{label}</text>')
        out.append(f'<text x="{x0 - 6}" y="{py(tick) + 4:.1f}" text-anchor="end" '
                   f'font-size="11">{label}</text>')
    out.append(f'<text x="{x0 + size / 2:.1f}" y="{y0 + size + 36}" text-anchor="middle" '
               f'font-size="12">measured (ms)</text>')
    out.append(f'<text x="{x0 - 44}" y="{y0 + size / 2:.1f}" text-anchor="middle" '
               f'font-size="12" transform="rotate(-90 {x0 - 44} {y0 + size / 2:.1f})">'
               f'predicted (ms)</text>')
    out.append(f'<line x1="{px(low):.1f}" y1="{py(low):.1f}" x2="{px(high):.1f}" '
               f'y2="{py(high):.1f}" stroke="#222"/>')
    for factor in (1.1, 1 / 1.1):
        a, b = max(low, low / factor), min(high, high / factor)
        out.append(f'<line x1="{px(a):.1f}" y1="{py(a * factor):.1f}" x2="{px(b):.1f}" '
                   f'y2="{py(b * factor):.1f}" stroke="#888" stroke-dasharray="4 3"/>')
    for measured, predicted, model, direction, label in points:
        if measured <= 0 or predicted <= 0:
            continue
        x, y = px(measured), py(predicted)
        color = colors[model]
        tip = f"<title>{label}</title>"
        out.append(marker(directions_seen.index(direction), x, y, color,
                          'fill-opacity="0.8" stroke="#222" stroke-width="0.5"', tip))
    return out


def marker(index, x, y, fill, style, tip=""):
    """The shape of direction `index` (SHAPE_NAMES) centred on (x, y)."""
    if index == 0:
        return (f'<circle cx="{x:.1f}" cy="{y:.1f}" r="4" fill="{fill}" {style}>'
                f'{tip}</circle>')
    if index == 1 or index >= len(SHAPE_NAMES):
        return (f'<rect x="{x - 3.5:.1f}" y="{y - 3.5:.1f}" width="7" height="7" '
                f'fill="{fill}" {style}>{tip}</rect>')
    if index == 2:
        corners = [(x, y - 4.5), (x + 4.5, y + 3.5), (x - 4.5, y + 3.5)]
    else:
        corners = [(x, y - 5), (x + 5, y), (x, y + 5), (x - 5, y)]
    points = " ".join(f"{a:.1f},{b:.1f}" for a, b in corners)
    return f'<polygon points="{points}" fill="{fill}" {style}>{tip}</polygon>'



def xml_text(text):
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def svg(rows):
    ok = [r for r in rows if r["ok"]]
    models = sorted({r["model"] for r in rows})
    colors = {m: PALETTE[i % len(PALETTE)] for i, m in enumerate(models)}
    seen = directions(rows)
    size, margin = 380, 70
    # Room for "H200 (h200) → H100-SXM (h100_run2)" when sets are named.
    legend = 190 if len(seen) <= 2 else 270
    width, height = margin + 2 * (size + margin) + legend, size + margin + 40

    def points(measured, predicted, unit):
        return [(r[measured] / 1e6, r[predicted] / 1e6, r["model"], r["direction"],
                 xml_text(f"{r['case']} {r['direction']}: measured {r[measured] / 1e6:.2f} "
                          f"ms, predicted {r[predicted] / 1e6:.2f} ms ({unit})"))
                for r in ok if r[predicted]]

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-family="sans-serif">',
           f'<rect width="{width}" height="{height}" fill="white"/>']
    out += svg_panel(margin, margin - 20, size, "GPU time (gpu_busy_ns)",
                     points("target_busy_ns", "predicted_gpu_busy_ns", "GPU time"), colors,
                     seen)
    out += svg_panel(2 * margin + size, margin - 20, size, "Wall time (wall_ns)",
                     points("target_wall_ns", "predicted_wall_ns", "wall time"), colors, seen)
    lx, ly = 2 * (margin + size) + 30, margin
    for i, model in enumerate(models):
        out.append(f'<circle cx="{lx}" cy="{ly + 18 * i}" r="5" fill="{colors[model]}"/>')
        out.append(f'<text x="{lx + 12}" y="{ly + 18 * i + 4}" font-size="12">'
                   f'{xml_text(model)}</text>')
    ly += 18 * len(models) + 16
    for i, direction in enumerate(seen[:len(SHAPE_NAMES)]):
        if i < 2:
            # As the Kineto report has always drawn them.
            shape = (f'<circle cx="{lx}" cy="{ly + 18 * i}" r="4" fill="none" '
                     f'stroke="#222"/>' if i == 0 else
                     f'<rect x="{lx - 3.5}" y="{ly + 18 * i - 3.5}" width="7" height="7" '
                     f'fill="none" stroke="#222"/>')
        else:
            shape = marker(i, lx, ly + 18 * i, "none", 'stroke="#222"')
        out.append(shape)
        out.append(f'<text x="{lx + 12}" y="{ly + 18 * i + 4}" font-size="12">'
                   f'{xml_text(direction)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("csv", nargs="+", help="habitat_eval_suite output")
    parser.add_argument("--md", required=True, help="Markdown file to write")
    parser.add_argument("--svg", required=True, help="SVG plot to write (linked from --md)")
    parser.add_argument("--source", choices=["kineto", "agent"], default="kineto",
                        help="which habitat_eval_suite --source wrote the CSVs")
    args = parser.parse_args(argv)
    try:
        rows = read_rows(args.csv, args.source)
    except ReportError as e:
        print(f"report.py: {e}", file=sys.stderr)
        return 1
    link = os.path.relpath(args.svg, os.path.dirname(os.path.abspath(args.md)) or ".")
    with open(args.svg, "w") as f:
        f.write(svg(rows))
    with open(args.md, "w") as f:
        f.write(markdown(rows, args.csv, link, args.source))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
