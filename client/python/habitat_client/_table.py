"""The prediction as a text table, byte-for-byte as `habitat predict` prints
it (client/cli_output.cc FormatPredictionTable; client_server_test compares
the two)."""

from __future__ import annotations

import math

# A GPU idle for more than this share of the wall time is host-bound; the
# server's kHostBoundIdleShare (core/predict/host_replay.h), said in the legend.
HOST_BOUND_IDLE_SHARE = 0.15

_METHOD_NAMES = {
    "PREDICTION_METHOD_WAVE_SCALING": "wave", "PREDICTION_METHOD_MLP": "mlp",
    "PREDICTION_METHOD_UNSCALED": "unscaled", "PREDICTION_METHOD_MEASURED": "measured",
    "PREDICTION_METHOD_BATCH_SCALED": "scaled",
}


def _printable(text) -> str:
    return "".join("?" if ord(c) < 0x20 or ord(c) == 0x7F else c for c in str(text))


def _truncate(text: str, width: int) -> str:
    return text if len(text) <= width else text[:width - 3] + "..."


def _wrap(first: str, text: str, width: int) -> str:
    indent = " " * len(first)
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


def _instance_text(p: dict) -> str:
    """The priced instance for the table: its type, '/N' for N GPUs in it."""
    if not p["has_price"]:
        return "-"
    text = _truncate(_printable(p["instance_type"]), 24)
    return f"{text}/{p['gpus_per_instance']}" if p["gpus_per_instance"] > 1 else text


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


def _last(rank: int) -> float:
    """Rank 0 (unranked: no price, or out of memory) sorts last."""
    return rank if rank > 0 else math.inf


def _by_rank(response: dict) -> list:
    """Predictions in rank order (a fit's by cost, then by time), unranked
    ones last; ties by device id, so the order does not depend on the
    server's."""
    by_cost = _is_fit(response)
    return sorted(response.get("predictions", []),
                  key=lambda p: (_last(p.get("rank_by_cost", 0)) if by_cost else 0,
                                 _last(p.get("rank_by_time", 0)), p["device_id"]))


def _gib_text(peak_bytes: int) -> str:
    return f"{peak_bytes / (1 << 30):.1f}"


def _memory_text(p: dict) -> str:
    """The peak GiB column: the predicted peak, '!' where it does not fit
    the GPU; '-' where the prediction has no memory."""
    memory = p.get("memory")
    if memory is None:
        return f" {'-':>9}"
    return f" {_gib_text(memory.get('peak_allocated_bytes', 0)):>8}" \
           f"{' ' if memory.get('fits', False) else '!'}"


def _origin_note(response: dict) -> str:
    """The table's footnote for the origin GPU's row."""
    if _is_fit(response):
        return "  * origin GPU: the measured time where its batch is the traced one, else scaled\n"
    traced, batch = response.get("traced_batch_size", 0), response.get("batch_size", 0)
    if not traced or traced == batch:
        return "  * origin GPU: the measured time, not a prediction\n"
    return f"  * origin GPU: the time measured at batch {traced} scaled to batch {batch}\n"


def _error_text(p: dict) -> str:
    """The table's expected-error column: '-' where the response has no
    estimate (the origin at the traced batch: measured)."""
    error = p.get("expected_error_percent", 0.0)
    if not error > 0:
        return "-"
    return f"{error:.1f}%"


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


