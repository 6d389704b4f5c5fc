// The target host's speed relative to the origin's (PredictRequest.
// target_host_speed), two ways for the end-to-end evaluation:
// - from host micro-benchmarks run on each lease next to its captures
//   (capture_agent.py hostbench: hostbench_before.json, hostbench_after.json);
// - from the other models' traces of both hosts (the leave-the-model-out
//   estimate of eval/fixtures, docs/accuracy.md §3).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "habitat/v1/trace.pb.h"

namespace habitat {
namespace eval {

// The mean (= median of two) of `metric` over <dir>/hostbench_before.json
// and <dir>/hostbench_after.json, in whatever unit the benchmark reports
// (ns per operation). NOT_FOUND naming the files when neither exists;
// INVALID_ARGUMENT naming the file and the field when a file is not JSON or
// the metric is missing or not a positive number.
absl::StatusOr<double> LoadHostbench(const std::string& dir, const std::string& metric);

// Σ over the trace's operations of their host (CPU) duration.
int64_t SumOfOpCpuTime(const habitat::v1::Trace& trace);

// "resnet50_b16_fp32" -> "resnet50".
std::string ModelOfCase(const std::string& case_name);

// Median over the cases of OTHER models than `case_name`'s that both hosts
// have of origin / target op CPU time: how much faster the target's host ran
// the same work, without looking at the case predicted. nullopt when no
// other model's case is on both.
std::optional<double> HostSpeedFromOtherModels(const std::string& case_name,
                                               const std::map<std::string, int64_t>& origin_cpu,
                                               const std::map<std::string, int64_t>& target_cpu);

}  // namespace eval
}  // namespace habitat
