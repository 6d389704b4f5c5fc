"""The prediction as a text table, byte-for-byte as `habitat predict` prints
it on stdout (client/cli_prediction_table.cc FormatPredictionTable), and its
warnings as it prints them on stderr (client/cli_warnings.cc
FormatPredictionWarnings; client_server_test compares both)."""

from __future__ import annotations

import math

# A GPU idle for more than this share of the wall time is host-bound; the
# server's kHostBoundIdleShare (core/predict/host_replay.h), said in the legend.
HOST_BOUND_IDLE_SHARE = 0.15

# The tables fit in this many columns (the instance column gives way).
TABLE_WIDTH = 100

_METHOD_NAMES = {
    "PREDICTION_METHOD_WAVE_SCALING": "wave", "PREDICTION_METHOD_MLP": "trees",
    "PREDICTION_METHOD_KERNEL_VARYING": "trees",
    "PREDICTION_METHOD_UNSCALED": "unscaled", "PREDICTION_METHOD_MEASURED": "measured",
    "PREDICTION_METHOD_BATCH_SCALED": "scaled",
}


def _printable(text) -> str:
    return "".join("?" if ord(c) < 0x20 or ord(c) == 0x7F else c for c in str(text))


def _truncate(text: str, width: int) -> str:
    return text if len(text) <= width else text[:width - 3] + "..."


def _wrap(first: str, text: str, width: int, indent: int = None) -> str:
    """`text` word-wrapped to `width` columns, the first line starting with
    `first`, the others indented as deep (or by `indent` spaces)."""
    indent = " " * (len(first) if indent is None else indent)
    out, column, line_empty = first, len(first), True
    for word in text.split():
        if not line_empty and column + 1 + len(word) > width:
            out += "\n" + indent
            column, line_empty = len(indent), True
        if not line_empty:
            out += " "
            column += 1
        out += word
        column += len(word)
        line_empty = False
    return out + "\n"


def _unscaled_percent(p: dict) -> float:
    """Of the origin GPU time, as the CLI's table and the warning say it."""
    totals = p.get("method_totals", [])
    origin = sum(t.get("origin_ns", 0) for t in totals)
    if origin <= 0:
        return 0.0
    unscaled = sum(t.get("origin_ns", 0) for t in totals
                   if t.get("method") == "PREDICTION_METHOD_UNSCALED")
    return 100.0 * unscaled / origin


def _millis(ns: int) -> str:
    """Milliseconds to four significant digits (three decimals at most): the
    expected errors are percents, so more digits would be noise."""
    ms = ns / 1e6
    decimals = 0 if ms >= 1000 else 1 if ms >= 100 else 2 if ms >= 10 else 3
    return f"{ms:.{decimals}f}"


def _instance_text(p: dict, width: int = 24) -> str:
    """The priced instance for the table: its type, '/N' for N GPUs in it,
    within `width` characters (the type is shortened, never the '/N')."""
    if not p["has_price"]:
        return "-"
    suffix = f"/{p['gpus_per_instance']}" if p["gpus_per_instance"] > 1 else ""
    return _truncate(_printable(p["instance_type"]), max(width - len(suffix), 8)) + suffix


def _mode_text(op: dict) -> str:
    """'tf32>fp32' where the GPU runs the operation in another math mode than
    the origin did, 'bf16' where both are the same, '' without modes."""
    origin, target = op.get("origin_math_mode", ""), op.get("target_math_mode", "")
    if not origin:
        return ""
    if origin == target:
        return _printable(origin)
    return f"{_printable(origin)}>{_printable(target)}"


def _is_fit(response: dict) -> bool:
    """A fit predicts each GPU at its own batch (the response's is 0)."""
    return response.get("batch_size", 0) == 0 and len(response.get("predictions", [])) > 0


def _is_sharded_fit(response: dict) -> bool:
    """A fit whose batches fit the GPUs of the request's first
    configuration, fully sharded (the engine's sharded fit)."""
    if not _is_fit(response):
        return False
    parallel = response["predictions"][0].get("parallel", [])
    return bool(parallel) and parallel[0].get("kind") == "KIND_FULLY_SHARDED"


def _last(rank: int) -> float:
    """Rank 0 (unranked: no price, or out of memory) sorts last."""
    return rank if rank > 0 else math.inf


def _ordered_by_cost(response: dict) -> bool:
    """A fit answers "which GPU is cheapest at its best batch", so its rows
    go by cost where any are priced; other tables by wall time."""
    return _is_fit(response) and any(p.get("rank_by_cost", 0) > 0
                                     for p in response.get("predictions", []))