def _parallel_table(predictions: list, unit: str, id_width: int, cost_decimals: int) -> str:
    """The data-parallel section (cli_output.cc ParallelTable): one line per
    GPU and configuration, in the table's order; '' when none was asked
    for."""
    if not any(p.get("parallel") for p in predictions):
        return ""
    out = "\ndata-parallel steps (PyTorch DDP over NCCL, each GPU at its batch above):\n"
    out += f"      {'GPU':<{id_width}} {'GPUs':>6} {'step ms':>10} {'±err':>6} {'comm ms':>9} " \
           f"{'eff.':>5} " \
           f"{'samples/s':>11}  {'instance':<24} {unit + '/node-h':>11} {unit + '/1k smp':>12}\n"
    for p in predictions:
        for c in p.get("parallel", []):
            nodes, gpus = c.get("nodes", 0), c.get("gpus_per_node", 0)
            label = (f"{gpus}x{nodes}" if nodes > 1 else str(gpus)) + \
                ("+" if c.get("nvls") else "") + ("~" if c.get("bandwidth_range") else "")
            out += f"      {_truncate(_printable(p['device_id']), id_width):<{id_width}} " \
                   f"{label:>6}"
            if c.get("unavailable"):
                out += f"  -  {_printable(c['unavailable'])}\n"
                continue
            instance = c.get("instance_type", "")
            instance = _truncate(_printable(instance), 24) if instance else "-"
            out += f" {c.get('step_ns', 0) / 1e6:>10.3f} {_error_text(c):>6}" \
                   f" {c.get('exposed_communication_ns', 0) / 1e6:>9.3f}" \
                   f" {100 * c.get('scaling_efficiency', 0.0):>4.0f}%" \
                   f" {c.get('samples_per_second', 0.0):>11.1f}  {instance:<24}"
            if c.get("has_price"):
                out += f" {c.get('price_per_node_hour', 0.0):>11.3f}" \
                       f" {c.get('cost_per_1000_samples', 0.0):>12.{cost_decimals}f}\n"
            else:
                out += f" {'-':>11} {'-':>12}\n"
    out += "  GPUs: per node (x nodes); step ms: the GPU's wall time above plus the all-reduce " \
           "time\n" \
           "        the backward pass does not hide (comm ms); eff.: one GPU's step / this step;\n" \
           "        ±err: the GPU's own and the data-parallel model's measured error (larger where\n" \
           "        the GPU waits on the host: DDP's host work is not modelled)\n" \
           "        '+': all-reduces with NVLink SHARP where faster, as NCCL (--no-nvls: without)\n" \
           "        '~': bandwidth known as a range (PCIe: the server's; a network: the fabric's):\n" \
           "        the step is the middle of those at its lowest published and usual end;\n" \
           "        ±err spans both\n" \
           "  instance: the catalog's instance with that many of the GPU; prices per node-hour\n"
    return out


