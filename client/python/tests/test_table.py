"""habitat_client.format_table and format_warnings: byte for byte what
`habitat predict` prints (client/cli_prediction_table.cc, cli_warnings.cc)."""

import os
import re
import unittest
import warnings

from client_fixtures import (  # noqa: F401 (puts the package on sys.path)
    SOURCE, habitat_client, _table, needs_protobuf, device_prediction, sample_response, GIB,
    fit_response, parallel_response)


@needs_protobuf
class TableTest(unittest.TestCase):
    """format_table's lines for a fit and for predicted memory, as
    client/cli_prediction_table.cc FormatPredictionTable prints them."""

    LEGEND_TAIL = (
        "  GPU ms: sum of the operations' predicted GPU time; ±err: its expected error (its\n"
        "          operations' expected errors weighted by their time)\n"
        "  wall ms: the origin's host timeline replayed with the predicted GPU times;\n"
        "           smp/s (samples per second), costs and ranks use it ('-': GPU ms instead)\n"
        "  USD/h: price per GPU-hour; USD/1k: cost per 1,000 samples; cost#: rank by cost, "
        "1 = cheapest\n"
        "  instance: the instance type priced, the smallest with that GPU in the catalog; /N:\n"
        "           it holds N GPUs, and the price is its price per GPU-hour\n")
    MEMORY_LEGEND = (
        "  GiB: predicted peak of PyTorch's allocated memory; '!': with headroom for its "
        "expected\n"
        "       error, more than the GPU leaves a process (unranked: '-')\n")

    def test_fit_table(self):
        result = habitat_client.PredictionResult.from_message(fit_response())
        table = habitat_client.format_table(result, model_name="resnet50", precision="fp32")
        self.assertEqual(table, (
            "model resnet50  batch fitted per GPU (traced at 32)  precision fp32"
            "  origin GPU H100-SXM\n"
            "prices: catalog aws, USD per GPU-hour, on-demand\n"
            "trace: sha256:" + "1" * 64 + "\n"
            "\n"
            # Columns as wide as their widest cell; milliseconds to four
            # significant digits, expected errors in whole percents.
            "cost# GPU       batch    GiB GPU ms ±err wall ms smp/s USD/h USD/1k time#  instance\n"
            # By cost rank (the fit's question), then time; unranked last.
            # The first column is the rank the rows are in.
            "    1 H100-SXM*   256  70.0   10.00    -   12.00  83.3 4.500 0.0100     2  "
            "p5.48xlarge/8\n"
            "    2 H200        512 130.0   9.000   8%   11.00  90.9 4.500 0.0100     1  "
            "p5.48xlarge/8\n"
            "    - T4           32  14.0   40.00   8%   42.00  23.8     -      -     3  -\n"
            "    - L4           16  30.0!  30.00   8%   32.00  31.2 4.500 0.0100     -  "
            "p5.48xlarge/8\n"
            "  * origin GPU: the measured time where its batch is the traced one, else scaled\n"
            "  batch: the largest batch whose predicted peak memory fits the GPU\n"
            + self.MEMORY_LEGEND + self.LEGEND_TAIL
            + "  rows in cost# order; time#: rank by wall time, 1 = fastest\n"))
        # The same from the message's dict, and from PredictionResult.format_table.
        self.assertEqual(habitat_client.format_table(habitat_client.to_dict(fit_response()),
                                                     model_name="resnet50", precision="fp32"),
                         table)
        self.assertEqual(result.format_table(model_name="resnet50", precision="fp32"), table)
        # The row order is ranked(by="cost"), whatever order the server sent.
        rows = table.splitlines()[5:9]
        self.assertEqual([r.split()[1].rstrip("*") for r in rows],
                         [p.device_id for p in result.ranked(by="cost")])

    def test_fit_unranked_ties_by_device_id(self):
        message = fit_response()
        messages = habitat_client.messages()
        # Both ranks 0 as L4 (out of memory), and before it by id.
        a10 = device_prediction(messages, "A10G", 0, 50, batch_size=8,
                                memory=dict(peak_allocated_bytes=25 * GIB, usable_bytes=22 * GIB,
                                            fits=False))
        a10.rank_by_cost = 0
        message.predictions.append(a10)
        table = habitat_client.format_table(habitat_client.to_dict(message))
        ids = [line.split()[1].rstrip("*") for line in table.splitlines()[5:10]]
        self.assertEqual(ids, ["H100-SXM", "H200", "T4", "A10G", "L4"])

    def test_sharded_fit_says_its_batch_fits_the_shards(self):
        """A fit whose first configuration is FSDP: the batch fits each of
        its GPUs, as TableLegend says (client_server_test compares the two)."""
        message = fit_response()
        config = habitat_client.messages()["ParallelPrediction"](
            gpus_per_node=4, kind="KIND_FULLY_SHARDED", largest_fitting_batch=256)
        message.predictions[0].parallel.append(config)
        table = habitat_client.format_table(habitat_client.to_dict(message))
        self.assertIn("  batch: the largest batch per GPU whose predicted peak fits each GPU of "
                      "the first\n         FSDP configuration below\n", table)
        self.assertNotIn("batch: the largest batch whose predicted peak memory fits the GPU",
                         table)

    def memory_response(self):
        """One batch (not a fit), memory predicted for all GPUs but T4;
        H100-SXM is out of memory (both ranks 0)."""
        message = sample_response()
        by_id = {p.device_id: p for p in message.predictions}
        by_id["H200"].memory.CopyFrom(habitat_client.messages()["MemoryPrediction"](
            peak_allocated_bytes=int(1.96 * GIB), usable_bytes=139 * GIB, fits=True,
            largest_fitting_batch=512))
        by_id["H100-SXM"].memory.CopyFrom(habitat_client.messages()["MemoryPrediction"](
            peak_allocated_bytes=GIB + GIB // 4, usable_bytes=GIB, fits=False))
        by_id["H100-SXM"].rank_by_time = 0
        by_id["H100-SXM"].rank_by_cost = 0
        by_id["T4"].rank_by_time = 2
        return message

    def test_memory_without_fit(self):
        table = habitat_client.format_table(habitat_client.to_dict(self.memory_response()))
        lines = table.splitlines(keepends=True)
        self.assertEqual(lines[0], "model ?  batch 8  precision ?  origin GPU H100-SXM\n")
        self.assertEqual(lines[4],
                         "time# GPU        GiB GPU ms ±err wall ms smp/s USD/h USD/1k cost#"
                         "  instance\n")
        self.assertEqual(lines[5:8], [
            # 1.96 GiB is "2.0"; 1.25 GiB rounds to even, "1.2", as printf does.
            "    1 H200      2.0   9.000   8%   11.00  90.9 4.500 0.0100     1  p5.48xlarge/8\n",
            "    2 T4          -   40.00   8%   42.00  23.8     -      -     -  -\n",
            "    - H100-SXM* 1.2!  10.00    -   12.00  83.3 4.500 0.0100     -  p5.48xlarge/8\n",
        ])
        # Not a fit: the batch's origin note, no batch column or legend line.
        self.assertEqual(
            "".join(lines[8:11]),
            "  * origin GPU: the measured time, not a prediction\n" + self.MEMORY_LEGEND)
        self.assertNotIn("  batch: ", table)
        self.assertEqual("".join(lines[11:]), self.LEGEND_TAIL
                         + "  time#: rank by wall time, 1 = fastest (the rows' order)\n")

    def test_without_memory_or_fit_no_new_columns(self):
        table = habitat_client.format_table(habitat_client.to_dict(sample_response()))
        lines = table.splitlines(keepends=True)
        self.assertEqual(lines[0], "model ?  batch 8  precision ?  origin GPU H100-SXM\n")
        self.assertEqual(lines[4],
                         "time# GPU       GPU ms ±err wall ms smp/s USD/h USD/1k cost#  instance\n")
        self.assertEqual(lines[5],
                         "    1 H200       9.000   8%   11.00  90.9 4.500 0.0100     1  "
                         "p5.48xlarge/8\n")
        self.assertNotIn("GiB", table)
        self.assertNotIn("  batch: ", table)
        # The warnings are format_warnings', not the table's.
        self.assertNotIn("warning", table)
        self.assertNotIn("old GPU", table)
        # A dict from before batch_size and memory (no such keys) prints the same.
        old = habitat_client.to_dict(sample_response())
        for p in old["predictions"]:
            del p["batch_size"]
        self.assertEqual(habitat_client.format_table(old), table)

    def test_unscaled_column_only_where_something_was_unscaled(self):
        self.assertNotIn("unscaled", habitat_client.format_table(
            habitat_client.to_dict(sample_response())))
        message = sample_response()
        number = message.predictions[0].method_totals[0].DESCRIPTOR.fields_by_name["method"] \
            .enum_type.values_by_name["PREDICTION_METHOD_UNSCALED"].number
        message.predictions[0].method_totals.add(method=number, operations=1, origin_ns=10**6)
        message.predictions[0].method_totals[0].origin_ns = 3 * 10**6
        table = habitat_client.format_table(habitat_client.to_dict(message))
        self.assertIn(" cost# unscaled  instance\n", table)
        self.assertIn("   3 T4         40.00   8%   42.00  23.8     -      -     -    25.0%  -\n",
                      table)
        self.assertIn("  unscaled: share of the origin GPU time", table)

    def test_long_instance_names_give_way(self):
        message = fit_response()
        for p in message.predictions:
            if p.has_price:
                p.instance_type = "Standard_ND96isr_H100_v5_with_a_longer_name"
        table = habitat_client.format_table(habitat_client.to_dict(message))
        self.assertTrue(all(len(line) <= 100 for line in table.splitlines()))
        # At most 26 characters, the "/8" kept.
        self.assertIn("  Standard_ND96isr_H10.../8\n", table)

    def test_no_predictions_is_not_a_fit(self):
        message = habitat_client.messages()["PredictResponse"](
            origin_device_id="H100-SXM", batch_size=0, traced_batch_size=32)
        table = habitat_client.format_table(habitat_client.to_dict(message))
        self.assertEqual(table.splitlines()[0],
                         "model ?  batch 0  precision ?  origin GPU H100-SXM")
        self.assertEqual(table.splitlines()[3], "time# GPU GPU ms ±err smp/s")

    def test_header_takes_the_responses_model_and_precision(self):
        message = sample_response()
        message.model_name = "gpt2"
        message.precision = message.DESCRIPTOR.fields_by_name["precision"] \
            .enum_type.values_by_name["PRECISION_AMP_BF16"].number
        table = habitat_client.format_table(habitat_client.to_dict(message))
        self.assertTrue(table.startswith("model gpt2  batch 8  precision amp_bf16  origin GPU"))
        given = habitat_client.format_table(habitat_client.to_dict(message), model_name="mine",
                                            precision="fp32")
        self.assertTrue(given.startswith("model mine  batch 8  precision fp32  origin GPU"))

    def test_a_profiled_origin_says_so_on_its_row(self):
        for kind in ("profiler_cost_estimated", "profiled_host_timeline", ""):
            message = sample_response()
            origin = next(p for p in message.predictions if p.is_origin)
            if kind:
                origin.warnings.append("profiled: this wall time is ...")
                origin.warning_kinds.extend([""] * (len(origin.warnings) - 1) + [kind])
            table = habitat_client.format_table(habitat_client.to_dict(message))
            self.assertEqual("H100-SXM* profiled" in table, bool(kind), kind)
            self.assertEqual("    profiled: its wall time comes from the torch.profiler step"
                             in table, bool(kind), kind)
            self.assertNotIn("H200 profiled", table)


    def test_an_fsdp_ranks_origin_is_not_called_measured(self):
        message = sample_response()
        message.structured_warnings.add(kind="fsdp_rank")
        table = habitat_client.format_table(habitat_client.to_dict(message))
        self.assertIn("the FSDP rank's work as one GPU's step, predicted (not measured)", table)
        self.assertNotIn("the measured time, not a prediction", table)


@needs_protobuf
class WarningsTest(unittest.TestCase):
    """format_warnings, as client/cli_warnings.cc FormatPredictionWarnings
    prints them (`habitat predict` on stderr)."""

    def structured(self):
        """sample_response with its warnings grouped by kind, as a server
        sends them."""
        message = sample_response()
        for p in message.predictions:
            p.warning_kinds.extend(["gemm_ceiling"] * len(p.warnings))
        w = message.structured_warnings.add(kind="wall_time_from_gpu_time",
                                            summary="no wall time predicted")
        w.details.add(text="the trace has no host timeline")
        w = message.structured_warnings.add(kind="gemm_ceiling", summary="lowered to a ceiling",
                                            device_ids=["T4", "H200"])
        w.details.add(text="old GPU", device_ids=["T4"])
        w.details.add(text="2 operation(s) were lowered to the large-GEMM ceiling of the "
                           "kernel-varying model, which is long enough to wrap",
                      device_ids=["H200"])
        return message

    def test_one_line_per_kind(self):
        result = habitat_client.PredictionResult.from_message(self.structured())
        self.assertEqual(result.structured_warnings[1].details[0],
                         habitat_client.WarningDetail("old GPU", ("T4",)))
        self.assertEqual(result.device("T4").warning_kinds, ("gemm_ceiling",))
        # The GPUs in the table's order (H200 first), whatever the server's.
        expected = ("warnings (hint):\n"
                    "  no wall time predicted\n"
                    "  2 GPUs (H200, T4): lowered to a ceiling\n")
        self.assertEqual(habitat_client.format_warnings(result, hint="hint"), expected)
        self.assertEqual(habitat_client.format_warnings(habitat_client.to_dict(self.structured()),
                                                        hint="hint"), expected)
        self.assertEqual(result.format_warnings(),
                         expected.replace("warnings (hint):", "warnings:"))

    def test_a_long_line_wraps_within_100_columns(self):
        message = self.structured()
        message.structured_warnings[1].summary = (
            "the kernel-varying model extrapolated beyond its training data; expect larger "
            "errors there")
        self.assertEqual(habitat_client.format_warnings(habitat_client.to_dict(message)),
                         "warnings:\n"
                         "  no wall time predicted\n"
                         "  2 GPUs (H200, T4): the kernel-varying model extrapolated beyond its "
                         "training data; expect larger\n"
                         "    errors there\n")

    def test_explain(self):
        self.assertEqual(habitat_client.format_warnings(
            habitat_client.to_dict(self.structured()), explain=True),
            "warnings:\n"
            "  no wall time predicted [wall_time_from_gpu_time]\n"
            "    - the trace has no host timeline\n"
            "  2 GPUs (H200, T4): lowered to a ceiling [gemm_ceiling]\n"
            "    - T4: old GPU\n"
            "    - H200: 2 operation(s) were lowered to the large-GEMM ceiling of the "
            "kernel-varying model, which\n"
            "      is long enough to wrap\n")

    def test_gpu_names(self):
        table = [f"G{i}" for i in range(1, 13)]
        names = habitat_client._table._gpu_names
        self.assertEqual(names([], table, "G1", False), "")
        self.assertEqual(names(["G3"], table, "G1", False), "G3")
        self.assertEqual(names(table[::-1], table, "G1", False), "all 12 GPUs")
        self.assertEqual(names(table[1:], table, "G1", False), "11 GPUs (all but the origin)")
        self.assertEqual(names(table[2:], table, "G1", False), "10 GPUs (all but G1, G2)")
        self.assertEqual(names(["G6", "G5", "G4", "G3", "G2", "G1"], table, "G1", False),
                         "6 GPUs (G1, G2, G3, G4, G5, G6)")
        self.assertEqual(names(table[:7], table, "G1", False),
                         "7 GPUs (G1, G2, G3, G4, G5 and 2 more)")
        self.assertEqual(names(table[:7], table, "G1", True),
                         "7 GPUs (G1, G2, G3, G4, G5, G6, G7)")

    def test_a_server_before_kinds(self):
        """Without structured_warnings: one line per distinct text with its
        GPUs, then the response's own, with or without explain."""
        expected = ("warnings:\n"
                    "  2 GPUs (H200, T4): old GPU\n"
                    "  the trace has no host timeline\n")
        plain = habitat_client.to_dict(sample_response())
        self.assertEqual(habitat_client.format_warnings(plain), expected)
        self.assertEqual(habitat_client.format_warnings(plain, explain=True), expected)
        message = sample_response()
        del message.warnings[:]
        for p in message.predictions:
            del p.warnings[:]
        self.assertEqual(habitat_client.format_warnings(habitat_client.to_dict(message)), "")


class HostBoundShareTest(unittest.TestCase):
    def test_the_legends_threshold_is_the_servers(self):
        """_table's copy of kHostBoundIdleShare (core/predict/host_replay.h)."""
        with open(os.path.join(SOURCE, "core", "predict", "host_replay.h")) as f:
            match = re.search(r"kHostBoundIdleShare = ([0-9.]+);", f.read())
        self.assertIsNotNone(match)
        self.assertEqual(float(match.group(1)), _table.HOST_BOUND_IDLE_SHARE)


@needs_protobuf
class ParallelTableTest(unittest.TestCase):
    """The data-parallel section, as cli_prediction_table.cc ParallelTable prints it:
    after the legend."""

    SECTION = (
        "\n"
        "data-parallel steps (PyTorch DDP over NCCL, each GPU at its batch above):\n"
        "  GPU      GPUs step ms ±err comm ms eff.   smp/s  instance                 USD/node-h"
        " USD/1k\n"
        "  H200      8x2   12.35  10%   1.346  89% 10370.4  p5e.48xlarge                 43.260"
        " 0.0123\n"
        "  H200       16 -  H200 nodes hold at most 8 GPUs\n"
        "  H100-SXM   8+   13.00    -   0.500  90%  9846.1  a-very-long-instance-...          -"
        "      -\n"
        "  T4        8x2 -  T4: no interconnect data?\n"
        "  T4         4~   20.00  25%   4.000  80%   800.0  -                                 -"
        "      -\n"
        "  GPUs: per node (x nodes); step ms: the GPU's wall time above plus the all-reduce time\n"
        "        the backward pass does not hide (comm ms); eff.: one GPU's step / this step;\n"
        "        ±err: the GPU's own and the data-parallel model's measured error (larger where\n"
        "        the GPU waits on the host: DDP's host work is not modelled)\n"
        "        '+': all-reduces with NVLink SHARP where faster, as NCCL (--no-nvls: without)\n"
        "        '~': bandwidth known as a range (PCIe: the server's; a network: the fabric's):\n"
        "        the step is the middle of those at its lowest published and usual end;\n"
        "        ±err spans both\n"
        "  instance: the catalog's instance with that many of the GPU; USD/node-h: its price\n"
        "  USD/1k: cost per 1,000 samples\n")

    def test_section_after_the_legend(self):
        base = habitat_client.format_table(habitat_client.to_dict(sample_response()))
        self.assertNotIn("data-parallel", base, "nothing asked for: no section")
        result = habitat_client.PredictionResult.from_message(parallel_response())
        table = habitat_client.format_table(result)
        self.assertEqual(table, base + self.SECTION)
        self.assertEqual(habitat_client.format_table(habitat_client.to_dict(parallel_response())),
                         table)

    def test_unavailable_reasons_wrap_within_100_columns(self):
        message = parallel_response()
        message.predictions[0].parallel[0].unavailable = \
            "across nodes the network comes from an instance of 8 x T4, and catalog 'aws' " \
            "has none with a price of that kind"
        lines = habitat_client.format_table(habitat_client.to_dict(message)).splitlines()
        start = lines.index("  T4        8x2 -  across nodes the network comes from an instance "
                            "of 8 x T4, and catalog 'aws' has")
        self.assertEqual(lines[start + 1], "                   none with a price of that kind")
        self.assertTrue(all(len(line) <= 100 for line in lines))

    def test_no_prices_and_cost_decimals(self):
        # No price anywhere: "price/..." headers, '-' for the step's price.
        message = parallel_response()
        message.catalog = ""
        for p in message.predictions:
            p.has_price = False
            for c in p.parallel:
                c.has_price = False
        lines = habitat_client.format_table(habitat_client.to_dict(message)).splitlines()
        start = lines.index("data-parallel steps (PyTorch DDP over NCCL, each GPU at its batch "
                            "above):")
        self.assertEqual(lines[start + 1],
                         "  GPU      GPUs step ms ±err comm ms eff.   smp/s  instance"
                         "                 price/node-h price/1k")
        self.assertEqual(lines[start + 2],
                         "  H200      8x2   12.35  10%   1.346  89% 10370.4  p5e.48xlarge"
                         "                        -        -")
        # The main table's cost decimals (3 significant digits of its
        # cheapest cost) apply to the steps' costs too.
        message = parallel_response()
        message.predictions[1].cost_per_1000_samples = 0.000123
        lines = habitat_client.format_table(habitat_client.to_dict(message)).splitlines()
        row = next(line for line in lines if line.startswith("  H200      8x2"))
        self.assertTrue(row.endswith("  43.260 0.012346"), row)
        # A dict from before `parallel` (no such keys) prints no section.
        old = habitat_client.to_dict(sample_response())
        for p in old["predictions"]:
            p.pop("parallel", None)
        self.assertNotIn("data-parallel", habitat_client.format_table(old))


if __name__ == "__main__":
    unittest.main(verbosity=2)