def _rank_column(predictions: list, by_cost: bool) -> tuple:
    """The rank the rows are in comes first; the other after the prices."""
    key = "rank_by_cost" if by_cost else "rank_by_time"
    return ("cost#" if by_cost else "time#", False,
            [str(p.get(key, 0)) if p.get(key, 0) > 0 else "-" for p in predictions])


def _by_rank(response: dict) -> list:
    """Predictions in rank order (a fit's by cost, then by time), unranked
    ones last; ties by device id, so the order does not depend on the
    server's."""
    by_cost = _ordered_by_cost(response)
    return sorted(response.get("predictions", []),
                  key=lambda p: (_last(p.get("rank_by_cost", 0)) if by_cost else 0,
                                 _last(p.get("rank_by_time", 0)), p["device_id"]))


def _gib_text(peak_bytes: int) -> str:
    return f"{peak_bytes / (1 << 30):.1f}"


def _memory_text(p: dict, marks: bool) -> str:
    """The GiB column: the predicted peak, '!' where it does not fit the
    GPU (a space where it does, when any row has a mark); '-' where the
    prediction has no memory."""
    memory = p.get("memory")
    if memory is None:
        return "- " if marks else "-"
    fits = memory.get("fits", False)
    return _gib_text(memory.get("peak_allocated_bytes", 0)) + ("" if fits and not marks else
                                                               " " if fits else "!")


# The warning kinds that say the origin's wall time comes from a
# torch.profiler step (core/predict/warning_tally.h).
_PROFILED_KINDS = ("profiled_host_timeline", "profiler_cost_estimated")


def _profiled_origin(p: dict) -> bool:
    """The origin whose wall time comes from a torch.profiler step imported
    without a measured wall time: its row says "profiled"."""
    return bool(p.get("is_origin")) and any(
        kind in _PROFILED_KINDS for kind in p.get("warning_kinds", []))


def _gpu_cell(p: dict) -> str:
    return _truncate(_printable(p["device_id"]) + ("*" if p["is_origin"] else "") +
                     (" profiled" if _profiled_origin(p) else ""), 24)


def _origin_note(response: dict) -> str:
    """The table's footnote for the origin GPU's row."""
    traced, batch = response.get("traced_batch_size", 0), response.get("batch_size", 0)
    if any(w.get("kind") == "fsdp_rank" for w in response.get("structured_warnings", [])):
        note = ("  * origin GPU: the FSDP rank's work as one GPU's step, predicted (not"
                " measured)\n")
    elif _is_fit(response):
        note = "  * origin GPU: the measured time where its batch is the traced one, else scaled\n"
    elif not traced or traced == batch:
        note = "  * origin GPU: the measured time, not a prediction\n"
    else:
        note = f"  * origin GPU: the time measured at batch {traced} scaled to batch {batch}\n"
    if any(_profiled_origin(p) for p in response.get("predictions", [])):
        note += ("    profiled: its wall time comes from the torch.profiler step, not from a step"
                 " timed\n    without the profiler (--explain says how; --wall-ns gives the"
                 " timed one)\n")
    return note


def _error_text(p: dict) -> str:
    """The table's expected-error column: '-' where the response has no
    estimate (the origin at the traced batch: measured)."""
    error = p.get("expected_error_percent", 0.0)
    if not error > 0:
        return "-"
    return f"{error:.0f}%"


def _render(columns: list, indent: str = "", tails: list = None, tail_after: int = 0) -> str:
    """Columns (header, left-aligned?, cells) as lines: a header line, then
    one per row, each column as wide as its widest cell or header, two
    spaces before a left-aligned column but the second and one before the
    others, trailing spaces trimmed. A row with a tail (`tails[row]`) has,
    after its first `tail_after` columns, "-  " and the tail instead of the
    others, wrapped within TABLE_WIDTH."""
    widths = [max([len(header)] + [len(cell) for cell in cells])
              for header, _, cells in columns]
    rows = max([len(cells) for _, _, cells in columns] + [0])
    out = ""
    for row in range(-1, rows):
        line = indent
        for i, (header, left, cells) in enumerate(columns):
            if i > 0:
                line += "  " if left and i > 1 else " "
            if row >= 0 and tails and tails[row] and i == tail_after:
                break
            text = header if row < 0 else cells[row]
            line += text.ljust(widths[i]) if left else text.rjust(widths[i])
        if row >= 0 and tails and tails[row]:
            out += _wrap(line + "-  ", tails[row], TABLE_WIDTH)
        else:
            out += line.rstrip(" ") + "\n"
    return out