def format_table(response, model_name: str = "", precision: str = "",
                 breakdown: bool = False, top_operations: int = 10) -> str:
    """The prediction as `habitat predict` prints it: one line per GPU in
    rank order (a fit's by cost, then time; unranked GPUs, rank '-', last)
    with, for a fit, the GPU's batch, where the trace has memory data the
    predicted peak GiB ('!': does not fit), then GPU ms, its expected error,
    wall ms ('!': host-bound), samples/s, price per GPU-hour, cost per 1000
    samples, cost rank and the unscaled share. Throughput, cost and both
    ranks follow the wall time. Where the request asked for data-parallel
    steps (gpus_per_node, catalog_instances), a section after the legend
    lists them: one line per GPU and configuration, in the same order.
    `response`: a PredictionResult, or the response as a dict (to_dict)."""
    if hasattr(response, "to_dict"):
        response = response.to_dict()
    predictions = _by_rank(response)
    fit = _is_fit(response)
    any_memory = any(p.get("memory") is not None for p in predictions)
    kind = "spot" if response.get("price_kind") == "PRICE_KIND_SPOT" else "on-demand"
    origin = response.get("origin_device_id") or "?"
    batch = f"per GPU, the largest that fits (traced at {response.get('traced_batch_size', 0)})" \
        if fit else str(response.get("batch_size", 0))
    out = f"model {_printable(model_name) if model_name else '?'}  batch {batch}  " \
          f"precision {precision or '?'}  origin GPU {_printable(origin)}\n"
    any_price = any(p["has_price"] for p in predictions)
    currency = _printable(response.get("currency") or "?")
    if response.get("catalog"):
        out += f"prices: catalog {_printable(response['catalog'])}, {currency} per GPU-hour, " \
               f"{kind}\n"
    else:
        out += "prices: none (no catalog given)\n"
    if response.get("trace_id"):
        out += f"trace: {response['trace_id']}\n"
    out += "\n"

    id_width = min(max([3] + [len(p["device_id"]) + 1 for p in predictions]), 24)
    unit = currency if any_price else "price"
    any_wall = any(not p["wall_time_is_gpu_time"] for p in predictions)
    any_host_bound = any(not p["wall_time_is_gpu_time"] and p["host_bound"] for p in predictions)
    out += f"{'rank':>4}  {'GPU':<{id_width}}"
    if fit:
        out += f" {'batch':>6}"
    if any_memory:
        out += f" {'peak GiB':>9}"
    out += f" {'GPU ms':>9}   ±err"
    if any_wall:
        out += f" {'wall ms':>10}"
    out += f" {'samples/s':>10} {unit + '/GPU-h':>10} {unit + '/1k smp':>12} {'cost#':>5} " \
           f"{'unscaled':>9}"
    out += "  instance\n" if any_price else "\n"
    cost_decimals = 4
    for p in predictions:
        if p["has_price"] and p["cost_per_1000_samples"] > 0:
            needed = 2 - math.floor(math.log10(p["cost_per_1000_samples"]))
            cost_decimals = max(cost_decimals, min(needed, 9))
    for p in predictions:
        name = _truncate(_printable(p["device_id"]) + ("*" if p["is_origin"] else ""), id_width)
        price = cost = cost_rank = "-"
        if p["has_price"]:
            price = f"{p['price_per_hour']:.3f}"
            cost = f"{p['cost_per_1000_samples']:.{cost_decimals}f}"
            if p["rank_by_cost"] > 0:
                cost_rank = str(p["rank_by_cost"])
        rank = str(p["rank_by_time"]) if p["rank_by_time"] > 0 else "-"
        out += f"{rank:>4}  {name:<{id_width}}"
        if fit:
            out += f" {p.get('batch_size', 0):>6}"
        if any_memory:
            out += _memory_text(p)
        out += f" {p['gpu_time_ns'] / 1e6:>9.3f} {_error_text(p):>6}"
        if any_wall:
            out += f" {p['wall_time_ns'] / 1e6:>9.3f}{'!' if p['host_bound'] else ' '}" \
                if not p["wall_time_is_gpu_time"] else f" {'-':>10}"
        out += f" {p['samples_per_second']:>10.1f} {price:>10} {cost:>12} {cost_rank:>5} " \
               f"{_unscaled_percent(p):>8.1f}%"
        out += f"  {_instance_text(p)}\n" if any_price else "\n"
    origins = [_printable(p["device_id"]) for p in predictions if p["is_origin"]]
    if origins:
        out += _origin_note(response)
    if any_host_bound:
        out += "  ! host-bound: the GPU would idle for more than " \
               f"{100 * HOST_BOUND_IDLE_SHARE:.0f}% of the wall time\n"
    if fit:
        out += "  batch: the largest batch whose predicted peak memory fits the GPU\n"
    if any_memory:
        out += "  peak GiB: predicted peak of PyTorch's allocated memory; '!': with headroom " \
               "for its\n           expected error, more than the GPU leaves a process " \
               "(unranked, rank '-')\n"
    out += "  GPU ms: sum of the operations' predicted GPU time\n"
    out += "  ±err: expected error of GPU ms (its operations' expected errors weighted by their " \
           "time)\n"
    if any_wall:
        out += "  wall ms: the origin's host timeline replayed with the predicted GPU times;\n" \
               "           samples/s, costs and ranks use it ('-': GPU ms instead)\n"
    else:
        out += "  no host timeline in the trace: samples/s, costs and ranks use GPU ms as the " \
               "wall time\n"
    if any_price:
        out += "  cost#: rank by cost per 1,000 samples, 1 = cheapest\n"
        out += "  instance: the instance type priced, the smallest with that GPU in the catalog; " \
               "/N:\n           it holds N GPUs, and the price is its price per GPU-hour\n"
    out += "  unscaled: share of the origin GPU time in operations carried over unscaled\n"
    out += _parallel_table(predictions, unit, id_width, cost_decimals)

    # One line per distinct warning, with the GPUs it concerns.
    grouped: dict = {}
    for p in predictions:
        for warning in p.get("warnings", []):
            grouped.setdefault(warning, []).append(_printable(p["device_id"]))
    if grouped or response.get("warnings"):
        out += "\nwarnings:\n"
        for text, devices in grouped.items():
            if len(devices) == len(predictions) and len(devices) > 1:
                who = "all GPUs"
            elif origins and len(devices) + 1 == len(predictions) and len(devices) > 1 \
                    and origins[0] not in devices:
                who = "all GPUs but the origin"
            else:
                who = ", ".join(devices)
            out += _wrap("  - ", f"{who}: {_printable(text)}", 99)
        for warning in response.get("warnings", []):
            out += _wrap("  - ", _printable(warning), 99)
    if breakdown:
        out += "\nbreakdown:\n"
        for p in predictions:
            out += _operation_table(p, top_operations)
        out += _breakdown_legend(predictions, top_operations)
    return out
