#include "eval/kernel_alike/evaluate.h"

#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "core/scaling/wave_scaling.h"

namespace habitat::eval {

const char* MethodName(Method m) {
  switch (m) {
    case kBandwidthRatio:
      return "bandwidth ratio";
    case kPaperEq2:
      return "paper Eq. 2";
    case kOurs:
      return "ScaleKernel";
    case kOursEq3Gamma:
      return "ScaleKernel, Eq. 3 gamma";
    case kOursNoCounters:
      return "ScaleKernel, no counters";
    default:
      return "?";
  }
}

absl::StatusOr<Report> Evaluate(const std::vector<const JoinedRow*>& rows,
                                const std::map<std::string, habitat::v1::DeviceSpec>& devices,
                                const std::vector<std::string>& device_ids, TimeBasis basis) {
  Report report;
  ScalingOptions options;
  options.basis = basis;
  const bool kernel = basis == TimeBasis::kKernelDuration;
  auto time_ms = [kernel](const Measurement& m) {
    return kernel ? m.kernel_duration_ms : m.latency_ms;
  };
  for (const JoinedRow* row : rows) {
    for (const std::string& o : device_ids) {
      const Measurement& mo = row->by_device.at(o);
      if (!(time_ms(mo) > 0)) {
        return absl::InvalidArgumentError(absl::StrCat(row->config.op, " B=", row->config.b,
                                                       " H=", row->config.h, " on ", o, ": no ",
                                                       kernel ? "kernel duration" : "latency"));
      }
      const habitat::v1::Kernel with = ToKernel(row->config, mo, true, kernel);
      const habitat::v1::Kernel without = ToKernel(row->config, mo, false, kernel);
      const auto& origin = devices.at(o);
      for (const std::string& d : device_ids) {
        if (d == o) continue;
        const auto& target = devices.at(d);
        const double actual = time_ms(row->by_device.at(d)) * 1e6;
        const double t_o = static_cast<double>(with.duration_ns());
        double pred[kMethodCount];
        pred[kBandwidthRatio] =
            t_o * origin.memory_bandwidth_gbps() / target.memory_bandwidth_gbps();
        HABITAT_ASSIGN_OR_RETURN(auto paper, PaperWaveScaling(without, origin, target));
        pred[kPaperEq2] = static_cast<double>(paper.predicted_ns);
        HABITAT_ASSIGN_OR_RETURN(auto ours, ScaleKernel(with, origin, target, options));
        pred[kOurs] = static_cast<double>(ours.predicted_ns);
        report.branches[ScalingBranchName(ours.branch)]++;
        ScalingOptions eq3 = options;
        eq3.gamma_from_achieved_bandwidth = false;
        HABITAT_ASSIGN_OR_RETURN(auto ours_eq3, ScaleKernel(with, origin, target, eq3));
        pred[kOursEq3Gamma] = static_cast<double>(ours_eq3.predicted_ns);
        HABITAT_ASSIGN_OR_RETURN(auto ours_nc, ScaleKernel(without, origin, target, options));
        pred[kOursNoCounters] = static_cast<double>(ours_nc.predicted_ns);
        const bool large = time_ms(mo) >= kLargeMs;
        MethodErrors& op = report.by_op[row->config.op];
        MethodErrors& pair = report.by_pair[{o, d}];
        for (int m = 0; m < kMethodCount; ++m) {
          const double ape = std::abs(pred[m] - actual) / actual;
          op[m].Add(ape, large);
          pair[m].Add(ape, large);
          report.overall[m].Add(ape, large);
        }
      }
    }
  }
  return report;
}

void Merge(const Report& from, Report& into) {
  auto merge = [](const MethodErrors& a, MethodErrors& b) {
    for (int m = 0; m < kMethodCount; ++m) {
      b[m].all += a[m].all;
      b[m].n_all += a[m].n_all;
      b[m].large += a[m].large;
      b[m].n_large += a[m].n_large;
    }
  };
  for (const auto& [k, v] : from.by_op) merge(v, into.by_op[k]);
  for (const auto& [k, v] : from.by_pair) merge(v, into.by_pair[k]);
  merge(from.overall, into.overall);
  for (const auto& [k, v] : from.branches) into.branches[k] += v;
}

namespace {

std::string Header(absl::string_view first) {
  std::string h = absl::StrCat("| ", first, " | n (≥0.1 ms) |");
  std::string rule = "| --- | --- |";
  for (int m = 0; m < kMethodCount; ++m) {
    absl::StrAppend(&h, " ", MethodName(static_cast<Method>(m)), ": all | ≥0.1 ms |");
    absl::StrAppend(&rule, " ---: | ---: |");
  }
  return absl::StrCat(h, "\n", rule, "\n");
}

std::string Line(absl::string_view name, const MethodErrors& e) {
  std::string s = absl::StrFormat("| %s | %d (%d) |", name, e[0].n_all, e[0].n_large);
  for (int m = 0; m < kMethodCount; ++m) {
    absl::StrAppend(&s, absl::StrFormat(" %.1f | %.1f |", e[m].Mape(), e[m].MapeLarge()));
  }
  return absl::StrCat(s, "\n");
}

}  // namespace

std::string FormatByOp(const Report& r, const std::vector<std::string>& ops) {
  std::string out = Header("op");
  for (const auto& op : ops) {
    auto it = r.by_op.find(op);
    if (it != r.by_op.end()) out += Line(op, it->second);
  }
  out += Line("**all**", r.overall);
  return out;
}

std::string FormatByPair(const Report& r, const std::vector<std::string>& ids) {
  std::string out = Header("origin → target");
  for (const auto& o : ids) {
    for (const auto& d : ids) {
      auto it = r.by_pair.find({o, d});
      if (it != r.by_pair.end()) out += Line(absl::StrCat(o, " → ", d), it->second);
    }
  }
  out += Line("**all**", r.overall);
  return out;
}

}  // namespace habitat::eval