def _width(columns: list, indent: str = "") -> int:
    """The width of _render's lines for `columns` (the widest)."""
    total = len(indent)
    for i, (header, left, cells) in enumerate(columns):
        total += (0 if i == 0 else 2 if left and i > 1 else 1) + \
            max([len(header)] + [len(c) for c in cells])
    return total


def _top_operations(p: dict, top: int) -> list:
    ops = sorted(p.get("operations", []),
                 key=lambda op: (-(op["predicted_forward_ns"] + op["predicted_backward_ns"]),
                                 op["index"]))
    return ops[:max(top, 0)]


def _breakdown_legend(predictions: list, top: int) -> str:
    shown = [op for p in predictions for op in _top_operations(p, top)]
    out = ""
    if any(_mode_text(op) for op in shown):
        out += "  mode: math mode on the origin GPU, then on this GPU where it differs (tf32>fp32)\n"
    if any(op.get("at_hardware_limit") for op in shown):
        out += "  ^ at_hardware_limit: predicted faster than this GPU's peak FLOPS or bandwidth " \
               "allow, raised to it\n"
    return out


def _operation_table(p: dict, top: int) -> str:
    ops = sorted(p.get("operations", []),
                 key=lambda op: (-(op["predicted_forward_ns"] + op["predicted_backward_ns"]),
                                 op["index"]))
    out = f"  {_printable(p['device_id'])}: top {min(top, len(ops))} of {len(ops)} " \
          "operations by predicted time\n"
    if not ops:
        return out + "    (no per-operation breakdown in the response)\n"
    out += f"    {'index':>5}  {'operation':<32} {'origin ms':>9} {'fwd ms':>9} " \
           f"{'bwd ms':>9} {'share':>6}  {'method':<8} mode\n"
    for op in ops[:top]:
        total = op["predicted_forward_ns"] + op["predicted_backward_ns"]
        share = 100.0 * total / p["gpu_time_ns"] if p["gpu_time_ns"] > 0 else 0.0
        origin = (op["origin_forward_ns"] + op["origin_backward_ns"]) / 1e6
        method = _METHOD_NAMES.get(op["method"], "?") + ("^" if op.get("at_hardware_limit") else "")
        line = f"    {op['index']:>5}  {_truncate(_printable(op['name']), 32):<32} " \
               f"{origin:>9.3f} {op['predicted_forward_ns'] / 1e6:>9.3f} " \
               f"{op['predicted_backward_ns'] / 1e6:>9.3f} {share:>5.1f}%  " \
               f"{method:<8} {_mode_text(op)}"
        out += line.rstrip(" ") + "\n"
        for warning in op.get("warnings", []):
            out += _wrap("           ! ", _printable(warning), 99)
    return out


def _parallel_table(predictions: list, unit: str, cost_decimals: int) -> str:
    """The data-parallel section (cli_prediction_table.cc ParallelTable): one line per
    GPU and configuration, in the table's order; '' when none was asked
    for."""
    if not any(p.get("parallel") for p in predictions):
        return ""
    names = ["GPU", "GPUs", "step ms", "±err", "comm ms", "eff.", "smp/s", "instance",
             unit + "/node-h", unit + "/1k"]
    cells = {name: [] for name in names}
    tails = []
    for p in predictions:
        for c in p.get("parallel", []):
            nodes, gpus = c.get("nodes", 0), c.get("gpus_per_node", 0)
            label = (f"{gpus}x{nodes}" if nodes > 1 else str(gpus)) + \
                ("+" if c.get("nvls") else "") + ("~" if c.get("bandwidth_range") else "")
            row = {"GPU": _truncate(_printable(p["device_id"]), 24), "GPUs": label}
            tails.append(_printable(c.get("unavailable", "")))
            if not c.get("unavailable"):
                instance = c.get("instance_type", "")
                row.update({
                    "step ms": _millis(c.get("step_ns", 0)), "±err": _error_text(c),
                    "comm ms": _millis(c.get("exposed_communication_ns", 0)),
                    "eff.": f"{100 * c.get('scaling_efficiency', 0.0):.0f}%",
                    "smp/s": f"{c.get('samples_per_second', 0.0):.1f}",
                    "instance": _truncate(_printable(instance), 24) if instance else "-",
                    unit + "/node-h": f"{c.get('price_per_node_hour', 0.0):.3f}"
                    if c.get("has_price") else "-",
                    unit + "/1k": f"{c.get('cost_per_1000_samples', 0.0):.{cost_decimals}f}"
                    if c.get("has_price") else "-"})
            for name in names:
                cells[name].append(row.get(name, ""))
    columns = [(name, name in ("GPU", "instance"), cells[name]) for name in names]
    out = "\ndata-parallel steps (PyTorch DDP over NCCL, each GPU at its batch above):\n"
    out += _render(columns, "  ", tails, 2)
    out += "  GPUs: per node (x nodes); step ms: the GPU's wall time above plus the all-reduce " \
           "time\n" \
           "        the backward pass does not hide (comm ms); eff.: one GPU's step / this step;\n" \
           "        ±err: the GPU's own and the data-parallel model's measured error (larger where\n" \
           "        the GPU waits on the host: DDP's host work is not modelled)\n" \
           "        '+': all-reduces with NVLink SHARP where faster, as NCCL (--no-nvls: without)\n" \
           "        '~': bandwidth known as a range (PCIe: the server's; a network: the fabric's):\n" \
           "        the step is the middle of those at its lowest published and usual end;\n" \
           "        ±err spans both\n" \
           f"  instance: the catalog's instance with that many of the GPU; {unit}/node-h: its " \
           "price\n" \
           f"  {unit}/1k: cost per 1,000 samples\n"
    return out


