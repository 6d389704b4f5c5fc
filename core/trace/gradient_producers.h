// Which backward pass produced each gradient a trace accumulates: what a
// data-parallel step needs to know of when DDP may reduce it. Header-only
// standard C++17, because the agent's capture library (compiled into its
// PyTorch extension) and the Kineto import both record it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <limits>
#include <map>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

namespace habitat {

// The name PyTorch records a gradient accumulation under.
inline constexpr std::string_view kAccumulateGradName = "torch::autograd::AccumulateGrad";

// One autograd node of the backward pass as a recorder saw it: its outermost
// range on its thread and the trace operation it became (part of).
template <typename Thread>
struct BackwardNodeSpan {
  Thread thread{};
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  uint32_t operation = 0;
  bool accumulates = false;  // a torch::autograd::AccumulateGrad
};

// The autograd engine runs an AccumulateGrad node as soon as the gradient it
// accumulates is complete (it has the highest priority), on the thread that
// completed it: the last other node to end before it there produced that
// gradient. Per node, in `nodes`' order: that producer's operation for
// accumulations, nullopt for other nodes and where nothing ended before.
template <typename Thread>
std::vector<std::optional<uint32_t>> GradientProducers(
    const std::vector<BackwardNodeSpan<Thread>>& nodes) {
  std::map<Thread, std::vector<std::pair<int64_t, uint32_t>>> ends;  // (end, operation)
  for (const auto& n : nodes) {
    if (!n.accumulates) ends[n.thread].emplace_back(n.end_ns, n.operation);
  }
  for (auto& [thread, list] : ends) std::sort(list.begin(), list.end());
  std::vector<std::optional<uint32_t>> out(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (!nodes[i].accumulates) continue;
    auto thread = ends.find(nodes[i].thread);
    if (thread == ends.end()) continue;
    const auto& list = thread->second;
    auto after =
        std::upper_bound(list.begin(), list.end(),
                         std::make_pair(nodes[i].start_ns, std::numeric_limits<uint32_t>::max()));
    if (after != list.begin()) out[i] = std::prev(after)->second;
  }
  return out;
}

}  // namespace habitat
