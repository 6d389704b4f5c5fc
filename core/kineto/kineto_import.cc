#include "core/kineto/kineto_import.h"

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "core/kineto/kineto_arguments.h"
#include "core/kineto/kineto_events.h"
#include "core/kineto/kineto_header.h"
#include "core/kineto/kineto_memory.h"
#include "core/kineto/kineto_structure.h"
#include "core/kineto/profiler_cost.h"
#include "core/trace/gradient_producers.h"
#include "core/trace/math_mode.h"

#ifndef HABITAT_VERSION
#define HABITAT_VERSION "unknown"
#endif

namespace habitat {
namespace {

using habitat::v1::Kernel;
using habitat::v1::MemoryActivity;
using habitat::v1::Operation;
using habitat::v1::Pass;
using habitat::v1::Trace;
using kineto::DeviceEvent;
using kineto::EventKind;
using kineto::HostEvent;
using kineto::Launch;
using kineto::ParsedTrace;

constexpr absl::string_view kBackwardPrefix = "autograd::engine::evaluate_function: ";

// The iteration being imported, in the trace's clock.
struct Window {
  Nanoseconds start = 0;
  Nanoseconds end = 0;
  std::string label;
  bool Contains(Nanoseconds t) const { return t >= start && t <= end; }
};

// A GPU activity placed in the window.
struct Placed {
  int device_index;  // into ParsedTrace::device
  Launch launch;
  int owner;  // top-level cpu_op, -1 when unattributed
};

// Everything attributed to one top-level cpu_op.
struct OpWork {
  std::vector<int> placed;  // into the Placed vector, in GPU start order
  Nanoseconds time = 0;     // sum of durations
};

bool IsBackwardNode(const HostEvent& e) { return absl::StartsWith(e.name, kBackwardPrefix); }

absl::StatusOr<Window> ChooseWindow(const ParsedTrace& trace, const kineto::LaunchIndex& launches,
                                    const KinetoImportOptions& options) {
  const std::vector<kineto::ProfilerStep> steps = kineto::FindProfilerSteps(trace);
  auto window_of = [&](const kineto::ProfilerStep& s) {
    const HostEvent& e = trace.host[s.host_index];
    return Window{e.start, e.end(), e.name};
  };
  if (options.profiler_step.has_value()) {
    for (const auto& s : steps) {
      if (s.number == *options.profiler_step) return window_of(s);
    }
    std::vector<int64_t> numbers;
    for (const auto& s : steps) numbers.push_back(s.number);
    return absl::InvalidArgumentError(absl::StrCat(
        "Kineto trace has no ProfilerStep#", *options.profiler_step,
        " (steps present: ", numbers.empty() ? "none" : absl::StrJoin(numbers, ", "), ")"));
  }
  if (!steps.empty()) {
    // The last step in which GPU work was launched: a profile stopped right
    // after prof.step() ends with an empty, incomplete step.
    for (auto s = steps.rbegin(); s != steps.rend(); ++s) {
      const Window w = window_of(*s);
      for (const DeviceEvent& d : trace.device) {
        if (w.Contains(launches.Find(d).host_time)) return w;
      }
    }
    return absl::InvalidArgumentError(
        absl::StrCat("Kineto trace: none of its ", steps.size(),
                     " ProfilerStep annotations launched any GPU work"));
  }
  Window w{trace.device.front().start, trace.device.front().end(), "whole trace"};
  for (const HostEvent& e : trace.host) {
    w.start = std::min(w.start, e.start);
    w.end = std::max(w.end, e.end());
  }
  for (const DeviceEvent& d : trace.device) {
    w.start = std::min(w.start, d.start);
    w.end = std::max(w.end, d.end());
  }
  return w;
}

MemoryActivity::Kind MemoryKind(const DeviceEvent& d) {
  if (d.kind == EventKind::kMemset) return MemoryActivity::KIND_MEMSET;
  if (absl::StrContains(d.name, "HtoD")) return MemoryActivity::KIND_MEMCPY_HTOD;
  if (absl::StrContains(d.name, "DtoH")) return MemoryActivity::KIND_MEMCPY_DTOH;
  if (absl::StrContains(d.name, "DtoD")) return MemoryActivity::KIND_MEMCPY_DTOD;
  return MemoryActivity::KIND_OTHER;
}

class Converter {
 public:
  Converter(const ParsedTrace& trace, const KinetoImportOptions& options)
      : trace_(trace), options_(options), forest_(trace), launches_(trace) {}

