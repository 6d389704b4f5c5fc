#include "client/cli_prediction_table.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/cli_output.h"
#include "client/cli_text.h"
#include "core/predict/host_replay.h"
#include "core/predict/warning_tally.h"

namespace habitat {
namespace {

using v1::DevicePrediction;
using v1::PredictResponse;

const char* MethodName(v1::PredictionMethod method) {
  switch (method) {
    case v1::PREDICTION_METHOD_WAVE_SCALING:
      return "wave";
    case v1::PREDICTION_METHOD_KERNEL_VARYING:
      return "trees";
    case v1::PREDICTION_METHOD_UNSCALED:
      return "unscaled";
    case v1::PREDICTION_METHOD_MEASURED:
      return "measured";
    case v1::PREDICTION_METHOD_BATCH_SCALED:
      return "scaled";
    default:
      return "?";
  }
}

// "tf32>fp32" where the GPU runs the operation in another math mode than the
// origin did, "bf16" where both are the same, "" where the response has no
// modes (not a kernel-varying operation the predictor understands).
std::string ModeText(const v1::OperationPrediction& op) {
  if (op.origin_math_mode().empty()) return "";
  if (op.origin_math_mode() == op.target_math_mode()) return Printable(op.origin_math_mode());
  return absl::StrCat(Printable(op.origin_math_mode()), ">", Printable(op.target_math_mode()));
}

// The tables' expected-error columns: "-" where the response has no
// estimate (the origin at the traced batch: measured).
template <typename Prediction>
std::string ErrorText(const Prediction& p) {
  if (!(p.expected_error_percent() > 0)) return "-";
  return absl::StrFormat("%.0f%%", p.expected_error_percent());
}

// Milliseconds to four significant digits (three decimals at most): the
// expected errors are percents, so more digits would be noise.
std::string Millis(int64_t ns) {
  const double ms = static_cast<double>(ns) / 1e6;
  const int decimals = ms >= 1000 ? 0 : ms >= 100 ? 1 : ms >= 10 ? 2 : 3;
  return absl::StrFormat("%.*f", decimals, ms);
}

// A fit predicts each GPU at its own batch (the response's is 0).
bool IsFit(const PredictResponse& response) {
  return response.batch_size() == 0 && response.predictions_size() > 0;
}

// A fit whose batches fit the GPUs of the request's first configuration,
// fully sharded (the engine's sharded fit).
bool IsShardedFit(const PredictResponse& response) {
  if (!IsFit(response)) return false;
  const DevicePrediction& first = response.predictions(0);
  return first.parallel_size() > 0 &&
         first.parallel(0).kind() == v1::ParallelConfig::KIND_FULLY_SHARDED;
}

// The origin whose wall time comes from a torch.profiler step, imported
// without --wall-ns: the engine warns so on it (one warning, "profiled:"),
// and its row says "profiled" (docs/profiled_wall_time.md).
bool ProfiledOrigin(const DevicePrediction& p) {
  return p.is_origin() &&
         std::any_of(p.warning_kinds().begin(), p.warning_kinds().end(), [](const auto& kind) {
           return kind == warning_kind::kProfiledHostTimeline ||
                  kind == warning_kind::kProfilerCostEstimated;
         });
}

// The table's GPU cell: the id, '*' on the origin, " profiled" on a
// profiled origin.
std::string GpuCell(const DevicePrediction& p) {
  return Truncate(Printable(p.device_id()) + (p.is_origin() ? "*" : "") +
                      (ProfiledOrigin(p) ? " profiled" : ""),
                  24);
}

// The table's footnote for the origin GPU's row.
std::string OriginNote(const PredictResponse& response) {
  std::string note;
  const bool fsdp_rank =
      std::any_of(response.structured_warnings().begin(), response.structured_warnings().end(),
                  [](const auto& w) { return w.kind() == warning_kind::kFsdpRank; });
  if (fsdp_rank) {
    note = "  * origin GPU: the FSDP rank's work as one GPU's step, predicted (not measured)\n";
  } else if (IsFit(response)) {
    note = "  * origin GPU: the measured time where its batch is the traced one, else scaled\n";
  } else if (response.traced_batch_size() == 0 ||
             response.traced_batch_size() == response.batch_size()) {
    note = "  * origin GPU: the measured time, not a prediction\n";
  } else {
    note = absl::StrFormat("  * origin GPU: the time measured at batch %u scaled to batch %u\n",
                           response.traced_batch_size(), response.batch_size());
  }
  if (std::any_of(response.predictions().begin(), response.predictions().end(), ProfiledOrigin)) {
    note +=
        "    profiled: its wall time comes from the torch.profiler step, not from a step timed\n"
        "    without the profiler (--explain says how; --wall-ns gives the timed one)\n";
  }
  return note;
}

// A fit answers "which GPU is cheapest at its best batch", so its rows go
// by cost where any are priced; other tables by wall time.
bool OrderedByCost(const PredictResponse& response) {
  return IsFit(response) &&
         std::any_of(response.predictions().begin(), response.predictions().end(),
                     [](const DevicePrediction& p) { return p.rank_by_cost() > 0; });
}

}  // namespace

std::vector<const DevicePrediction*> TableOrder(const PredictResponse& response) {
  std::vector<const DevicePrediction*> sorted;
  for (const auto& p : response.predictions()) sorted.push_back(&p);
  const bool by_cost = OrderedByCost(response);
  const auto key = [by_cost](const DevicePrediction* p) {
    const auto last = [](uint32_t rank) { return rank == 0 ? UINT32_MAX : rank; };
    return std::pair(by_cost ? last(p->rank_by_cost()) : 0u, last(p->rank_by_time()));
  };
  std::stable_sort(sorted.begin(), sorted.end(),
                   [&key](const DevicePrediction* a, const DevicePrediction* b) {
                     if (key(a) != key(b)) return key(a) < key(b);
                     return a->device_id() < b->device_id();
                   });
  return sorted;
}

namespace {

std::vector<const DevicePrediction*> ByRank(const PredictResponse& response) {
  return TableOrder(response);
}

std::string GiBText(int64_t bytes) {
  return absl::StrFormat("%.1f", static_cast<double>(bytes) / (1 << 30));
}

int64_t PredictedNs(const v1::OperationPrediction& op) {
  return op.predicted_forward_ns() + op.predicted_backward_ns();
}

// The `top` operations of `prediction` with the longest predicted time,
// longest first (ties by index).
std::vector<const v1::OperationPrediction*> TopOperations(const DevicePrediction& prediction,
                                                          int top) {
  std::vector<const v1::OperationPrediction*> ops;
  for (const auto& op : prediction.operations()) ops.push_back(&op);
  std::stable_sort(ops.begin(), ops.end(), [&](const auto* a, const auto* b) {
    if (PredictedNs(*a) != PredictedNs(*b)) return PredictedNs(*a) > PredictedNs(*b);
    return a->index() < b->index();
  });
  ops.resize(std::min(ops.size(), static_cast<size_t>(std::max(top, 0))));
  return ops;
}

std::string OperationTable(const DevicePrediction& prediction, int top) {
  const std::vector<const v1::OperationPrediction*> ops = TopOperations(prediction, top);
  std::string out = absl::StrFormat("  %s: top %d of %d operations by predicted time\n",
                                    Printable(prediction.device_id()), static_cast<int>(ops.size()),
                                    prediction.operations_size());
  if (prediction.operations().empty()) {
    out += "    (no per-operation breakdown in the response)\n";
    return out;
  }
  out += absl::StrFormat("    %5s  %-32s %9s %9s %9s %6s  %-8s %s\n", "index", "operation",
                         "origin ms", "fwd ms", "bwd ms", "share", "method", "mode");
  for (const v1::OperationPrediction* op_pointer : ops) {
    const auto& op = *op_pointer;
    const double share = prediction.gpu_time_ns() > 0
                             ? 100.0 * static_cast<double>(PredictedNs(op)) /
                                   static_cast<double>(prediction.gpu_time_ns())
                             : 0.0;
    std::string line = absl::StrFormat(
        "    %5d  %-32s %9.3f %9.3f %9.3f %5.1f%%  %-8s %s", op.index(),
        Truncate(Printable(op.name()), 32),
        static_cast<double>(op.origin_forward_ns() + op.origin_backward_ns()) / 1e6,
        static_cast<double>(op.predicted_forward_ns()) / 1e6,
        static_cast<double>(op.predicted_backward_ns()) / 1e6, share,
        absl::StrCat(MethodName(op.method()), op.at_hardware_limit() ? "^" : ""), ModeText(op));
    line.erase(line.find_last_not_of(' ') + 1);
    absl::StrAppend(&out, line, "\n");
    for (const auto& warning : op.warnings()) out += Wrap("           ! ", Printable(warning), 99);
  }
  return out;
}

// The priced instance for the table: its type, "/N" for N GPUs in it,
// within `width` characters (the type is shortened, never the "/N").
std::string InstanceText(const DevicePrediction& prediction, size_t width) {
  if (!prediction.has_price()) return "-";
  const std::string suffix = prediction.gpus_per_instance() > 1
                                 ? absl::StrCat("/", prediction.gpus_per_instance())
                                 : std::string();
  const size_t room = width > suffix.size() + 8 ? width - suffix.size() : 8;
  return Truncate(Printable(prediction.instance_type()), room) + suffix;
}

// The breakdown's legend for the marks its rows use; empty when none.
std::string BreakdownLegend(const std::vector<const DevicePrediction*>& predictions, int top) {
  bool any_mode = false, any_limit = false;
  for (const auto* p : predictions) {
    for (const auto* op : TopOperations(*p, top)) {
      any_mode = any_mode || !ModeText(*op).empty();
      any_limit = any_limit || op->at_hardware_limit();
    }
  }
  std::string out;
  if (any_mode) {
    out += "  mode: math mode on the origin GPU, then on this GPU where it differs (tf32>fp32)\n";
  }
  if (any_limit) {
    out +=
        "  ^ at_hardware_limit: predicted faster than this GPU's peak FLOPS or bandwidth "
        "allow, raised to it\n";
  }
  return out;
}

}  // namespace

void KeepTopOperations(int top, PredictResponse* response) {
  for (auto& prediction : *response->mutable_predictions()) {
    google::protobuf::RepeatedPtrField<v1::OperationPrediction> kept;
    for (const v1::OperationPrediction* op : TopOperations(prediction, top)) *kept.Add() = *op;
    prediction.mutable_operations()->Swap(&kept);
  }
}
namespace {

// The lines above the table: what was predicted and how it was priced.
std::string TableHeader(const PredictResponse& response, const PredictionHeader& header,
                        const std::string& currency) {
  const std::string batch = IsFit(response) ? absl::StrCat("fitted per GPU (traced at ",
                                                           response.traced_batch_size(), ")")
                                            : absl::StrCat(response.batch_size());
  std::string out = absl::StrFormat(
      "model %s  batch %s  precision %s  origin GPU %s\n",
      header.model_name.empty() ? "?" : Printable(header.model_name), batch,
      header.precision.empty() ? "?" : header.precision,
      response.origin_device_id().empty() ? "?" : Printable(response.origin_device_id()));
  if (!header.inline_catalog_label.empty()) {
    absl::StrAppend(&out, "prices: ", Printable(header.inline_catalog_label), ", ", currency,
                    " per GPU-hour, ", PriceKindName(response.price_kind()), "\n");
  } else if (!response.catalog().empty()) {
    absl::StrAppend(&out, "prices: catalog ", Printable(response.catalog()), ", ", currency,
                    " per GPU-hour, ", PriceKindName(response.price_kind()), "\n");
  } else {
    out += "prices: none (no catalog given)\n";
  }
  if (!response.trace_id().empty()) absl::StrAppend(&out, "trace: ", response.trace_id(), "\n");
  return out + "\n";
}

// Enough decimals for three significant digits of the cheapest cost, the
// same for every row so the column lines up.
int CostDecimals(const std::vector<const DevicePrediction*>& sorted) {
  int decimals = 4;
  for (const auto* p : sorted) {
    if (p->has_price() && p->cost_per_1000_samples() > 0) {
      const int needed = 2 - static_cast<int>(std::floor(std::log10(p->cost_per_1000_samples())));
      decimals = std::max(decimals, std::min(needed, 9));
    }
  }
  return decimals;
}

bool AnyPrice(const std::vector<const DevicePrediction*>& sorted) {
  return std::any_of(sorted.begin(), sorted.end(), [](const auto* p) { return p->has_price(); });
}

bool AnyUnscaled(const std::vector<const DevicePrediction*>& sorted) {
  return std::any_of(sorted.begin(), sorted.end(),
                     [](const auto* p) { return UnscaledPercent(*p) > 0; });
}

// The GiB column: the predicted peak, '!' where it does not fit the GPU (a
// space where it does, when any row has a mark); '-' without memory.
TextColumn MemoryColumn(const std::vector<const DevicePrediction*>& sorted) {
  const bool marks = std::any_of(sorted.begin(), sorted.end(), [](const auto* p) {
    return p->has_memory() && !p->memory().fits();
  });
  TextColumn column{"GiB", false, {}};
  for (const auto* p : sorted) {
    if (!p->has_memory()) {
      column.cells.push_back(marks ? "- " : "-");
      continue;
    }
    const bool fits = p->memory().fits();
    column.cells.push_back(GiBText(p->memory().peak_allocated_bytes()) + (fits && !marks ? ""
                                                                          : fits         ? " "
                                                                                         : "!"));
  }
  return column;
}

// The wall-time column: '!' where the GPU is host-bound (a space where it
// is not, when any row has a mark); '-' where the wall time is the GPU time.
TextColumn WallColumn(const std::vector<const DevicePrediction*>& sorted) {
  const bool marks = std::any_of(sorted.begin(), sorted.end(), [](const auto* p) {
    return !p->wall_time_is_gpu_time() && p->host_bound();
  });
  const std::string space = marks ? " " : "";
  TextColumn column{"wall ms", false, {}};
  for (const auto* p : sorted) {
    column.cells.push_back(p->wall_time_is_gpu_time()
                               ? "-" + space
                               : Millis(p->wall_time_ns()) + (p->host_bound() ? "!" : space));
  }
  return column;
}

std::string RankText(uint32_t rank) { return rank > 0 ? absl::StrCat(rank) : "-"; }

// The rank the rows are in comes first; the other (cost's or time's, where
// there is one) after the prices, so the first column always reads 1, 2, 3.
TextColumn RankColumn(const std::vector<const DevicePrediction*>& sorted, bool by_cost) {
  TextColumn rank{by_cost ? "cost#" : "time#", false, {}};
  for (const auto* p : sorted) {
    rank.cells.push_back(RankText(by_cost ? p->rank_by_cost() : p->rank_by_time()));
  }
  return rank;
}

// Price per GPU-hour and cost per 1,000 samples.
void AddPriceColumns(const std::vector<const DevicePrediction*>& sorted, const std::string& unit,
                     int cost_decimals, std::vector<TextColumn>* columns) {
  TextColumn price{unit + "/h", false, {}};
  TextColumn cost{unit + "/1k", false, {}};
  for (const auto* p : sorted) {
    price.cells.push_back(p->has_price() ? absl::StrFormat("%.3f", p->price_per_hour()) : "-");
    cost.cells.push_back(
        p->has_price() ? absl::StrFormat("%.*f", cost_decimals, p->cost_per_1000_samples()) : "-");
  }
  columns->push_back(std::move(price));
  columns->push_back(std::move(cost));
}

// The main table's columns; the instance column, last, within what is left
// of kTableWidth.
std::vector<TextColumn> TableColumns(const std::vector<const DevicePrediction*>& sorted, bool fit,
                                     bool by_cost, const std::string& unit, int cost_decimals) {
  std::vector<TextColumn> columns = {RankColumn(sorted, by_cost), {"GPU", true, {}}};
  for (const auto* p : sorted) columns[1].cells.push_back(GpuCell(*p));
  auto add = [&](std::string header, auto cell) {
    TextColumn column{std::move(header), false, {}};
    for (const auto* p : sorted) column.cells.push_back(cell(*p));
    columns.push_back(std::move(column));
  };
  if (fit) add("batch", [](const DevicePrediction& p) { return absl::StrCat(p.batch_size()); });
  if (std::any_of(sorted.begin(), sorted.end(), [](const auto* p) { return p->has_memory(); })) {
    columns.push_back(MemoryColumn(sorted));
  }
  add("GPU ms", [](const DevicePrediction& p) { return Millis(p.gpu_time_ns()); });
  add("±err", [](const DevicePrediction& p) { return ErrorText(p); });
  if (std::any_of(sorted.begin(), sorted.end(),
                  [](const auto* p) { return !p->wall_time_is_gpu_time(); })) {
    columns.push_back(WallColumn(sorted));
  }
  add("smp/s",
      [](const DevicePrediction& p) { return absl::StrFormat("%.1f", p.samples_per_second()); });
  if (AnyPrice(sorted)) {
    AddPriceColumns(sorted, unit, cost_decimals, &columns);
    columns.push_back(RankColumn(sorted, !by_cost));
  }
  if (AnyUnscaled(sorted)) {
    add("unscaled",
        [](const DevicePrediction& p) { return absl::StrFormat("%.1f%%", UnscaledPercent(p)); });
  }
  if (AnyPrice(sorted)) {
    const size_t used = TableWidth(columns, "") + 2;
    const size_t room = std::min<size_t>(kTableWidth > used + 12 ? kTableWidth - used : 12, 26);
    TextColumn instance{"instance", true, {}};
    for (const auto* p : sorted) instance.cells.push_back(InstanceText(*p, room));
    columns.push_back(std::move(instance));
  }
  return columns;
}

// The legend under the rows, for the columns and marks they have.
std::string TableLegend(const PredictResponse& response,
                        const std::vector<const DevicePrediction*>& sorted,
                        const std::string& unit) {
  const auto any = [&sorted](auto predicate) {
    return std::any_of(sorted.begin(), sorted.end(), predicate);
  };
  std::string out;
  if (any([](const auto* p) { return p->is_origin(); })) out += OriginNote(response);
  if (any([](const auto* p) { return !p->wall_time_is_gpu_time() && p->host_bound(); })) {
    out += absl::StrFormat(
        "  ! host-bound: the GPU would idle for more than %.0f%% of the wall time\n",
        100.0 * kHostBoundIdleShare);
  }
  if (IsShardedFit(response)) {
    out +=
        "  batch: the largest batch per GPU whose predicted peak fits each GPU of the first\n"
        "         FSDP configuration below\n";
  } else if (IsFit(response)) {
    out += "  batch: the largest batch whose predicted peak memory fits the GPU\n";
  }
  if (any([](const auto* p) { return p->has_memory(); })) {
    out +=
        "  GiB: predicted peak of PyTorch's allocated memory; '!': with headroom for its "
        "expected\n       error, more than the GPU leaves a process (unranked: '-')\n";
  }
  out +=
      "  GPU ms: sum of the operations' predicted GPU time; ±err: its expected error (its\n"
      "          operations' expected errors weighted by their time)\n";
  if (any([](const auto* p) { return !p->wall_time_is_gpu_time(); })) {
    out +=
        "  wall ms: the origin's host timeline replayed with the predicted GPU times;\n"
        "           smp/s (samples per second), costs and ranks use it ('-': GPU ms instead)\n";
  } else {
    out +=
        "  no host timeline in the trace: smp/s (samples per second), costs and ranks use GPU "
        "ms\n  as the wall time\n";
  }
  if (AnyPrice(sorted)) {
    out += absl::StrCat("  ", unit, "/h: price per GPU-hour; ", unit,
                        "/1k: cost per 1,000 samples; cost#: rank by cost, 1 = cheapest\n");

    out +=
        "  instance: the instance type priced, the smallest with that GPU in the catalog; /N:\n"
        "           it holds N GPUs, and the price is its price per GPU-hour\n";
  }
  out += OrderedByCost(response) ? "  rows in cost# order; time#: rank by wall time, 1 = fastest\n"
                                 : "  time#: rank by wall time, 1 = fastest (the rows' order)\n";
  if (AnyUnscaled(sorted)) {
    out += "  unscaled: share of the origin GPU time in operations carried over unscaled\n";
  }
  return out;
}

// One data-parallel configuration's cells, by column header; none where it
// is unavailable.
std::vector<std::string> ParallelCells(const v1::ParallelPrediction& c, int cost_decimals) {
  if (!c.unavailable().empty()) return std::vector<std::string>(8);
  return {Millis(c.step_ns()),
          ErrorText(c),
          Millis(c.exposed_communication_ns()),
          absl::StrFormat("%.0f%%", 100 * c.scaling_efficiency()),
          absl::StrFormat("%.1f", c.samples_per_second()),
          c.instance_type().empty() ? "-" : Truncate(Printable(c.instance_type()), 24),
          c.has_price() ? absl::StrFormat("%.3f", c.price_per_node_hour()) : "-",
          c.has_price() ? absl::StrFormat("%.*f", cost_decimals, c.cost_per_1000_samples()) : "-"};
}

// True where a configuration of `sorted` is fully sharded: the section
// then marks those rows and adds their memory per GPU.
bool AnyFullySharded(const std::vector<const DevicePrediction*>& sorted) {
  return std::any_of(sorted.begin(), sorted.end(), [](const auto* p) {
    return std::any_of(p->parallel().begin(), p->parallel().end(), [](const auto& c) {
      return c.kind() == v1::ParallelConfig::KIND_FULLY_SHARDED;
    });
  });
}

// The GPUs cell: per node (x nodes), then the markers of the legend.
std::string GpusCell(const v1::ParallelPrediction& c) {
  return absl::StrCat(c.nodes() > 1 ? absl::StrCat(c.gpus_per_node(), "x", c.nodes())
                                    : absl::StrCat(c.gpus_per_node()),
                      c.kind() == v1::ParallelConfig::KIND_FULLY_SHARDED ? "F" : "",
                      c.nvls() ? "+" : "", c.bandwidth_range() ? "~" : "");
}

// The predicted peak per GPU of a fully sharded configuration, in GiB.
std::string MemoryPerGpuCell(const v1::ParallelPrediction& c) {
  if (!c.unavailable().empty()) return "";
  if (c.kind() != v1::ParallelConfig::KIND_FULLY_SHARDED || c.peak_memory_bytes_per_gpu() <= 0) {
    return "-";
  }
  return absl::StrFormat("%.1f%s", static_cast<double>(c.peak_memory_bytes_per_gpu()) / (1 << 30),
                         c.fits_memory() ? "" : "!");
}

// The data-parallel section: one line per GPU and configuration, in the
// table's order; empty when nothing asked for one.
std::string ParallelTable(const std::vector<const DevicePrediction*>& sorted,
                          const std::string& unit, int cost_decimals) {
  if (std::none_of(sorted.begin(), sorted.end(),
                   [](const auto* p) { return p->parallel_size() > 0; })) {
    return "";
  }
  const bool sharded = AnyFullySharded(sorted);
  std::vector<TextColumn> columns = {
      {"GPU", true, {}},        {"GPUs", false, {}},    {"step ms", false, {}},
      {"±err", false, {}},      {"comm ms", false, {}}, {"eff.", false, {}},
      {"smp/s", false, {}},     {"instance", true, {}}, {unit + "/node-h", false, {}},
      {unit + "/1k", false, {}}};
  if (sharded) columns.push_back({"GiB/GPU", false, {}});
  std::vector<std::string> tails;
  for (const auto* p : sorted) {
    for (const v1::ParallelPrediction& c : p->parallel()) {
      columns[0].cells.push_back(Truncate(Printable(p->device_id()), 24));
      columns[1].cells.push_back(GpusCell(c));
      std::vector<std::string> cells = ParallelCells(c, cost_decimals);
      if (sharded) cells.push_back(MemoryPerGpuCell(c));
      for (size_t i = 0; i < cells.size(); ++i) columns[i + 2].cells.push_back(cells[i]);
      tails.push_back(Printable(c.unavailable()));
    }
  }
  std::string out = sharded
                        ? "\ndata-parallel steps (PyTorch DDP or FSDP over NCCL, each GPU at its "
                          "batch above):\n"
                        : "\ndata-parallel steps (PyTorch DDP over NCCL, each GPU at its batch "
                          "above):\n";
  out += RenderColumns(columns, "  ", &tails, 2);
  out +=
      "  GPUs: per node (x nodes); step ms: the GPU's wall time above plus the all-reduce time\n"
      "        the backward pass does not hide (comm ms); eff.: one GPU's step / this step;\n"
      "        ±err: the GPU's own and the data-parallel model's measured error (larger where\n"
      "        the GPU waits on the host: DDP's host work is not modelled)\n"
      "        '+': all-reduces with NVLink SHARP where faster, as NCCL (--no-nvls: without)\n"
      "        '~': bandwidth known as a range (PCIe: the server's; a network: the fabric's):\n"
      "        the step is the middle of those at its lowest published and usual end;\n"
      "        ±err spans both\n";
  if (sharded) {
    out +=
        "        'F': FSDP2 (fully_shard): comm ms the all-gathers and reduce-scatters the\n"
        "        step does not hide; FSDP2's copies and host work are in the step,\n"
        "        checked on 2 x H200 only (docs/multi_gpu.md)\n"
        "  GiB/GPU: predicted peak of PyTorch's allocated memory on each GPU (FSDP rows);\n"
        "        '!': with headroom for its expected error, more than a GPU leaves a process\n";
  }
  out += absl::StrCat("  instance: the catalog's instance with that many of the GPU; ", unit,
                      "/node-h: its price\n  ", unit, "/1k: cost per 1,000 samples\n");
  return out;
}

}  // namespace

std::string FormatPredictionTable(const PredictResponse& response, const PredictionHeader& header,
                                  const TableOptions& options) {
  const std::string currency = response.currency().empty() ? "?" : Printable(response.currency());
  std::string out = TableHeader(response, header, currency);
  const auto sorted = ByRank(response);
  const std::string unit = AnyPrice(sorted) ? currency : "price";
  const int cost_decimals = CostDecimals(sorted);
  out += RenderColumns(
      TableColumns(sorted, IsFit(response), OrderedByCost(response), unit, cost_decimals), "");
  out += TableLegend(response, sorted, unit);
  out += ParallelTable(sorted, unit, cost_decimals);
  if (options.breakdown) {
    out += "\nbreakdown:\n";
    for (const auto* p : sorted) out += OperationTable(*p, options.top_operations);
    out += BreakdownLegend(sorted, options.top_operations);
  }
  return out;
}

}  // namespace habitat
