// habitat_eval_kernel_alike: accuracy of kernel scaling on the NeuSight
// cross-GPU measurements of kernel-alike operators. Prints Markdown.
//
//   habitat_eval_kernel_alike --neusight_dir=../shared/data/neusight
//       --devices=data/devices.textproto [--print_fit]
//
// --neusight_dir takes several roots, comma-separated: NeuSight's data set
// and measure_ops.py's Hopper output together give the production direction
// (H100 -> older GPUs) on the configurations both measured.
//
// --basis=kernel evaluates CUPTI kernel durations (files written by
// measure_ops.py) instead of host-timed latencies.
//
// Sections: (1) constants fitted on every other configuration of each
// operator (in size order), errors on the rest; (2) leave-one-operator-out:
// constants fitted on the other operators, errors on the held-out one;
// (3) the constants in --devices, on all configurations. --print_fit prints
// (1)'s constants as textproto fields; --fit_only only fits and prints.
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/file_io.h"
#include "common/status_macros.h"
#include "core/scaling/wave_scaling.h"
#include "eval/kernel_alike/evaluate.h"
#include "eval/kernel_alike/fit.h"
#include "eval/kernel_alike/neusight.h"
#include "google/protobuf/text_format.h"
#include "habitat/v1/device.pb.h"

namespace habitat::eval {
namespace {

struct Flags {
  std::vector<std::string> neusight_dirs = {"../shared/data/neusight"};
  std::string devices = "data/devices.textproto";
  bool print_fit = false;
  // Only fit constants on every configuration of --ops in --neusight_dir
  // (e.g. measure_ops.py output) and print them.
  bool fit_only = false;
  std::vector<std::string> ops = KernelAlikeOps();
  // "host": the files' Latency column (host-timed operators, NeuSight);
  // "kernel": their Kernel Duration column (CUPTI, measure_ops.py output).
  TimeBasis basis = TimeBasis::kHostTimedOp;
};

absl::StatusOr<Flags> ParseFlags(int argc, char** argv) {
  Flags f;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (absl::StartsWith(a, "--neusight_dir=")) {
      f.neusight_dirs = absl::StrSplit(a.substr(15), ',', absl::SkipEmpty());
    } else if (absl::StartsWith(a, "--devices=")) {
      f.devices = a.substr(10);
    } else if (a == "--print_fit") {
      f.print_fit = true;
    } else if (a == "--fit_only") {
      f.fit_only = true;
    } else if (a == "--basis=host") {
      f.basis = TimeBasis::kHostTimedOp;
    } else if (a == "--basis=kernel") {
      f.basis = TimeBasis::kKernelDuration;
    } else if (absl::StartsWith(a, "--ops=")) {
      f.ops = absl::StrSplit(a.substr(6), ',', absl::SkipEmpty());
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown argument '", a,
                       "' (expected --neusight_dir=DIR[,DIR...], --devices=FILE, --print_fit, "
                       "--fit_only, --ops=a,b,..., --basis=host|kernel)"));
    }
  }
  return f;
}

// Alternate configurations of each operator in order of size (B*H, then B):
// even positions fit, odd ones evaluate, so both halves span all sizes.
// (Parity of B+H would not do: layer norm's B and H are all even.)
std::set<const JoinedRow*> FitHalf(const std::vector<JoinedRow>& rows) {
  std::map<std::string, std::vector<const JoinedRow*>> by_op;
  for (const auto& r : rows) by_op[r.config.op].push_back(&r);
  std::set<const JoinedRow*> out;
  for (auto& [op, list] : by_op) {
    std::sort(list.begin(), list.end(), [](const JoinedRow* a, const JoinedRow* b) {
      return std::make_tuple(a->config.b * a->config.h, a->config.b) <
             std::make_tuple(b->config.b * b->config.h, b->config.b);
    });
    for (size_t i = 0; i < list.size(); i += 2) out.insert(list[i]);
  }
  return out;
}

std::map<std::string, habitat::v1::DeviceSpec> WithConstants(
    const std::map<std::string, habitat::v1::DeviceSpec>& specs,
    const std::map<std::string, FittedConstants>& fitted) {
  auto out = specs;
  for (const auto& [id, f] : fitted) {
    auto& d = out.at(id);
    d.set_streaming_bandwidth_gbps(f.streaming_bandwidth_gbps);
    d.set_op_fixed_latency_ns(f.op_fixed_latency_ns);
    d.set_op_latency_floor_ns(f.op_latency_floor_ns);
  }
  return out;
}