  absl::StatusOr<Trace> Run();

 private:
  void PlaceDeviceEvents();
  // Sequence number of the autograd node a backward top-level op ran, and
  // the nested node record (for its arguments); -1 when not recorded.
  std::pair<int64_t, int> BackwardNode(int root, const std::vector<int>& children) const;
  void LinkBackwards();
  absl::Status BuildOperations(Trace* out);
  // Operation.gradient_producer of each AccumulateGrad (core/trace/gradient_producers.h).
  void LinkGradientProducers(Trace* out) const;
  void AppendWork(const OpWork& work, Pass* pass) const;
  void FillKernel(const Placed& p, Kernel* k) const;
  void FillTraceLevel(Trace* out) const;
  std::vector<kineto::PassSpan> PassSpans() const;

  Nanoseconds Rel(Nanoseconds t) const { return t - window_.start; }

  const ParsedTrace& trace_;
  const KinetoImportOptions& options_;
  kineto::OpForest forest_;
  kineto::LaunchIndex launches_;
  Window window_;

  std::vector<Placed> placed_;                    // the window's GPU activities
  std::map<int, OpWork> work_;                    // top-level op -> its activities
  std::vector<int> top_level_;                    // top-level ops in the window
  std::map<int, std::vector<int>> backwards_of_;  // forward -> nodes
  std::map<int, int64_t> node_sequence_;          // backward root -> seq
  std::map<int, int> node_record_;                // backward root -> record
  // Top-level op -> the operation it became part of, and whether as (part
  // of) its backward pass.
  std::map<int, std::pair<int, bool>> pass_of_;
  int external_id_fallbacks_ = 0;
};

void Converter::PlaceDeviceEvents() {
  for (size_t i = 0; i < trace_.host.size(); ++i) {
    if (forest_.IsCpuOp(i) && forest_.root(i) == static_cast<int>(i) &&
        window_.Contains(trace_.host[i].start)) {
      top_level_.push_back(static_cast<int>(i));
    }
  }
  std::sort(top_level_.begin(), top_level_.end(), [&](int a, int b) {
    return std::make_pair(trace_.host[a].start, a) < std::make_pair(trace_.host[b].start, b);
  });
  auto in_window_op = [&](int op) { return op >= 0 && window_.Contains(trace_.host[op].start); };
  for (size_t i = 0; i < trace_.device.size(); ++i) {
    const DeviceEvent& d = trace_.device[i];
    Placed p{static_cast<int>(i), launches_.Find(d), -1};
    if (!window_.Contains(p.launch.host_time)) continue;
    if (p.launch.runtime_index >= 0) {
      const HostEvent& call = trace_.host[p.launch.runtime_index];
      p.owner = forest_.TopLevelAt(call.thread, call.start);
    }
    if (!in_window_op(p.owner) && p.launch.external_op >= 0) {
      p.owner = forest_.root(p.launch.external_op);
      if (in_window_op(p.owner)) ++external_id_fallbacks_;
    }
    if (!in_window_op(p.owner)) p.owner = -1;
    placed_.push_back(p);
  }
  std::sort(placed_.begin(), placed_.end(), [&](const Placed& a, const Placed& b) {
    return std::make_pair(trace_.device[a.device_index].start, a.device_index) <
           std::make_pair(trace_.device[b.device_index].start, b.device_index);
  });
  for (size_t i = 0; i < placed_.size(); ++i) {
    if (placed_[i].owner < 0) continue;
    OpWork& w = work_[placed_[i].owner];
    w.placed.push_back(static_cast<int>(i));
    w.time += trace_.device[placed_[i].device_index].duration;
  }
}

std::pair<int64_t, int> Converter::BackwardNode(int root, const std::vector<int>& children) const {
  // Recent torch puts the sequence number on the evaluate_function event
  // itself; always on the node record (Node::operator()), a direct child
  // named after the node, which also holds the node's input shapes. Other
  // children are the node's ATen ops, numbered by the autograd thread.
  const HostEvent& top = trace_.host[root];
  const absl::string_view node = absl::string_view(top.name).substr(kBackwardPrefix.size());
  int record = -1;
  for (int child : children) {
    if (trace_.host[child].name == node) {
      record = child;
      break;
    }
  }
  int64_t seq = top.sequence_number;
  if (seq < 0 && record >= 0) seq = trace_.host[record].sequence_number;
  return {seq, record};
}

void Converter::LinkBackwards() {
  // Sequence number -> the last forward top-level op whose subtree recorded
  // it (ops peek the counter before a node takes it, so earlier ops may
  // hold the same number; the creating op is the last).
  absl::flat_hash_map<int64_t, int> forward_of;
  absl::flat_hash_map<int, bool> is_forward_top;
  for (int op : top_level_) is_forward_top[op] = !IsBackwardNode(trace_.host[op]);
  for (size_t i = 0; i < trace_.host.size(); ++i) {
    const HostEvent& e = trace_.host[i];
    if (!forest_.IsCpuOp(i) || e.sequence_number < 0) continue;
    const int root = forest_.root(i);
    auto top = is_forward_top.find(root);
    if (top == is_forward_top.end() || !top->second) continue;
    auto [it, inserted] = forward_of.try_emplace(e.sequence_number, root);
    if (!inserted && trace_.host[root].start > trace_.host[it->second].start) {
      it->second = root;
    }
  }
  std::map<int, std::vector<int>> children;  // of backward nodes, in order
  for (size_t i = 0; i < trace_.host.size(); ++i) {
    const int parent = forest_.parent(i);
    if (parent >= 0 && forest_.root(parent) == parent && IsBackwardNode(trace_.host[parent])) {
      children[parent].push_back(static_cast<int>(i));
    }
  }
  for (auto& [node, list] : children) {
    std::sort(list.begin(), list.end(),
              [&](int a, int b) { return trace_.host[a].start < trace_.host[b].start; });
  }
  for (int op : top_level_) {
    if (!IsBackwardNode(trace_.host[op])) continue;
    auto [seq, record] = BackwardNode(op, children[op]);
    node_sequence_[op] = seq;
    node_record_[op] = record;
    auto fwd = seq >= 0 ? forward_of.find(seq) : forward_of.end();
    if (fwd != forward_of.end() && trace_.host[fwd->second].start < trace_.host[op].start) {
      backwards_of_[fwd->second].push_back(op);
    }
  }
}

void Converter::FillKernel(const Placed& p, Kernel* k) const {
  const DeviceEvent& d = trace_.device[p.device_index];
  k->set_name(d.name);
  k->mutable_grid()->set_x(d.grid[0]);
  k->mutable_grid()->set_y(d.grid[1]);
  k->mutable_grid()->set_z(d.grid[2]);
  k->mutable_block()->set_x(d.block[0]);
  k->mutable_block()->set_y(d.block[1]);
  k->mutable_block()->set_z(d.block[2]);
  k->set_registers_per_thread(d.registers_per_thread);
  k->set_static_shared_memory_bytes(d.static_shared_memory);
  k->set_dynamic_shared_memory_bytes(d.dynamic_shared_memory);
  k->set_duration_ns(d.duration);
  k->set_start_ns(std::max<Nanoseconds>(0, Rel(d.start)));
  if (p.launch.runtime_index >= 0) {
    k->set_launch_ns(Rel(trace_.host[p.launch.runtime_index].start));
    k->set_has_launch_time(true);
  }
  k->set_stream(d.stream);
  k->set_correlation_id(d.correlation >= 0 ? d.correlation : 0);
}

void Converter::AppendWork(const OpWork& work, Pass* pass) const {
  for (int index : work.placed) {
    const Placed& p = placed_[index];
    const DeviceEvent& d = trace_.device[p.device_index];
    if (d.kind == EventKind::kKernel) {
      FillKernel(p, pass->add_kernels());
      continue;
    }
    MemoryActivity* m = pass->add_memory();
    m->set_kind(MemoryKind(d));
    m->set_bytes(d.bytes);
    m->set_duration_ns(d.duration);
    m->set_start_ns(std::max<Nanoseconds>(0, Rel(d.start)));
    if (p.launch.runtime_index >= 0) {
      m->set_launch_ns(Rel(trace_.host[p.launch.runtime_index].start));
      m->set_has_launch_time(true);
    }
    m->set_stream(d.stream);
  }
  pass->set_time_ns(pass->time_ns() + work.time);
}

absl::Status Converter::BuildOperations(Trace* out) {
  auto work_of = [&](int op) {
    auto it = work_.find(op);
    return it == work_.end() ? OpWork() : it->second;
  };
  std::map<int, bool> linked;
  for (const auto& [fwd, nodes] : backwards_of_) {
    for (int n : nodes) linked[n] = true;
  }
  for (int op : top_level_) {
    const HostEvent& e = trace_.host[op];
    const bool backward_node = IsBackwardNode(e);
    if (backward_node && linked.count(op) > 0) continue;  // in its forward
    const int index = out->operations_size();
    pass_of_[op] = {index, backward_node};
    Operation* o = out->add_operations();
    o->set_cpu_start_ns(Rel(e.start));
    o->set_cpu_duration_ns(e.duration);
    o->set_sequence_number(-1);
    if (backward_node) {
      const std::string node(absl::string_view(e.name).substr(kBackwardPrefix.size()));
      o->set_name(node);
      o->mutable_forward();  // present and empty
      Pass* b = o->mutable_backward();
      b->set_recorded_name(node);
      AppendWork(work_of(op), b);
      o->set_sequence_number(node_sequence_[op]);
      const int record = node_record_[op];
      if (record >= 0) {
        HABITAT_ASSIGN_OR_RETURN(
            auto args, kineto::ConvertArguments(trace_.host[record].index,
                                                trace_.RawEvent(trace_.host[record].index)));
        for (auto& a : args) *o->add_arguments() = std::move(a);
      }
      continue;
    }
    o->set_name(e.name);
    HABITAT_ASSIGN_OR_RETURN(auto args,
                             kineto::ConvertArguments(e.index, trace_.RawEvent(e.index)));
    for (auto& a : args) *o->add_arguments() = std::move(a);
    AppendWork(work_of(op), o->mutable_forward());
    auto nodes = backwards_of_.find(op);
    if (nodes == backwards_of_.end()) continue;
    // One backward pass for all nodes the op created, in execution order,
    // named after the node with the most GPU time.
    std::vector<int> order = nodes->second;
    for (int n : order) pass_of_[n] = {index, true};
    std::sort(order.begin(), order.end(),
              [&](int a, int b) { return trace_.host[a].start < trace_.host[b].start; });
    Pass* b = o->mutable_backward();
    int dominant = order.front();
    OpWork merged;
    for (int n : order) {
      const OpWork w = work_of(n);
      if (w.time > work_of(dominant).time) dominant = n;
      merged.placed.insert(merged.placed.end(), w.placed.begin(), w.placed.end());
      merged.time += w.time;
    }
    std::sort(merged.placed.begin(), merged.placed.end());  // GPU start order
    AppendWork(merged, b);
    b->set_recorded_name(
        std::string(absl::string_view(trace_.host[dominant].name).substr(kBackwardPrefix.size())));
    o->set_sequence_number(node_sequence_[dominant]);
  }
  return absl::OkStatus();
}

void Converter::LinkGradientProducers(Trace* out) const {
  std::vector<BackwardNodeSpan<std::string>> nodes;
  for (const auto& [op, where] : pass_of_) {
    if (!where.second) continue;  // a forward
    const HostEvent& e = trace_.host[op];
    nodes.push_back({e.thread, e.start, e.end(), static_cast<uint32_t>(where.first),
                     out->operations(where.first).name() == kAccumulateGradName});
  }
  const std::vector<std::optional<uint32_t>> producers = GradientProducers(nodes);
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (producers[i].has_value()) {
      out->mutable_operations(static_cast<int>(nodes[i].operation))
          ->set_gradient_producer(*producers[i]);
    }
  }
}

void Converter::FillTraceLevel(Trace* out) const {
  auto& meta = *out->mutable_metadata();
  // Union of the window's GPU intervals.
  std::vector<std::pair<Nanoseconds, Nanoseconds>> spans;
  int kernels = 0, memory = 0, unattributed_memory = 0;
  Nanoseconds unattributed_kernel_ns = 0, unattributed_memory_ns = 0;
  Nanoseconds total_ns = 0;
  for (const Placed& p : placed_) {
    const DeviceEvent& d = trace_.device[p.device_index];
    spans.emplace_back(d.start, d.end());
    total_ns += d.duration;
    const bool is_kernel = d.kind == EventKind::kKernel;
    (is_kernel ? kernels : memory)++;
    if (p.owner >= 0) continue;
    if (is_kernel) {
      FillKernel(p, out->add_unattributed_kernels());
      unattributed_kernel_ns += d.duration;
    } else {
      ++unattributed_memory;
      unattributed_memory_ns += d.duration;
    }
  }
  std::sort(spans.begin(), spans.end());
  Nanoseconds busy = 0, cursor = spans.empty() ? 0 : spans.front().first;
  for (const auto& [start, end] : spans) {
    cursor = std::max(cursor, start);
    if (end > cursor) {
      busy += end - cursor;
      cursor = end;
    }
  }
  out->set_iteration_gpu_busy_ns(busy);
  // Synchronisations and copies the host waits on.
  for (const HostEvent& e : trace_.host) {
    if (e.kind != EventKind::kRuntime || !window_.Contains(e.start)) continue;
    if (absl::StrContains(e.name, "Synchronize") || absl::StartsWith(e.name, "cudaMemcpy") ||
        absl::StartsWith(e.name, "cuMemcpy")) {
      auto* h = out->add_host_events();
      h->set_name(e.name);
      h->set_cpu_start_ns(Rel(e.start));
      h->set_cpu_duration_ns(e.duration);
    }
  }
  std::sort(out->mutable_host_events()->begin(), out->mutable_host_events()->end(),
            [](const auto& a, const auto& b) { return a.cpu_start_ns() < b.cpu_start_ns(); });
  meta["kineto.iteration"] = window_.label;
  meta["kineto.kernels"] = absl::StrCat(kernels);
  meta["kineto.memory_activities"] = absl::StrCat(memory);
  meta["kineto.gpu_time_ns"] = absl::StrCat(total_ns);
  meta["kineto.unattributed_kernels"] = absl::StrCat(out->unattributed_kernels_size());
  meta["kineto.unattributed_kernel_ns"] = absl::StrCat(unattributed_kernel_ns);
  meta["kineto.unattributed_memory_activities"] = absl::StrCat(unattributed_memory);
  meta["kineto.unattributed_memory_ns"] = absl::StrCat(unattributed_memory_ns);
  meta["kineto.attributed_by_external_id"] = absl::StrCat(external_id_fallbacks_);
  // GPU starts before the window (clock skew) are clamped to 0.
  meta["kineto.clamped_gpu_starts"] =
      absl::StrCat(std::count_if(placed_.begin(), placed_.end(), [&](const Placed& p) {
        return trace_.device[p.device_index].start < window_.start;
      }));
  int nodes = 0, linked = 0;
  for (int op : top_level_) nodes += IsBackwardNode(trace_.host[op]);
  for (const auto& [fwd, list] : backwards_of_) linked += list.size();
  meta["kineto.backward_nodes"] = absl::StrCat(nodes);
  meta["kineto.backward_nodes_linked"] = absl::StrCat(linked);
}

// The top-level ops that became (part of) an operation, in start order,
// for kineto::AddPassMemory.
std::vector<kineto::PassSpan> Converter::PassSpans() const {
  std::vector<kineto::PassSpan> spans;
  for (int op : top_level_) {
    auto pass = pass_of_.find(op);
    if (pass == pass_of_.end()) continue;
    const HostEvent& e = trace_.host[op];
    spans.push_back({e.start, e.start + e.duration, static_cast<uint32_t>(pass->second.first),
                     pass->second.second});
  }
  return spans;
}

absl::StatusOr<Trace> Converter::Run() {
  if (trace_.device.empty()) {
    return absl::InvalidArgumentError(
        "Kineto trace has no kernel, gpu_memcpy or gpu_memset events (was "
        "the profile taken with ProfilerActivity.CUDA?)");
  }
  HABITAT_ASSIGN_OR_RETURN(window_, ChooseWindow(trace_, launches_, options_));
  PlaceDeviceEvents();
  if (placed_.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("Kineto trace: no GPU work was launched in ", window_.label));
  }
  LinkBackwards();

