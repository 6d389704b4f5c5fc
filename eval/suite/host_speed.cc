#include "eval/suite/host_speed.h"

#include <algorithm>
#include <filesystem>
#include <system_error>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/file_io.h"
#include "common/stats.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"

namespace habitat {
namespace eval {

absl::StatusOr<double> LoadHostbench(const std::string& dir, const std::string& metric) {
  double sum = 0;
  int files = 0;
  for (const char* name : {"hostbench_before.json", "hostbench_after.json"}) {
    const std::string path = absl::StrCat(dir, "/", name);
    std::error_code error;
    if (!std::filesystem::exists(path, error)) continue;
    HABITAT_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
    const nlohmann::json doc = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (doc.is_discarded() || !doc.is_object()) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": not a JSON object"));
    }
    auto it = doc.find(metric);
    if (it == doc.end() || !it->is_number() || !(it->get<double>() > 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": \"", metric, "\" is missing or not a positive number"));
    }
    sum += it->get<double>();
    ++files;
  }
  if (files == 0) {
    return absl::NotFoundError(
        absl::StrCat(dir, ": neither hostbench_before.json nor hostbench_after.json exists"));
  }
  return sum / files;
}

int64_t SumOfOpCpuTime(const habitat::v1::Trace& trace) {
  int64_t total = 0;
  for (const auto& op : trace.operations()) total += op.cpu_duration_ns();
  return total;
}

std::string ModelOfCase(const std::string& case_name) {
  return case_name.substr(0, case_name.rfind("_b", case_name.find_last_of('_') - 1));
}

std::optional<double> HostSpeedFromOtherModels(const std::string& case_name,
                                               const std::map<std::string, int64_t>& origin_cpu,
                                               const std::map<std::string, int64_t>& target_cpu) {
  const std::string model = ModelOfCase(case_name);
  std::vector<double> ratios;
  for (const auto& [other, origin_ns] : origin_cpu) {
    if (ModelOfCase(other) == model) continue;
    auto it = target_cpu.find(other);
    if (it == target_cpu.end() || it->second <= 0 || origin_ns <= 0) continue;
    ratios.push_back(static_cast<double>(origin_ns) / static_cast<double>(it->second));
  }
  if (ratios.empty()) return std::nullopt;
  return Median(std::move(ratios));
}

}  // namespace eval
}  // namespace habitat