// The specs with constants fitted on `rows` for `basis`: host-timed
// latencies give bandwidth, fixed part and floor; kernel durations give
// bandwidth and the kernel's fixed part (rows moving more than 4x the GPU's
// L2, so that repeated runs do not hit in L2).
absl::StatusOr<std::map<std::string, habitat::v1::DeviceSpec>> FitSpecs(
    const std::vector<const JoinedRow*>& rows, const std::vector<std::string>& ids,
    const std::map<std::string, habitat::v1::DeviceSpec>& specs, TimeBasis basis) {
  if (basis == TimeBasis::kHostTimedOp) {
    HABITAT_ASSIGN_OR_RETURN(auto fitted, FitConstants(rows, ids));
    return WithConstants(specs, fitted);
  }
  auto out = specs;
  for (const auto& id : ids) {
    auto& d = out.at(id);
    HABITAT_ASSIGN_OR_RETURN(
        KernelLine k,
        FitKernelDurationLine(rows, id, 4 * static_cast<int64_t>(d.l2_cache_bytes())));
    d.set_streaming_bandwidth_gbps(k.streaming_bandwidth_gbps);
    d.set_kernel_fixed_latency_ns(k.kernel_fixed_latency_ns);
  }
  return out;
}

std::string ConstantsTable(const std::map<std::string, habitat::v1::DeviceSpec>& specs,
                           const std::vector<std::string>& ids, TimeBasis basis) {
  std::string s =
      "| GPU | datasheet GB/s | streaming GB/s (fraction) | fixed µs | floor µs |\n"
      "| --- | ---: | ---: | ---: | ---: |\n";
  for (const auto& id : ids) {
    const auto& d = specs.at(id);
    auto c = ResolveScalingConstants(d, basis);
    if (!c.ok()) continue;
    absl::StrAppend(&s, absl::StrFormat("| %s | %.0f | %.0f (%.3f)%s | %.1f%s | %.1f%s |\n", id,
                                        d.memory_bandwidth_gbps(), c->streaming_bandwidth_gbps,
                                        c->streaming_bandwidth_gbps / d.memory_bandwidth_gbps(),
                                        c->streaming_bandwidth_is_default ? " default" : "",
                                        c->fixed_ns / 1e3, c->fixed_is_default ? " default" : "",
                                        c->floor_ns / 1e3, c->floor_is_default ? " default" : ""));
  }
  return s;
}

std::string Branches(const Report& r) {
  std::string s = "ScaleKernel branches:";
  for (const auto& [name, n] : r.branches) absl::StrAppend(&s, " ", name, " ", n, ";");
  return s + "\n";
}

absl::Status FitOnly(const std::vector<JoinedRow>& rows, const std::vector<std::string>& ids,
                     const std::map<std::string, habitat::v1::DeviceSpec>& specs) {
  std::vector<const JoinedRow*> all;
  for (const auto& r : rows) all.push_back(&r);
  HABITAT_ASSIGN_OR_RETURN(auto fitted, FitConstants(all, ids));
  for (const auto& id : ids) {
    const auto& f = fitted.at(id);
    std::cout << absl::StrFormat(
        "%s host-timed: streaming_bandwidth_gbps %.1f op_fixed_latency_ns %d "
        "op_latency_floor_ns %d (line on %d rows, floor over %d ops)\n",
        id, f.streaming_bandwidth_gbps, f.op_fixed_latency_ns, f.op_latency_floor_ns, f.line_rows,
        f.floor_ops);
    // Kernel durations: clear of L2 by 4x its size.
    const int64_t min_bytes = 4 * static_cast<int64_t>(specs.at(id).l2_cache_bytes());
    absl::StatusOr<KernelLine> k = FitKernelDurationLine(all, id, min_bytes);
    if (k.ok()) {
      std::cout << absl::StrFormat(
          "%s kernel durations: streaming_bandwidth_gbps %.1f (line on %d "
          "rows > %d bytes, intercept %d ns) kernel_fixed_latency_ns %d\n",
          id, k->streaming_bandwidth_gbps, k->rows, min_bytes, k->line_intercept_ns,
          k->kernel_fixed_latency_ns);
    } else {
      std::cout << id << " kernel durations: " << k.status().message() << "\n";
    }
  }
  return absl::OkStatus();
}

