#include "agent/capture/trace_assembler.h"

#include <algorithm>
#include <map>
#include <unordered_map>
#include <utility>

#include "core/trace/gradient_producers.h"

namespace habitat {
namespace agent {
namespace {

// A GPU activity of the window: a kernel or a memory record.
struct Placed {
  bool is_kernel = true;
  size_t index = 0;  // into kernels or memory
  int64_t start = 0;
  int64_t end = 0;
  int owner = -1;  // top-level op (index into ops), -1 when unattributed
};

struct Work {
  std::vector<int> placed;  // into the Placed vector
  int64_t time = 0;
};

bool StartsWith(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }
bool Contains(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

class Assembler {
 public:
  Assembler(const std::vector<OpEvent>& ops, ActivityRecords activities,
            const AssemblyOptions& options)
      : ops_(ops), act_(std::move(activities)), opt_(options) {}

  Status Run(Trace* out);

 private:
  Status IndexOps();
  Status CheckRerunTimes() const;
  Status CheckBatchReruns() const;
  std::string Describe(uint64_t id) const;
  void AttachReruns(uint64_t id, Operation* o);
  void FindBackwardNodes();
  void LinkBackwards();
  void PlaceActivities();
  void BuildOperations(Trace* out);
  // Operation.gradient_producer of each AccumulateGrad (core/trace/gradient_producers.h).
  void LinkGradientProducers(Trace* out) const;
  void FillPassMemory(Trace* out) const;
  void AppendWork(const Work& w, Pass* pass);
  Kernel MakeKernel(const KernelRecord& k);
  void FillTraceLevel(Trace* out);

  int64_t Rel(int64_t t) const { return t - opt_.window_start_ns; }
  bool InWindow(int64_t t) const { return t >= opt_.window_start_ns && t <= opt_.window_end_ns; }
  Work WorkOf(int op) const {
    auto it = work_.find(op);
    return it == work_.end() ? Work() : it->second;
  }

  const std::vector<OpEvent>& ops_;
  ActivityRecords act_;
  const AssemblyOptions& opt_;

  std::unordered_map<uint64_t, int> by_id_;
  std::vector<int> root_;                         // per op: its top-level ancestor
  std::vector<int> top_level_;                    // top-level ops in the window, ordered
  std::map<int, int> node_of_;                    // backward top-level op -> node record
  std::map<int, std::vector<int>> backwards_of_;  // forward -> backward ops
  // Top-level op -> the Operation it is part of, and whether as backward.
  std::map<int, std::pair<uint32_t, bool>> operation_of_;
  std::vector<Placed> placed_;
  std::map<int, Work> work_;
  int orphans_ = 0;
  int outside_window_ = 0;
  int clamped_ = 0;
  int rerun_matched_ = 0;
  int batch_rerun_matched_ = 0;
};

Status Assembler::IndexOps() {
  std::vector<int> order(ops_.size());
  for (size_t i = 0; i < ops_.size(); ++i) {
    const OpEvent& e = ops_[i];
    const std::string what = "op event " + std::to_string(i) + " (\"" + e.name + "\")";
    if (e.id == 0) return InvalidArgumentError(what + ": id must be > 0");
    if (e.end_ns < e.start_ns) {
      return InvalidArgumentError(what + ": end_ns " + std::to_string(e.end_ns) +
                                  " is before start_ns " + std::to_string(e.start_ns));
    }
    // Ids are handed out when ops start, so a parent's id is smaller; this
    // also rules out cycles.
    if (e.parent_id >= e.id) {
      return InvalidArgumentError(what + ": parent_id " + std::to_string(e.parent_id) +
                                  " is not smaller than its id " + std::to_string(e.id));
    }
    if (!by_id_.emplace(e.id, static_cast<int>(i)).second) {
      return InvalidArgumentError(what + ": duplicate id " + std::to_string(e.id));
    }
    order[i] = static_cast<int>(i);
  }
  std::sort(order.begin(), order.end(), [&](int a, int b) { return ops_[a].id < ops_[b].id; });
  root_.assign(ops_.size(), -1);
  for (int i : order) {
    const OpEvent& e = ops_[i];
    auto parent = e.parent_id == 0 ? by_id_.end() : by_id_.find(e.parent_id);
    if (parent == by_id_.end()) {
      // A parent that was never completed (tracking stopped inside it) is
      // not recorded; its children stand on their own.
      if (e.parent_id != 0) ++orphans_;
      root_[i] = i;
    } else {
      root_[i] = root_[parent->second];
    }
  }
  for (size_t i = 0; i < ops_.size(); ++i) {
    if (root_[i] == static_cast<int>(i) && InWindow(ops_[i].start_ns)) {
      top_level_.push_back(static_cast<int>(i));
    }
  }
  std::sort(top_level_.begin(), top_level_.end(), [&](int a, int b) {
    return std::make_pair(ops_[a].start_ns, ops_[a].id) <
           std::make_pair(ops_[b].start_ns, ops_[b].id);
  });
  return Status::Ok();
}

std::string Assembler::Describe(uint64_t id) const {
  auto it = by_id_.find(id);
  const std::string name = it == by_id_.end() ? "" : " (\"" + ops_[it->second].name + "\")";
  return "op event id " + std::to_string(id) + name;
}

Status Assembler::CheckRerunTimes() const {
  for (const auto& [id, t] : opt_.rerun_times) {
    if (t.forward_ns >= 0 && t.backward_ns >= 0) continue;
    return InvalidArgumentError(
        "rerun time of " + Describe(id) + ": times must be >= 0, got forward_ns " +
        std::to_string(t.forward_ns) + ", backward_ns " + std::to_string(t.backward_ns));
  }
  return Status::Ok();
}

Status Assembler::CheckBatchReruns() const {
  for (const auto& [id, reruns] : opt_.batch_reruns) {
    std::vector<uint32_t> batches;
    for (const BatchRerunTime& r : reruns) {
      const std::string what =
          "batch re-run of " + Describe(id) + " at batch " + std::to_string(r.batch_size);
      if (r.batch_size == 0) return InvalidArgumentError(what + ": the batch must be >= 1");
      if (r.forward_ns < 0 || r.backward_ns < 0) {
        return InvalidArgumentError(what + ": times must be >= 0, got forward_ns " +
                                    std::to_string(r.forward_ns) + ", backward_ns " +
                                    std::to_string(r.backward_ns));
      }
      if (std::find(batches.begin(), batches.end(), r.batch_size) != batches.end()) {
        return InvalidArgumentError(what + ": that batch is given twice");
      }
      batches.push_back(r.batch_size);
    }
  }
  return Status::Ok();
}

void Assembler::FindBackwardNodes() {
  for (size_t i = 0; i < ops_.size(); ++i) {
    if (!ops_[i].is_backward) continue;
    auto [it, inserted] = node_of_.try_emplace(root_[i], static_cast<int>(i));
    if (!inserted && std::make_pair(ops_[i].start_ns, ops_[i].id) <
                         std::make_pair(ops_[it->second].start_ns, ops_[it->second].id)) {
      it->second = static_cast<int>(i);
    }
  }
}

void Assembler::LinkBackwards() {
  // (thread, sequence number) -> forward top-level ops that recorded it.
  std::map<std::pair<uint64_t, int64_t>, std::vector<int>> forwards;
  for (size_t i = 0; i < ops_.size(); ++i) {
    const OpEvent& e = ops_[i];
    if (e.sequence_number < 0 || e.is_backward) continue;
    const int root = root_[i];
    if (node_of_.count(root) > 0) continue;  // inside a backward op
    forwards[{e.thread_id, e.sequence_number}].push_back(root);
  }
  for (int op : top_level_) {
    auto node_it = node_of_.find(op);
    if (node_it == node_of_.end()) continue;
    const OpEvent& node = ops_[node_it->second];
    if (node.sequence_number < 0) continue;
    const uint64_t thread = node.forward_thread_id != 0 ? node.forward_thread_id : node.thread_id;
    auto cands = forwards.find({thread, node.sequence_number});
    if (cands == forwards.end()) continue;
    int best = -1;
    for (int f : cands->second) {
      if (ops_[f].start_ns >= ops_[op].start_ns || !InWindow(ops_[f].start_ns)) {
        continue;
      }
      if (best < 0 || std::make_pair(ops_[f].start_ns, ops_[f].id) >
                          std::make_pair(ops_[best].start_ns, ops_[best].id)) {
        best = f;
      }
    }
    if (best >= 0) backwards_of_[best].push_back(op);
  }
}

void Assembler::PlaceActivities() {
  auto owner_of = [&](uint64_t external_id) {
    if (external_id == 0) return -1;
    auto it = by_id_.find(external_id);
    if (it == by_id_.end()) return -1;
    const int root = root_[it->second];
    return InWindow(ops_[root].start_ns) ? root : -1;
  };
  auto place = [&](bool is_kernel, size_t index, int64_t start, int64_t end, bool has_launch,
                   int64_t launch, uint64_t external_id) {
    if (has_launch ? !InWindow(launch) : !InWindow(start)) {
      ++outside_window_;
      return;
    }
    if (start < opt_.window_start_ns) ++clamped_;
    placed_.push_back(Placed{is_kernel, index, start, end, owner_of(external_id)});
  };
  for (size_t i = 0; i < act_.kernels.size(); ++i) {
    const KernelRecord& k = act_.kernels[i];
    place(true, i, k.start_ns, k.end_ns, k.has_launch_time, k.launch_ns, k.external_id);
  }
  for (size_t i = 0; i < act_.memory.size(); ++i) {
    const MemoryRecord& m = act_.memory[i];
    place(false, i, m.start_ns, m.end_ns, m.has_launch_time, m.launch_ns, m.external_id);
  }
  std::stable_sort(placed_.begin(), placed_.end(),
                   [](const Placed& a, const Placed& b) { return a.start < b.start; });
  for (size_t i = 0; i < placed_.size(); ++i) {
    if (placed_[i].owner < 0) continue;
    Work& w = work_[placed_[i].owner];
    w.placed.push_back(static_cast<int>(i));
    w.time += placed_[i].end - placed_[i].start;
  }
}

Kernel Assembler::MakeKernel(const KernelRecord& k) {
  Kernel out;
  out.name = k.name;
  out.grid = k.grid;
  out.block = k.block;
  out.registers_per_thread = k.registers_per_thread;
  out.static_shared_memory_bytes = k.static_shared_memory_bytes;
  out.dynamic_shared_memory_bytes = k.dynamic_shared_memory_bytes;
  out.duration_ns = k.end_ns - k.start_ns;
  out.start_ns = std::max<int64_t>(0, Rel(k.start_ns));
  if (k.has_launch_time) {
    out.launch_ns = Rel(k.launch_ns);
    out.has_launch_time = true;
  }
  out.stream = k.stream_id;
  out.correlation_id = k.correlation_id;
  return out;
}

void Assembler::AppendWork(const Work& w, Pass* pass) {
  for (int index : w.placed) {
    const Placed& p = placed_[index];
    if (p.is_kernel) {
      pass->kernels.push_back(MakeKernel(act_.kernels[p.index]));
      continue;
    }
    const MemoryRecord& m = act_.memory[p.index];
    MemoryActivity a;
    a.kind = m.kind;
    a.bytes = m.bytes;
    a.duration_ns = m.end_ns - m.start_ns;
    a.start_ns = std::max<int64_t>(0, Rel(m.start_ns));
    if (m.has_launch_time) {
      a.launch_ns = Rel(m.launch_ns);
      a.has_launch_time = true;
    }
    a.stream = m.stream_id;
    pass->memory.push_back(a);
  }
  pass->time_ns += w.time;
}

void Assembler::BuildOperations(Trace* out) {
  std::map<int, bool> linked;
  for (const auto& [fwd, nodes] : backwards_of_) {
    for (int n : nodes) linked[n] = true;
  }
  for (int op : top_level_) {
    const OpEvent& e = ops_[op];
    auto node_it = node_of_.find(op);
    if (node_it != node_of_.end() && linked.count(op) > 0) continue;
    Operation o;
    o.cpu_start_ns = Rel(e.start_ns);
    o.cpu_duration_ns = e.end_ns - e.start_ns;
    if (node_it != node_of_.end()) {
      // An autograd node with no forward op in the window.
      const OpEvent& node = ops_[node_it->second];
      o.name = node.name;
      o.arguments = node.arguments;
      o.sequence_number = node.sequence_number;
      Pass b;
      b.recorded_name = node.name;
      AppendWork(WorkOf(op), &b);
      o.backward = std::move(b);
      operation_of_[op] = {static_cast<uint32_t>(out->operations.size()), true};
      out->operations.push_back(std::move(o));
      continue;
    }
    const uint32_t index = static_cast<uint32_t>(out->operations.size());
    operation_of_[op] = {index, false};
    o.name = e.name;
    o.arguments = e.arguments;
    AppendWork(WorkOf(op), &o.forward);
    auto nodes = backwards_of_.find(op);
    if (nodes != backwards_of_.end()) {
      std::vector<int> order = nodes->second;
      for (int n : order) operation_of_[n] = {index, true};
      std::sort(order.begin(), order.end(),
                [&](int a, int b) { return ops_[a].start_ns < ops_[b].start_ns; });
      int dominant = order.front();
      Work merged;
      for (int n : order) {
        const Work w = WorkOf(n);
        if (w.time > WorkOf(dominant).time) dominant = n;
        merged.placed.insert(merged.placed.end(), w.placed.begin(), w.placed.end());
        merged.time += w.time;
      }
      std::sort(merged.placed.begin(), merged.placed.end());  // GPU order
      Pass b;
      AppendWork(merged, &b);
      const OpEvent& node = ops_[node_of_.at(dominant)];
      b.recorded_name = node.name;
      o.sequence_number = node.sequence_number;
      o.backward = std::move(b);
    }
    AttachReruns(e.id, &o);
    out->operations.push_back(std::move(o));
  }
}

void Assembler::LinkGradientProducers(Trace* out) const {
  std::vector<BackwardNodeSpan<uint64_t>> nodes;
  for (const auto& [op, where] : operation_of_) {
    if (!where.second) continue;  // a forward
    nodes.push_back({ops_[op].thread_id, ops_[op].start_ns, ops_[op].end_ns, where.first,
                     out->operations[where.first].name == kAccumulateGradName});
  }
  const std::vector<std::optional<uint32_t>> producers = GradientProducers(nodes);
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (producers[i].has_value())
      out->operations[nodes[i].operation].gradient_producer = producers[i];
  }
}

void Assembler::AttachReruns(uint64_t id, Operation* o) {
  auto rerun = opt_.rerun_times.find(id);
  if (rerun != opt_.rerun_times.end()) {
    ++rerun_matched_;
    o->forward.rerun_time_ns = rerun->second.forward_ns;
    if (o->backward.has_value()) o->backward->rerun_time_ns = rerun->second.backward_ns;
  }
  auto at_batches = opt_.batch_reruns.find(id);
  if (at_batches == opt_.batch_reruns.end()) return;
  ++batch_rerun_matched_;
  std::vector<BatchRerunTime> sorted = at_batches->second;
  std::sort(sorted.begin(), sorted.end(), [](const BatchRerunTime& a, const BatchRerunTime& b) {
    return a.batch_size < b.batch_size;
  });
  for (const BatchRerunTime& r : sorted) {
    if (r.forward_ns > 0) o->forward.batch_reruns.push_back({r.batch_size, r.forward_ns});
    if (r.backward_ns > 0 && o->backward.has_value()) {
      o->backward->batch_reruns.push_back({r.batch_size, r.backward_ns});
    }
  }
}

void Assembler::FillPassMemory(Trace* out) const {
  // Without the region's memory there is nothing the passes could be read
  // against; the trace then has no MemoryUsage at all.
  if (!out->memory.has_value()) return;
  out->memory->passes.clear();
  for (int op : top_level_) {  // in start order
    const OpEvent& e = ops_[op];
    // Only outermost ranges are read; a range whose parent was not
    // completed stands alone here but was nested when it ran.
    if (e.parent_id != 0) continue;
    if (e.allocated_bytes_before < 0 || e.allocated_bytes_after < 0 ||
        e.peak_allocated_bytes_after < 0) {
      continue;
    }
    auto it = operation_of_.find(op);
    if (it == operation_of_.end()) continue;
    PassMemory p;
    p.operation = it->second.first;
    p.backward = it->second.second;
    p.allocated_bytes_before = e.allocated_bytes_before;
    p.allocated_bytes_after = e.allocated_bytes_after;
    p.peak_allocated_bytes_after = e.peak_allocated_bytes_after;
    out->memory->passes.push_back(p);
  }
}

void Assembler::FillTraceLevel(Trace* out) {
  std::vector<std::pair<int64_t, int64_t>> spans;
  spans.reserve(placed_.size());
  int kernels = 0, memory = 0, unattributed_memory = 0;
  int64_t total = 0, unattributed_kernel_ns = 0, unattributed_memory_ns = 0;
  for (const Placed& p : placed_) {
    spans.emplace_back(p.start, p.end);
    total += p.end - p.start;
    (p.is_kernel ? kernels : memory)++;
    if (p.owner >= 0) continue;
    if (p.is_kernel) {
      out->unattributed_kernels.push_back(MakeKernel(act_.kernels[p.index]));
      unattributed_kernel_ns += p.end - p.start;
    } else {
      ++unattributed_memory;
      unattributed_memory_ns += p.end - p.start;
    }
  }
  out->iteration_gpu_busy_ns = UnionLength(std::move(spans));
  const int64_t tracked_wall = opt_.window_end_ns - opt_.window_start_ns;
  out->iteration_wall_ns =
      opt_.iteration_wall_override_ns > 0 ? opt_.iteration_wall_override_ns : tracked_wall;
  for (const ApiRecord& api : act_.api_calls) {
    if (!InWindow(api.start_ns)) continue;
    if (Contains(api.name, "Synchronize") || StartsWith(api.name, "cudaMemcpy") ||
        StartsWith(api.name, "cuMemcpy")) {
      out->host_events.push_back(HostEvent{api.name, Rel(api.start_ns), api.end_ns - api.start_ns});
    }
  }
  std::stable_sort(
      out->host_events.begin(), out->host_events.end(),
      [](const HostEvent& a, const HostEvent& b) { return a.cpu_start_ns < b.cpu_start_ns; });
  int nodes = 0, linked = 0;
  for (int op : top_level_) nodes += node_of_.count(op) > 0;
  for (const auto& [fwd, list] : backwards_of_) linked += list.size();
  auto& meta = out->metadata;
  meta["agent.op_events"] = std::to_string(ops_.size());
  meta["agent.tracked_wall_ns"] = std::to_string(tracked_wall);
  meta["agent.kernels"] = std::to_string(kernels);
  meta["agent.memory_activities"] = std::to_string(memory);
  meta["agent.gpu_time_ns"] = std::to_string(total);
  meta["agent.unattributed_kernels"] = std::to_string(out->unattributed_kernels.size());
  meta["agent.unattributed_kernel_ns"] = std::to_string(unattributed_kernel_ns);
  meta["agent.unattributed_memory_activities"] = std::to_string(unattributed_memory);
  meta["agent.unattributed_memory_ns"] = std::to_string(unattributed_memory_ns);
  meta["agent.backward_nodes"] = std::to_string(nodes);
  meta["agent.backward_nodes_linked"] = std::to_string(linked);
  int accumulations = 0, producers = 0;
  for (const Operation& o : out->operations) {
    if (o.name != kAccumulateGradName) continue;
    ++accumulations;
    producers += o.gradient_producer.has_value();
  }
  meta["agent.gradient_accumulations"] = std::to_string(accumulations);
  meta["agent.gradient_producers"] = std::to_string(producers);
  meta["agent.outside_window"] = std::to_string(outside_window_);
  meta["agent.clamped_gpu_starts"] = std::to_string(clamped_);
  meta["agent.orphan_op_events"] = std::to_string(orphans_);
  meta["agent.dropped_records"] = std::to_string(act_.dropped_records);
  if (!opt_.rerun_times.empty()) {
    meta["agent.rerun_operations"] = std::to_string(rerun_matched_);
    meta["agent.rerun_unmatched"] = std::to_string(opt_.rerun_times.size() - rerun_matched_);
  }
  if (!opt_.batch_reruns.empty()) {
    meta["agent.batch_rerun_operations"] = std::to_string(batch_rerun_matched_);
    meta["agent.batch_rerun_unmatched"] =
        std::to_string(opt_.batch_reruns.size() - batch_rerun_matched_);
  }
}

Status Assembler::Run(Trace* out) {
  if (opt_.iteration_wall_override_ns < 0) {
    return InvalidArgumentError("iteration_wall_override_ns must be >= 0, got " +
                                std::to_string(opt_.iteration_wall_override_ns));
  }
  if (opt_.window_end_ns <= opt_.window_start_ns) {
    return InvalidArgumentError("tracking window is empty: window_end_ns " +
                                std::to_string(opt_.window_end_ns) + " <= window_start_ns " +
                                std::to_string(opt_.window_start_ns));
  }
  for (size_t i = 0; i < act_.kernels.size(); ++i) {
    const KernelRecord& k = act_.kernels[i];
    if (k.end_ns < k.start_ns) {
      return InvalidArgumentError("kernel record " + std::to_string(i) + " (\"" + k.name +
                                  "\"): end_ns before start_ns");
    }
  }
  for (size_t i = 0; i < act_.memory.size(); ++i) {
    if (act_.memory[i].end_ns < act_.memory[i].start_ns) {
      return InvalidArgumentError("memory record " + std::to_string(i) +
                                  ": end_ns before start_ns");
    }
  }
  HABITAT_AGENT_RETURN_IF_ERROR(IndexOps());
  HABITAT_AGENT_RETURN_IF_ERROR(CheckRerunTimes());
  HABITAT_AGENT_RETURN_IF_ERROR(CheckBatchReruns());
  ResolveLaunches(&act_);
  PlaceActivities();
  if (placed_.empty()) {
    return FailedPreconditionError(
        "the tracked region launched no GPU work (" +
        std::to_string(act_.kernels.size() + act_.memory.size()) +
        " activity records, none launched inside it): is the model on the "
        "GPU?");
  }
  FindBackwardNodes();
  LinkBackwards();

  Trace t;
  t.format_version = 1;
  t.origin = opt_.origin;
  t.frameworks = opt_.frameworks;
  t.modules = opt_.modules;
  t.model_name = opt_.model_name;
  t.batch_size = opt_.batch_size;
  t.precision = opt_.precision;
  t.source = opt_.source;
  t.math = opt_.math;
  t.memory = opt_.memory;
  BuildOperations(&t);
  LinkGradientProducers(&t);
  FillPassMemory(&t);
  FillTraceLevel(&t);
  *out = std::move(t);
  return Status::Ok();
}

}  // namespace

int64_t UnionLength(std::vector<std::pair<int64_t, int64_t>> intervals) {
  std::sort(intervals.begin(), intervals.end());
  int64_t total = 0;
  bool open = false;
  int64_t cur_start = 0, cur_end = 0;
  for (const auto& [start, end] : intervals) {
    if (!open || start > cur_end) {
      if (open) total += cur_end - cur_start;
      cur_start = start;
      cur_end = end;
      open = true;
    } else if (end > cur_end) {
      cur_end = end;
    }
  }
  if (open) total += cur_end - cur_start;
  return total;
}

Status BusyPerWindow(const ActivityRecords& activities, const std::vector<int64_t>& boundaries,
                     std::vector<int64_t>* busy_ns) {
  busy_ns->clear();
  for (size_t i = 1; i < boundaries.size(); ++i) {
    if (boundaries[i] <= boundaries[i - 1]) {
      return InvalidArgumentError("window boundary " + std::to_string(i) + " (" +
                                  std::to_string(boundaries[i]) +
                                  " ns) is not after the one before it");
    }
  }
  if (boundaries.size() < 2) return Status::Ok();
  std::vector<std::vector<std::pair<int64_t, int64_t>>> spans(boundaries.size() - 1);
  auto place = [&](int64_t start, int64_t end) {
    // The window whose [begin, end) holds the start; outside all: dropped.
    auto it = std::upper_bound(boundaries.begin(), boundaries.end(), start);
    if (it == boundaries.begin() || it == boundaries.end()) return;
    spans[static_cast<size_t>(it - boundaries.begin()) - 1].emplace_back(start, end);
  };
  for (const KernelRecord& k : activities.kernels) place(k.start_ns, k.end_ns);
  for (const MemoryRecord& m : activities.memory) place(m.start_ns, m.end_ns);
  for (auto& s : spans) busy_ns->push_back(UnionLength(std::move(s)));
  return Status::Ok();
}

Status AssembleTrace(const std::vector<OpEvent>& ops, ActivityRecords activities,
                     const AssemblyOptions& options, Trace* out) {
  if (out == nullptr) return InvalidArgumentError("AssembleTrace: out is null");
  return Assembler(ops, std::move(activities), options).Run(out);
}

}  // namespace agent
}  // namespace habitat
