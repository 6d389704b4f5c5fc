#include "core/kineto/kineto_structure.h"

#include <algorithm>
#include <map>

#include "absl/strings/numbers.h"
#include "absl/strings/strip.h"

namespace habitat {
namespace kineto {

bool ParseProfilerStep(absl::string_view name, int64_t* step) {
  return absl::ConsumePrefix(&name, "ProfilerStep#") && absl::SimpleAtoi(name, step);
}

std::vector<ProfilerStep> FindProfilerSteps(const ParsedTrace& trace) {
  std::vector<ProfilerStep> steps;
  for (size_t i = 0; i < trace.host.size(); ++i) {
    const HostEvent& e = trace.host[i];
    // Older torch versions recorded the step as a cpu_op.
    if (e.kind != EventKind::kUserAnnotation && e.kind != EventKind::kCpuOp) {
      continue;
    }
    int64_t n;
    if (ParseProfilerStep(e.name, &n)) {
      steps.push_back({n, static_cast<int>(i)});
    }
  }
  std::stable_sort(steps.begin(), steps.end(), [&](const ProfilerStep& a, const ProfilerStep& b) {
    return trace.host[a.host_index].start < trace.host[b.host_index].start;
  });
  return steps;
}

OpForest::OpForest(const ParsedTrace& trace)
    : trace_(trace), parent_(trace.host.size(), -1), root_(trace.host.size(), -1) {
  // std::map: deterministic thread order.
  std::map<std::string, std::vector<int>> by_thread;
  for (size_t i = 0; i < trace.host.size(); ++i) {
    const HostEvent& e = trace.host[i];
    int64_t step;
    if (e.kind == EventKind::kCpuOp && !ParseProfilerStep(e.name, &step)) {
      by_thread[e.thread].push_back(static_cast<int>(i));
    }
  }
  const auto& host = trace.host;
  for (auto& [thread, ops] : by_thread) {
    // Parents before children: by start, then longer first.
    std::sort(ops.begin(), ops.end(), [&](int a, int b) {
      if (host[a].start != host[b].start) return host[a].start < host[b].start;
      if (host[a].end() != host[b].end()) return host[a].end() > host[b].end();
      return a < b;
    });
    std::vector<int> open;  // the chain of ops enclosing the current time
    std::vector<int>& top = top_level_by_thread_[thread];
    for (int i : ops) {
      while (!open.empty() && host[open.back()].end() < host[i].end()) {
        open.pop_back();  // ended before i ends: not an ancestor
      }
      parent_[i] = open.empty() ? -1 : open.back();
      root_[i] = parent_[i] < 0 ? i : root_[parent_[i]];
      if (parent_[i] < 0) top.push_back(i);
      open.push_back(i);
    }
  }
}

int OpForest::TopLevelAt(const std::string& thread, Nanoseconds t) const {
  auto it = top_level_by_thread_.find(thread);
  if (it == top_level_by_thread_.end()) return -1;
  const std::vector<int>& ops = it->second;
  // First op starting after t; the candidate is the one before it.
  auto after = std::upper_bound(ops.begin(), ops.end(), t, [&](Nanoseconds time, int op) {
    return time < trace_.host[op].start;
  });
  if (after == ops.begin()) return -1;
  const int op = *(after - 1);
  return t <= trace_.host[op].end() ? op : -1;
}

LaunchIndex::LaunchIndex(const ParsedTrace& trace) : trace_(trace) {
  for (size_t i = 0; i < trace.host.size(); ++i) {
    const HostEvent& e = trace.host[i];
    if (e.kind == EventKind::kRuntime && e.correlation >= 0) {
      runtime_by_correlation_.try_emplace(e.correlation, static_cast<int>(i));
    } else if (e.kind == EventKind::kCpuOp && e.external_id >= 0) {
      cpu_op_by_external_id_.try_emplace(e.external_id, static_cast<int>(i));
    }
  }
}

Launch LaunchIndex::Find(const DeviceEvent& event) const {
  Launch launch;
  auto runtime = runtime_by_correlation_.find(event.correlation);
  if (runtime != runtime_by_correlation_.end()) {
    launch.runtime_index = runtime->second;
  }
  int64_t external_id = event.external_id;
  if (external_id < 0 && launch.runtime_index >= 0) {
    external_id = trace_.host[launch.runtime_index].external_id;
  }
  auto op = cpu_op_by_external_id_.find(external_id);
  if (external_id >= 0 && op != cpu_op_by_external_id_.end()) {
    launch.external_op = op->second;
  }
  if (launch.runtime_index >= 0) {
    launch.host_time = trace_.host[launch.runtime_index].start;
  } else if (launch.external_op >= 0) {
    launch.host_time = trace_.host[launch.external_op].start;
  } else {
    launch.host_time = event.start;
  }
  return launch;
}

}  // namespace kineto
}  // namespace habitat