absl::Status Run(const Flags& flags) {
  HABITAT_ASSIGN_OR_RETURN(const std::string text, ReadFile(flags.devices));
  habitat::v1::DeviceDatabase db;
  if (!google::protobuf::TextFormat::ParseFromString(text, &db)) {
    return absl::InvalidArgumentError(
        absl::StrCat(flags.devices, ": not a text-format habitat.v1.DeviceDatabase"));
  }
  std::map<std::string, habitat::v1::DeviceSpec> specs;
  for (const auto& d : db.devices()) specs[d.id()] = d;

  std::vector<std::string> ids;
  const auto& ops = flags.ops;
  HABITAT_ASSIGN_OR_RETURN(const std::vector<JoinedRow> rows,
                           LoadJoined(flags.neusight_dirs, ops, db, &ids));
  if (flags.fit_only) return FitOnly(rows, ids, specs);
  std::vector<const JoinedRow*> all, fit_half, eval_half;
  const std::set<const JoinedRow*> fit_set = FitHalf(rows);
  for (const auto& r : rows) {
    all.push_back(&r);
    (fit_set.count(&r) > 0 ? fit_half : eval_half).push_back(&r);
  }
  std::cout << absl::StrFormat(
      "Data: %d configurations of %d operators, each on %d GPUs (%s); %d "
      "ordered GPU pairs. Errors are mean absolute percentage errors over "
      "(configuration, ordered pair); \"≥0.1 ms\" keeps rows whose measured "
      "origin latency is at least 0.1 ms.\n\n",
      rows.size(), ops.size(), ids.size(), absl::StrJoin(ids, ", "), ids.size() * (ids.size() - 1));

  const TimeBasis basis = flags.basis;
  const char* what = basis == TimeBasis::kKernelDuration ? "CUPTI kernel durations"
                                                         : "host-timed operator latencies";
  std::cout << "Times: " << what << ".\n\n";

  // (1) Split by configuration.
  HABITAT_ASSIGN_OR_RETURN(auto split_specs, FitSpecs(fit_half, ids, specs, basis));
  HABITAT_ASSIGN_OR_RETURN(Report split, Evaluate(eval_half, split_specs, ids, basis));
  std::cout << "## 1. Held out by configuration\n\nConstants fitted on the " << fit_half.size()
            << " configurations at even positions of each operator's "
               "size order; errors on the "
            << eval_half.size() << " at odd positions.\n\n"
            << ConstantsTable(split_specs, ids, basis) << "\n"
            << FormatByOp(split, ops) << "\n"
            << FormatByPair(split, ids) << "\n"
            << Branches(split) << "\n";

  // (2) Leave one operator out.
  Report looo;
  for (const auto& held : ops) {
    std::vector<const JoinedRow*> train, test;
    for (const JoinedRow* r : all) (r->config.op == held ? test : train).push_back(r);
    absl::StatusOr<std::map<std::string, habitat::v1::DeviceSpec>> fitted_specs =
        FitSpecs(train, ids, specs, basis);
    if (!fitted_specs.ok()) {
      // E.g. no streaming operator left to fit bandwidth on.
      std::cout << "(" << held << " not held out: the other operators cannot "
                << "be fitted: " << fitted_specs.status().message() << ")\n";
      continue;
    }
    HABITAT_ASSIGN_OR_RETURN(Report r, Evaluate(test, *fitted_specs, ids, basis));
    Merge(r, looo);
  }
  std::cout << "## 2. Held out by operator\n\nFor each operator, constants "
               "fitted on all configurations of the other "
            << ops.size() - 1 << "; errors on it.\n\n"
            << FormatByOp(looo, ops) << "\n";

  // (3) The constants the product uses.
  HABITAT_ASSIGN_OR_RETURN(Report file, Evaluate(all, specs, ids, basis));
  std::cout << "## 3. Constants of " << flags.devices << ", all configurations\n\n"
            << ConstantsTable(specs, ids, basis) << "\n"
            << FormatByOp(file, ops) << "\n"
            << Branches(file);

  if (flags.print_fit) {
    std::cout << "\n## Constants fitted in section 1\n\n";
    for (const auto& id : ids) {
      const auto& d = split_specs.at(id);
      std::cout << absl::StrFormat(
          "%s: streaming_bandwidth_gbps: %.1f op_fixed_latency_ns: %d "
          "op_latency_floor_ns: %d kernel_fixed_latency_ns: %d\n",
          id, d.streaming_bandwidth_gbps(), d.op_fixed_latency_ns(), d.op_latency_floor_ns(),
          d.kernel_fixed_latency_ns());
    }
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace habitat::eval

int main(int argc, char** argv) {
  auto flags = habitat::eval::ParseFlags(argc, argv);
  absl::Status s = flags.ok() ? habitat::eval::Run(*flags) : flags.status();
  if (!s.ok()) {
    std::cerr << "habitat_eval_kernel_alike: " << s << "\n";
    return 1;
  }
  return 0;
}
