// Predicts every configuration for every ordered GPU pair with each method
// and accumulates absolute percentage errors.
#pragma once

#include <array>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "core/scaling/wave_scaling.h"
#include "eval/kernel_alike/neusight.h"
#include "habitat/v1/device.pb.h"

namespace habitat::eval {

enum Method {
  kBandwidthRatio = 0,  // T_o * D_o / D_d (datasheet bandwidth)
  kPaperEq2,            // PaperWaveScaling, gamma = 1 (no counters)
  kOurs,                // ScaleKernel, host-timed, analytic DRAM bytes
  kOursEq3Gamma,        // the same, gamma from Eq. 3 instead of achieved bandwidth
  kOursNoCounters,      // ScaleKernel, host-timed, no counters
  kMethodCount,
};
const char* MethodName(Method m);

// Origin kernels at least this long form the "large" subset.
inline constexpr double kLargeMs = 0.1;

struct ErrorSum {
  double all = 0;
  int64_t n_all = 0;
  double large = 0;
  int64_t n_large = 0;
  void Add(double ape, bool is_large) {
    all += ape;
    ++n_all;
    if (is_large) {
      large += ape;
      ++n_large;
    }
  }
  double Mape() const { return n_all ? 100 * all / n_all : 0; }
  double MapeLarge() const { return n_large ? 100 * large / n_large : 0; }
};
using MethodErrors = std::array<ErrorSum, kMethodCount>;

struct Report {
  std::map<std::string, MethodErrors> by_op;
  std::map<std::pair<std::string, std::string>, MethodErrors> by_pair;
  MethodErrors overall;
  std::map<std::string, int64_t> branches;  // ScaleKernel branch counts
};

// `devices` maps id -> spec (with the constants to use filled in). With
// TimeBasis::kKernelDuration the times are the rows' CUPTI kernel durations
// and ScaleKernel runs on that basis.
absl::StatusOr<Report> Evaluate(const std::vector<const JoinedRow*>& rows,
                                const std::map<std::string, habitat::v1::DeviceSpec>& devices,
                                const std::vector<std::string>& device_ids,
                                TimeBasis basis = TimeBasis::kHostTimedOp);

void Merge(const Report& from, Report& into);

// Markdown tables.
std::string FormatByOp(const Report& r, const std::vector<std::string>& ops);
std::string FormatByPair(const Report& r, const std::vector<std::string>& ids);

}  // namespace habitat::eval