def _cost_decimals(predictions: list) -> int:
    """Enough decimals for three significant digits of the cheapest cost,
    the same for every row so the column lines up."""
    decimals = 4
    for p in predictions:
        if p["has_price"] and p["cost_per_1000_samples"] > 0:
            needed = 2 - math.floor(math.log10(p["cost_per_1000_samples"]))
            decimals = max(decimals, min(needed, 9))
    return decimals


def _table_columns(predictions: list, fit: bool, by_cost: bool, unit: str,
                   cost_decimals: int) -> list:
    """The main table's columns (header, left-aligned?, cells); the instance
    column, last, within what is left of TABLE_WIDTH."""
    any_price = any(p["has_price"] for p in predictions)
    columns = [
        _rank_column(predictions, by_cost),
        ("GPU", True, [_gpu_cell(p) for p in predictions])]
    if fit:
        columns.append(("batch", False, [str(p.get("batch_size", 0)) for p in predictions]))
    if any(p.get("memory") is not None for p in predictions):
        marks = any(p.get("memory") is not None and not p["memory"].get("fits", False)
                    for p in predictions)
        columns.append(("GiB", False, [_memory_text(p, marks) for p in predictions]))
    columns.append(("GPU ms", False, [_millis(p["gpu_time_ns"]) for p in predictions]))
    columns.append(("±err", False, [_error_text(p) for p in predictions]))
    if any(not p["wall_time_is_gpu_time"] for p in predictions):
        marks = any(not p["wall_time_is_gpu_time"] and p["host_bound"] for p in predictions)
        space = " " if marks else ""
        columns.append(("wall ms", False, [
            _millis(p["wall_time_ns"]) + ("!" if p["host_bound"] else space)
            if not p["wall_time_is_gpu_time"] else "-" + space for p in predictions]))
    columns.append(("smp/s", False, [f"{p['samples_per_second']:.1f}" for p in predictions]))
    if any_price:
        columns.append((unit + "/h", False, [f"{p['price_per_hour']:.3f}" if p["has_price"]
                                             else "-" for p in predictions]))
        columns.append((unit + "/1k", False, [
            f"{p['cost_per_1000_samples']:.{cost_decimals}f}" if p["has_price"] else "-"
            for p in predictions]))
        columns.append(_rank_column(predictions, not by_cost))
    if any(_unscaled_percent(p) > 0 for p in predictions):
        columns.append(("unscaled", False, [f"{_unscaled_percent(p):.1f}%" for p in predictions]))
    if any_price:
        room = max(TABLE_WIDTH - _width(columns) - 2, 12)
        columns.append(("instance", True, [_instance_text(p, min(room, 26))
                                           for p in predictions]))
    return columns


