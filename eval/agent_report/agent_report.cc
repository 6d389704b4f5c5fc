// Checks the agent captures (tests/testdata/agent_suite) and
// writes docs/agent_validation.md:
//  1. per-op times add up to the measured GPU-busy time;
//  2. the paper's per-op re-runs (Pass.rerun_time_ns) against the same ops'
//     in-iteration CUPTI times;
//  3. hardware counters: how much kernel time has them, and the measured
//     DRAM bytes of kernel-alike ops against core/predict/op_traffic's
//     estimate, which traces without counters rely on.
//
//   habitat_agent_report --suite=tests/testdata/agent_suite --tags=h100,h200
//       > docs/agent_validation.md
#include <algorithm>
#include <cmath>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/file_io.h"
#include "common/stats.h"
#include "common/status_macros.h"
#include "core/predict/op_traffic.h"
#include "core/trace/op_classification.h"
#include "core/trace/trace_totals.h"
#include "habitat/v1/trace.pb.h"
#include "nlohmann/json.hpp"

ABSL_FLAG(std::string, suite, "tests/testdata/agent_suite", "Folder with <tag>/measurements.json");
ABSL_FLAG(std::string, tags, "h100,h200", "Comma-separated capture folders to report on");

namespace habitat {
namespace {

struct Case {
  std::string name, model;
  double wall_ms = 0, busy_ms = 0, host_share = 0;
  habitat::v1::Trace trace;
};

absl::StatusOr<std::vector<Case>> LoadCases(const std::string& dir) {
  HABITAT_ASSIGN_OR_RETURN(std::string text, ReadFile(dir + "/measurements.json"));
  const nlohmann::json doc = nlohmann::json::parse(text, nullptr, false);
  if (doc.is_discarded() || !doc.contains("cases") || !doc["cases"].is_array()) {
    return absl::InvalidArgumentError(dir + "/measurements.json: no \"cases\" array");
  }
  std::vector<Case> out;
  for (const auto& c : doc["cases"]) {
    Case k;
    k.name = c.value("case", "");
    k.model = c.value("model", "");
    k.wall_ms = c.value("wall_ns_median", 0.0) / 1e6;
    k.busy_ms = c.value("gpu_busy_ns_median", 0.0) / 1e6;
    k.host_share = c.value("host_share", 0.0);
    HABITAT_ASSIGN_OR_RETURN(std::string bytes, ReadFile(dir + "/" + k.name + ".trace.gz"));
    if (!k.trace.ParseFromString(bytes)) {
      return absl::InvalidArgumentError(dir + "/" + k.name + ".trace.gz: not a habitat.v1.Trace");
    }
    out.push_back(std::move(k));
  }
  return out;
}

bool HasDramCounters(const habitat::v1::Kernel& k) {
  return k.has_counters() && k.counters().dram_read_bytes() + k.counters().dram_write_bytes() > 0;
}

bool AllKernelsCounted(const habitat::v1::Pass& p) {
  if (p.kernels_size() == 0) return false;
  for (const auto& k : p.kernels()) {
    if (!HasDramCounters(k)) return false;
  }
  return true;
}

uint64_t PassDramBytes(const habitat::v1::Pass& p) {
  uint64_t b = 0;
  for (const auto& k : p.kernels())
    b += k.counters().dram_read_bytes() + k.counters().dram_write_bytes();
  return b;
}

void PerOpSums(const std::string& tag, const std::vector<Case>& cases) {
  std::cout << absl::StrFormat(
      "\n### %s\n\n| case | wall ms | busy ms (median of 30) | host share | tracked busy ms | "
      "Σ per-op / tracked busy | Σ per-op / median busy |\n|---|---:|---:|---:|---:|---:|---:|\n",
      tag);
  std::vector<double> others;
  for (const Case& c : cases) {
    const double sum = SumOfPassTimes(c.trace) / 1e6;
    const double tracked = c.trace.iteration_gpu_busy_ns() / 1e6;
    std::cout << absl::StrFormat("| %s | %.2f | %.2f | %.2f | %.2f | %.4f | %.4f |\n", c.name,
                                 c.wall_ms, c.busy_ms, c.host_share, tracked, sum / tracked,
                                 sum / c.busy_ms);
    if (c.model != "gnmt") others.push_back(std::abs(sum / c.busy_ms - 1));
  }
  std::cout << absl::StrFormat(
      "\nWithout GNMT: largest |Σ per-op / median busy − 1| = %.2f %%, median %.2f %% (%d "
      "cases).\n",
      100 * *std::max_element(others.begin(), others.end()), 100 * Median(others),
      static_cast<int>(others.size()));
}

void Reruns(const std::string& tag, const std::vector<Case>& cases) {
  std::cout << absl::StrFormat(
      "\n### %s\n\n| case | passes re-run (with GPU work) | share of pass time re-run | "
      "Σ re-run / Σ CUPTI, forward | backward | kernel-varying forward | kernel-alike forward | "
      "median per pass | re-runs of ops without GPU work: count, median µs |\n"
      "|---|---:|---:|---:|---:|---:|---:|---:|---:|\n",
      tag);
  for (const Case& c : cases) {
    int64_t fwd_re = 0, fwd_cu = 0, bwd_re = 0, bwd_cu = 0, var_re = 0, var_cu = 0, alike_re = 0,
            alike_cu = 0, covered = 0, all = 0;
    int passes = 0;
    std::vector<double> per_pass, empty_us;
    for (const auto& op : c.trace.operations()) {
      all += op.forward().time_ns() + op.backward().time_ns();
      for (bool backward : {false, true}) {
        const auto& p = backward ? op.backward() : op.forward();
        if (p.rerun_time_ns() <= 0) continue;
        // A pass without GPU work in the iteration (views, reshapes) shows
        // only the event pair's floor; kept apart from the ratios.
        if (p.time_ns() <= 0) {
          empty_us.push_back(p.rerun_time_ns() / 1e3);
          continue;
        }
        ++passes;
        covered += p.time_ns();
        per_pass.push_back(static_cast<double>(p.rerun_time_ns()) / p.time_ns());
        (backward ? bwd_re : fwd_re) += p.rerun_time_ns();
        (backward ? bwd_cu : fwd_cu) += p.time_ns();
        if (backward) continue;
        const bool varying = ClassifyOperation(op.name()) == OpKind::kKernelVarying;
        (varying ? var_re : alike_re) += p.rerun_time_ns();
        (varying ? var_cu : alike_cu) += p.time_ns();
      }
    }
    if (passes == 0) continue;
    auto ratio = [](int64_t a, int64_t b) {
      return b > 0 ? absl::StrFormat("%.3f", static_cast<double>(a) / b) : std::string("–");
    };
    std::cout << absl::StrFormat(
        "| %s | %d | %.1f %% | %s | %s | %s | %s | %.3f | %d, %.1f |\n", c.name, passes,
        100.0 * covered / std::max<int64_t>(1, all), ratio(fwd_re, fwd_cu), ratio(bwd_re, bwd_cu),
        ratio(var_re, var_cu), ratio(alike_re, alike_cu), Median(per_pass),
        static_cast<int>(empty_us.size()), empty_us.empty() ? 0.0 : Median(empty_us));
  }
}

void Counters(const std::string& tag, const std::vector<Case>& cases) {
  std::cout << absl::StrFormat(
      "\n### %s\n\n| case | kernel time with counters | kernel-alike passes compared | "
      "measured / estimated DRAM bytes (Σ) | median per pass | batch_norm passes | relu/add passes "
      "|\n"
      "|---|---:|---:|---:|---:|---:|---:|\n",
      tag);
  for (const Case& c : cases) {
    int64_t all = 0, counted = 0;
    double measured = 0, estimated = 0;
    std::vector<double> ratios, bn, pointwise;
    for (const auto& op : c.trace.operations()) {
      for (bool backward : {false, true}) {
        const auto& p = backward ? op.backward() : op.forward();
        for (const auto& k : p.kernels()) {
          all += k.duration_ns();
          if (HasDramCounters(k)) counted += k.duration_ns();
        }
        if (ClassifyOperation(op.name()) != OpKind::kKernelAlike || !AllKernelsCounted(p)) continue;
        const auto est = EstimatePassDramBytes(op, backward);
        if (!est || *est == 0) continue;
        const double m = static_cast<double>(PassDramBytes(p));
        measured += m;
        estimated += static_cast<double>(*est);
        ratios.push_back(m / *est);
        if (op.name().find("batch_norm") != std::string::npos) bn.push_back(m / *est);
        if (op.name().find("relu") != std::string::npos ||
            op.name().find("add") != std::string::npos)
          pointwise.push_back(m / *est);
      }
    }
    if (counted == 0) continue;
    auto med = [](const std::vector<double>& v) {
      return v.empty() ? std::string("–")
                       : absl::StrFormat("%.2f (%d)", Median(v), static_cast<int>(v.size()));
    };
    std::cout << absl::StrFormat(
        "| %s | %.1f %% | %d | %s | %s | %s | %s |\n", c.name,
        100.0 * counted / std::max<int64_t>(1, all), static_cast<int>(ratios.size()),
        estimated > 0 ? absl::StrFormat("%.2f", measured / estimated) : "–", med(ratios), med(bn),
        med(pointwise));
  }
}

int Main() {
  const std::string suite = absl::GetFlag(FLAGS_suite);
  std::map<std::string, std::vector<Case>> by_tag;
  const std::vector<std::string> tags =
      absl::StrSplit(absl::GetFlag(FLAGS_tags), ',', absl::SkipEmpty());
  for (const std::string& tag : tags) {
    auto cases = LoadCases(suite + "/" + tag);
    if (!cases.ok()) {
      std::cerr << "habitat_agent_report: " << cases.status() << "\n";
      return 1;
    }
    by_tag[tag] = std::move(*cases);
  }
  std::cout << "# Agent captures: validation\n\n"
               "Generated by `build/eval/agent_report/habitat_agent_report --suite="
               "tests/testdata/agent_suite --tags="
            << absl::GetFlag(FLAGS_tags)
            << " > docs/agent_validation.md` from the committed captures "
               "(tests/testdata/agent_suite/README.md); CTest `agent_report_matches_doc` "
               "fails when this file differs from what the data gives.\n";
  std::cout << "\n## 1. Per-op times add up to the GPU-busy time\n\n"
               "Σ per-op = the tracked iteration's pass times (CUPTI kernel, memcpy and memset "
               "durations) plus unattributed kernels; busy = union of the GPU intervals.\n";
  for (const auto& [tag, cases] : by_tag) PerOpSums(tag, cases);
  std::cout << "\n## 2. Per-op re-runs against the iteration\n\n"
               "Middle batch size of each model: every top-level forward op re-run alone with "
               "inputs of its recorded shapes, 5 repetitions after 2 warm-up calls, behind a "
               "spin kernel so the CUDA events time the GPU (median; `OperationTracker."
               "measure_ops`). Ratios are over the passes that were re-run and ran GPU work in the "
               "iteration.\n";
  for (const auto& [tag, cases] : by_tag) Reruns(tag, cases);
  std::cout << "\n## 3. Hardware counters\n\n"
               "Kernel time whose kernels carry counters (the 99.5 % rule), and for kernel-alike "
               "passes whose kernels all have counters: measured DRAM bytes (read + written) over "
               "the tensor-argument estimate of core/predict/op_traffic (`EstimatePassDramBytes`), "
               "which traces without counters use. Median per pass (number of passes).\n";
  for (const auto& [tag, cases] : by_tag) Counters(tag, cases);
  return 0;
}

}  // namespace
}  // namespace habitat

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return habitat::Main();
}