  Trace out;
  out.set_format_version(1);
  out.set_source("kineto-import");
  out.set_model_name(options_.model_name);
  out.set_batch_size(options_.batch_size);
  out.set_precision(options_.precision);
  // The GPU most of the window's activities ran on.
  std::map<int64_t, int> per_device;
  for (const Placed& p : placed_) ++per_device[trace_.device[p.device_index].device];
  int64_t device = placed_.empty() ? 0 : per_device.begin()->first;
  for (const auto& [d, n] : per_device) {
    if (n > per_device[device]) device = d;
  }
  HABITAT_RETURN_IF_ERROR(kineto::FillHeader(trace_.document, device, &out));
  out.mutable_frameworks()->set_habitat(HABITAT_VERSION);
  HABITAT_RETURN_IF_ERROR(BuildOperations(&out));
  LinkGradientProducers(&out);
  FillTraceLevel(&out);
  if (per_device.size() > 1) {
    (*out.mutable_metadata())["kineto.devices"] = absl::StrCat(per_device.size());
  }
  (*out.mutable_metadata())["kineto.shared_memory"] =
      std::any_of(
          placed_.begin(), placed_.end(),
          [&](const Placed& p) { return trace_.device[p.device_index].shared_memory_split; })
          ? "static and dynamic as recorded"
          : "static+dynamic total in dynamic_shared_memory_bytes";
  kineto::SetHostTimeline(trace_, forest_, launches_, window_.start, window_.end,
                          options_.iteration_wall_ns, &out);
  // A profile records no TF32 or autocast settings; the kernels show them.
  if (auto math = InferMathSettings(out)) *out.mutable_math() = *std::move(math);
  const kineto::MemoryWindow memory_window{window_.start, window_.end};
  if (auto memory = kineto::MemoryInWindow(trace_, memory_window, device)) {
    kineto::AddPassMemory(trace_, memory_window, device, PassSpans(), &*memory);
    *out.mutable_memory() = *std::move(memory);
  }
  return out;
}

}  // namespace

absl::StatusOr<Trace> ImportKinetoTrace(absl::string_view json_text,
                                        const KinetoImportOptions& options) {
  if (options.iteration_wall_ns.has_value() && *options.iteration_wall_ns <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "iteration_wall_ns override must be positive, got ", *options.iteration_wall_ns));
  }
  HABITAT_ASSIGN_OR_RETURN(std::unique_ptr<kineto::ParsedTrace> parsed,
                           kineto::ParseKinetoTrace(json_text));
  try {
    return Converter(*parsed, options).Run();
  } catch (const nlohmann::json::exception& e) {
    // Field access is checked before use; this keeps a slip an error.
    return absl::InvalidArgumentError(
        absl::StrCat("Kineto trace: unexpected JSON content: ", e.what()));
  }
}

}  // namespace habitat