def _table_legend(response: dict, predictions: list, unit: str) -> str:
    """The legend under the rows, for the columns and marks they have: a
    port of TableLegend in client/cli_prediction_table.cc, which owns the
    wording (change it there first; client_server_test compares the two)."""
    fit = _is_fit(response)
    any_wall = any(not p["wall_time_is_gpu_time"] for p in predictions)
    out = ""
    if any(p["is_origin"] for p in predictions):
        out += _origin_note(response)
    if any(not p["wall_time_is_gpu_time"] and p["host_bound"] for p in predictions):
        out += "  ! host-bound: the GPU would idle for more than " \
               f"{100 * HOST_BOUND_IDLE_SHARE:.0f}% of the wall time\n"
    if _is_sharded_fit(response):
        out += "  batch: the largest batch per GPU whose predicted peak fits each GPU of the " \
               "first\n         FSDP configuration below\n"
    elif fit:
        out += "  batch: the largest batch whose predicted peak memory fits the GPU\n"
    if any(p.get("memory") is not None for p in predictions):
        out += "  GiB: predicted peak of PyTorch's allocated memory; '!': with headroom for its " \
               "expected\n       error, more than the GPU leaves a process (unranked: '-')\n"
    out += "  GPU ms: sum of the operations' predicted GPU time; ±err: its expected error (its\n" \
           "          operations' expected errors weighted by their time)\n"
    if any_wall:
        out += "  wall ms: the origin's host timeline replayed with the predicted GPU times;\n" \
               "           smp/s (samples per second), costs and ranks use it ('-': GPU ms instead)\n"
    else:
        out += "  no host timeline in the trace: smp/s (samples per second), costs and ranks " \
               "use GPU ms\n  as the wall time\n"
    if any(p["has_price"] for p in predictions):
        out += f"  {unit}/h: price per GPU-hour; {unit}/1k: cost per 1,000 samples; " \
               "cost#: rank by cost, 1 = cheapest\n" \
               "  instance: the instance type priced, the smallest with that GPU in the " \
               "catalog; /N:\n" \
               "           it holds N GPUs, and the price is its price per GPU-hour\n"
    out += "  rows in cost# order; time#: rank by wall time, 1 = fastest\n" \
        if _ordered_by_cost(response) else \
        "  time#: rank by wall time, 1 = fastest (the rows' order)\n"
    if any(_unscaled_percent(p) > 0 for p in predictions):
        out += "  unscaled: share of the origin GPU time in operations carried over unscaled\n"
    return out


def _precision_name(response: dict) -> str:
    """The response's precision as the CLI names it ("amp_bf16"); "" where
    it has none."""
    value = response.get("precision") or "PRECISION_UNSPECIFIED"
    return "" if value == "PRECISION_UNSPECIFIED" else value[len("PRECISION_"):].lower()


def _table_header(response: dict, model_name: str, precision: str, currency: str) -> str:
    """The lines above the table: what was predicted and how it was priced.
    Without `model_name` or `precision`, the response's (the trace's)."""
    model_name = model_name or response.get("model_name", "")
    precision = precision or _precision_name(response)
    kind = "spot" if response.get("price_kind") == "PRICE_KIND_SPOT" else "on-demand"
    origin = response.get("origin_device_id") or "?"
    batch = f"fitted per GPU (traced at {response.get('traced_batch_size', 0)})" \
        if _is_fit(response) else str(response.get("batch_size", 0))
    out = f"model {_printable(model_name) if model_name else '?'}  batch {batch}  " \
          f"precision {precision or '?'}  origin GPU {_printable(origin)}\n"
    if response.get("catalog"):
        out += f"prices: catalog {_printable(response['catalog'])}, {currency} per GPU-hour, " \
               f"{kind}\n"
    else:
        out += "prices: none (no catalog given)\n"
    if response.get("trace_id"):
        out += f"trace: {response['trace_id']}\n"
    return out + "\n"


def format_table(response, model_name: str = "", precision: str = "",
                 breakdown: bool = False, top_operations: int = 10) -> str:
    """The prediction as `habitat predict` prints it on stdout, in at most
    100 columns: one line per GPU in rank order (a fit's by cost, then time;
    unranked GPUs, rank '-', last) with, for a fit, the GPU's batch, where
    the trace has memory data the predicted peak GiB ('!': does not fit),
    then GPU ms, its expected error, wall ms ('!': host-bound), samples/s,
    and where there are prices the price per GPU-hour, cost per 1000
    samples, cost rank and the instance priced; the unscaled share where any
    operation was carried over unscaled. Throughput, cost and both ranks
    follow the wall time. Where the request asked for data-parallel steps
    (gpus_per_node, catalog_instances), a section after the legend lists
    them: one line per GPU and configuration, in the same order. The
    warnings are not in it: format_warnings has them, as the CLI prints
    them on stderr. `response`: a PredictionResult, or the response as a
    dict (to_dict)."""
    if hasattr(response, "to_dict"):
        response = response.to_dict()
    predictions = _by_rank(response)
    currency = _printable(response.get("currency") or "?")
    out = _table_header(response, model_name, precision, currency)
    unit = currency if any(p["has_price"] for p in predictions) else "price"
    cost_decimals = _cost_decimals(predictions)
    out += _render(_table_columns(predictions, _is_fit(response),
                                  _ordered_by_cost(response), unit, cost_decimals))
    out += _table_legend(response, predictions, unit)
    out += _parallel_table(predictions, unit, cost_decimals)
    if breakdown:
        out += "\nbreakdown:\n"
        for p in predictions:
            out += _operation_table(p, top_operations)
        out += _breakdown_legend(predictions, top_operations)
    return out


def _warning_groups(response: dict) -> list:
    """(kind, summary, device ids, [(text, device ids)]) per kind: the
    response's structured_warnings, or from a server before them its
    warnings grouped by text (kind ''), the GPUs' then the response's."""
    if response.get("structured_warnings"):
        return [(w.get("kind", ""), w.get("summary", ""), list(w.get("device_ids", [])),
                 [(d.get("text", ""), list(d.get("device_ids", [])))
                  for d in w.get("details", [])])
                for w in response["structured_warnings"]]
    groups, by_text = [], {}
    for p in response.get("predictions", []):
        for text in p.get("warnings", []):
            if text not in by_text:
                by_text[text] = ("", text, [], [(text, [])])
                groups.append(by_text[text])
            for ids in (by_text[text][2], by_text[text][3][0][1]):
                if p["device_id"] not in ids:
                    ids.append(p["device_id"])
    groups += [("", text, [], [(text, [])]) for text in response.get("warnings", [])]
    return groups


def _gpu_names(ids: list, table: list, origin: str, complete: bool) -> str:
    """GPUs for people, in the table's order (`table`: its ids): '' for none,
    the id for one; for more "all N GPUs", or "N GPUs (A, B, C)" up to 6, or
    beyond "N GPUs (all but A, B)" where at most 3 are left out ("all but
    the origin" where it is the one), else the first 5 and how many more
    unless `complete`."""
    position = {device: i for i, device in enumerate(table)}
    ids = sorted(ids, key=lambda device: position.get(device, len(table)))
    if not ids:
        return ""
    if len(ids) == 1:
        return _printable(ids[0])
    if len(ids) == len(table):
        return f"all {len(ids)} GPUs"
    left_out = [device for device in table if device not in ids]
    if len(ids) > 6 and len(left_out) <= 3:
        if left_out == [origin]:
            return f"{len(ids)} GPUs (all but the origin)"
        return f"{len(ids)} GPUs (all but {', '.join(_printable(d) for d in left_out)})"
    if complete or len(ids) <= 6:
        return f"{len(ids)} GPUs ({', '.join(_printable(d) for d in ids)})"
    return f"{len(ids)} GPUs ({', '.join(_printable(d) for d in ids[:5])} and " \
           f"{len(ids) - 5} more)"


def format_warnings(response, explain: bool = False, hint: str = "") -> str:
    """The warnings as `habitat predict` prints them on stderr under its
    table (client/cli_warnings.cc): "warnings:", then one line per kind
    naming the GPUs it concerns and saying in one sentence what it means;
    with `explain` the kind's identifier and each full text with its GPUs
    under it. `hint` goes in parentheses after "warnings" (the CLI's says
    how to see more). '' when there are none. `response`: a
    PredictionResult, or the response as a dict (to_dict)."""
    if hasattr(response, "to_dict"):
        response = response.to_dict()
    groups = _warning_groups(response)
    if not groups:
        return ""
    predictions = _by_rank(response)
    table = [p["device_id"] for p in predictions]
    origin = next((p["device_id"] for p in predictions if p.get("is_origin")), "")

    def prefixed(ids, text, complete):
        who = _gpu_names(ids, table, origin, complete)
        return f"{who}: {text}" if who else text

    out = "warnings" + (f" ({hint})" if hint else "") + ":\n"
    for kind, summary, ids, details in groups:
        line = prefixed(ids, _printable(summary), False)
        if not explain or not kind:
            out += _wrap("  ", line, TABLE_WIDTH, 4)
            continue
        out += _wrap("  ", f"{line} [{_printable(kind)}]", TABLE_WIDTH, 4)
        for text, detail_ids in details:
            out += _wrap("    - ", prefixed(detail_ids, _printable(text), True), TABLE_WIDTH)
    return out
