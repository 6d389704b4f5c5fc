// The Python module habitat_agent._C: the tracker, the trace bytes and a summary.
// Errors become Python exceptions here, at the boundary; nothing below
// throws.
#include <torch/extension.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "agent/capture/summary.h"
#include "agent/capture/wire_format.h"
#include "agent/torch/host_only_source.h"
#include "agent/torch/tracker.h"
#include "core/predict/batch_dimension.h"
#include "core/trace/op_names.h"
#ifdef HABITAT_AGENT_WITH_CUPTI
#include "agent/cupti/counter_collector.h"
#include "agent/cupti/cupti_source.h"
#endif

namespace py = pybind11;

namespace habitat {
namespace agent {
namespace {

void ThrowIfError(const Status& s) {
  if (s.ok()) return;
  if (s.code() == StatusCode::kInvalidArgument) throw py::value_error(s.ToString());
  throw std::runtime_error(s.ToString());
}

template <typename T>
T Get(const py::dict& d, const char* key, T fallback) {
  if (!d.contains(key) || d[key].is_none()) return fallback;
  return d[key].cast<T>();
}

// A key that is missing or None stays unset (not known).
template <typename T>
std::optional<T> GetOptional(const py::dict& d, const char* key) {
  if (!d.contains(key) || d[key].is_none()) return std::nullopt;
  return d[key].cast<T>();
}

// The settings OperationTracker read when tracking started.
MathSettings MathFrom(const py::dict& d) {
  MathSettings m;
  m.matmul_tf32 = GetOptional<bool>(d, "matmul_tf32");
  m.cudnn_tf32 = GetOptional<bool>(d, "cudnn_tf32");
  m.float32_matmul_precision = Get<std::string>(d, "float32_matmul_precision", "");
  m.autocast_dtype = GetOptional<std::string>(d, "autocast_dtype");
  m.source = Get<std::string>(d, "source", "recorded");
  return m;
}

// What OperationTracker read from the caching allocator around the region.
MemoryUsage MemoryFrom(const py::dict& d) {
  MemoryUsage m;
  m.allocated_bytes_at_start = GetOptional<int64_t>(d, "allocated_bytes_at_start");
  m.peak_allocated_bytes = GetOptional<int64_t>(d, "peak_allocated_bytes");
  m.peak_reserved_bytes = GetOptional<int64_t>(d, "peak_reserved_bytes");
  m.source = Get<std::string>(d, "source", "recorded");
  return m;
}

AssemblyOptions OptionsFrom(const py::dict& info) {
  AssemblyOptions o;
  o.model_name = Get<std::string>(info, "model_name", "");
  o.batch_size = Get<uint32_t>(info, "batch_size", 0);
  o.precision = static_cast<Precision>(Get<int32_t>(info, "precision", 0));
  o.iteration_wall_override_ns = Get<int64_t>(info, "iteration_wall_ns", 0);
  if (info.contains("origin")) {
    const py::dict d = info["origin"].cast<py::dict>();
    o.origin.name = Get<std::string>(d, "name", "");
    o.origin.device_id = Get<std::string>(d, "device_id", "");
    o.origin.compute_capability_major = Get<uint32_t>(d, "major", 0);
    o.origin.compute_capability_minor = Get<uint32_t>(d, "minor", 0);
    o.origin.sm_count = Get<uint32_t>(d, "sm_count", 0);
    o.origin.memory_bytes = Get<uint64_t>(d, "memory_bytes", 0);
    o.origin.l2_cache_bytes = Get<uint64_t>(d, "l2_cache_bytes", 0);
    o.origin.driver_version = Get<std::string>(d, "driver_version", "");
  }
  if (info.contains("rerun_times") && !info["rerun_times"].is_none()) {
    // {op event id: (forward_ns, backward_ns)} from OperationTracker.measure_ops.
    for (const auto& [key, value] : info["rerun_times"].cast<py::dict>()) {
      const auto times = value.cast<std::pair<int64_t, int64_t>>();
      o.rerun_times[key.cast<uint64_t>()] = RerunTime{times.first, times.second};
    }
  }
  if (info.contains("batch_reruns") && !info["batch_reruns"].is_none()) {
    // {op event id: [(batch, forward_ns, backward_ns), ...]} from
    // OperationTracker.measure_batch_scaling.
    for (const auto& [key, value] : info["batch_reruns"].cast<py::dict>()) {
      std::vector<BatchRerunTime>& reruns = o.batch_reruns[key.cast<uint64_t>()];
      for (const auto& entry : value.cast<py::list>()) {
        const auto t = entry.cast<std::tuple<uint32_t, int64_t, int64_t>>();
        reruns.push_back(BatchRerunTime{std::get<0>(t), std::get<1>(t), std::get<2>(t)});
      }
    }
  }
  if (auto math = GetOptional<py::dict>(info, "math")) o.math = MathFrom(*math);
  if (auto memory = GetOptional<py::dict>(info, "memory")) o.memory = MemoryFrom(*memory);
  if (info.contains("modules") && !info["modules"].is_none()) {
    // [(path, class name, parameter bytes), ...] from tracker.module_table.
    for (const auto& entry : info["modules"].cast<py::list>()) {
      const auto m = entry.cast<std::tuple<std::string, std::string, int64_t>>();
      o.modules.push_back(Module{std::get<0>(m), std::get<1>(m), std::get<2>(m)});
    }
  }
  if (info.contains("frameworks")) {
    const py::dict d = info["frameworks"].cast<py::dict>();
    o.frameworks.torch = Get<std::string>(d, "torch", "");
    o.frameworks.cuda = Get<std::string>(d, "cuda", "");
    o.frameworks.cudnn = Get<std::string>(d, "cudnn", "");
    o.frameworks.habitat = Get<std::string>(d, "habitat", "");
  }
  return o;
}

// A Python callable as the work of a counter pass. A Python exception is
// kept and re-raised by the caller once the profiler is torn down.
std::function<Status()> PythonWork(const py::function& fn, std::exception_ptr* raised) {
  return [fn, raised]() -> Status {
    try {
      fn();
      return Status::Ok();
    } catch (...) {
      *raised = std::current_exception();
      return InternalError("the counter step raised an exception");
    }
  };
}

py::dict KeyDict(const KernelKey& k) {
  py::dict d;
  d["name"] = k.name;
  d["grid"] = py::make_tuple(k.grid.x, k.grid.y, k.grid.z);
  d["block"] = py::make_tuple(k.block.x, k.block.y, k.block.z);
  d["static_shared_memory_bytes"] = k.static_shared_memory_bytes;
  d["dynamic_shared_memory_bytes"] = k.dynamic_shared_memory_bytes;
  return d;
}

py::dict CountersDict(const KernelCounters& c) {
  py::dict d;
  d["dram_read_bytes"] = c.dram_read_bytes;
  d["dram_write_bytes"] = c.dram_write_bytes;
  d["flop_fp64"] = c.flop_fp64;
  d["flop_fp32"] = c.flop_fp32;
  d["flop_fp16"] = c.flop_fp16;
  d["flop_bf16"] = c.flop_bf16;
  d["flop_tensor"] = c.flop_tensor;
  return d;
}

template <typename T>
py::object OrNone(const std::optional<T>& v) {
  return v ? py::cast(*v) : py::none();
}

py::dict MemoryDict(const MemoryUsage& m) {
  py::dict d;
  d["allocated_bytes_at_start"] = OrNone(m.allocated_bytes_at_start);
  d["peak_allocated_bytes"] = OrNone(m.peak_allocated_bytes);
  d["peak_reserved_bytes"] = OrNone(m.peak_reserved_bytes);
  d["source"] = m.source;
  return d;
}

py::dict SummaryDict(const Trace& t) {
  const TraceSummary s = Summarize(t);
  py::dict d;
  d["operations"] = s.operations;
  d["operations_with_backward"] = s.operations_with_backward;
  d["kernels"] = s.kernels;
  d["unattributed_kernels"] = s.unattributed_kernels;
  d["memory_activities"] = s.memory_activities;
  d["pass_time_ns"] = s.pass_time_ns;
  d["unattributed_kernel_ns"] = s.unattributed_kernel_ns;
  d["gpu_busy_ns"] = s.gpu_busy_ns;
  d["wall_ns"] = s.wall_ns;
  d["line"] = FormatSummary(s);
  py::dict meta;
  for (const auto& [k, v] : t.metadata) meta[py::str(k)] = v;
  d["metadata"] = meta;
  if (t.math.has_value()) {
    py::dict math;
    const MathSettings& m = *t.math;
    math["matmul_tf32"] = OrNone(m.matmul_tf32);
    math["cudnn_tf32"] = OrNone(m.cudnn_tf32);
    math["float32_matmul_precision"] = m.float32_matmul_precision;
    math["autocast_dtype"] = OrNone(m.autocast_dtype);
    math["source"] = m.source;
    d["math"] = math;
  } else {
    d["math"] = py::none();
  }
  d["memory"] = t.memory ? MemoryDict(*t.memory) : py::object(py::none());
  // Per operation, in trace order: CUPTI pass times and re-run times, to
  // compare the two without a protobuf library (backward None: no pass).
  py::list passes;
  for (const Operation& o : t.operations) {
    py::dict p;
    p["name"] = o.name;
    p["forward_ns"] = o.forward.time_ns;
    p["rerun_forward_ns"] = o.forward.rerun_time_ns;
    p["backward_ns"] = o.backward ? py::cast(o.backward->time_ns) : py::none();
    p["rerun_backward_ns"] = o.backward ? py::cast(o.backward->rerun_time_ns) : py::none();
    passes.append(p);
  }
  d["passes"] = passes;
  return d;
}

class PyTracker {
 public:
  PyTracker(const std::string& source, bool record_inputs) {
    std::shared_ptr<KernelSource> s;
    if (source == "host") {
      s = std::make_shared<HostOnlySource>();
    } else if (source == "cupti") {
#ifdef HABITAT_AGENT_WITH_CUPTI
      s = std::make_shared<CuptiActivitySource>();
#else
      throw py::value_error(
          "this build of habitat_agent._C has no CUPTI support (CUPTI headers were "
          "not found when it was built)");
#endif
    } else {
      throw py::value_error("source must be \"cupti\" or \"host\", got \"" + source + "\"");
    }
    OpRecorder::Options options;
    options.record_inputs = record_inputs;
    // The host source records ops of CPU runs (tests): their autocast.
    options.autocast_device = source == "host" ? c10::DeviceType::CPU : c10::DeviceType::CUDA;
    tracker_ = std::make_unique<Tracker>(std::move(s), options);
  }

  void Start(int memory_device) {
    tracker_->SetMemoryDevice(memory_device);
    ThrowIfError(tracker_->Start());
  }

  std::vector<std::string> Stop() {
    std::vector<std::string> warnings;
    ThrowIfError(tracker_->Stop(&warnings));
    return warnings;
  }

  // (trace bytes, summary dict)
  py::tuple Assemble(const py::dict& info) {
    Trace trace;
    ThrowIfError(tracker_->Assemble(OptionsFrom(info), &trace));
    const std::string bytes = SerializeTrace(trace);
    return py::make_tuple(py::bytes(bytes), SummaryDict(trace));
  }

  // {"ops": top-level forward ops run under autocast, "dtype": its dtype
  // as c10 names it ("BFloat16", "Half"; "" when none ran under it)}.
  py::dict AutocastSeen() const {
    const OpRecorder::AutocastSeen seen = tracker_->autocast_seen();
    py::dict d;
    d["ops"] = seen.ops;
    d["dtype"] = seen.dtype;
    return d;
  }

  // The recorded op events, for tests and inspection.
  py::list Ops() const {
    py::list out;
    for (const OpEvent& e : tracker_->ops()) {
      py::dict d;
      d["id"] = e.id;
      d["parent_id"] = e.parent_id;
      d["name"] = e.name;
      d["thread_id"] = e.thread_id;
      d["forward_thread_id"] = e.forward_thread_id;
      d["start_ns"] = e.start_ns;
      d["end_ns"] = e.end_ns;
      d["sequence_number"] = e.sequence_number;
      d["is_backward"] = e.is_backward;
      py::list args;
      for (size_t i = 0; i < e.arguments.size(); ++i) {
        const Argument& a = e.arguments[i];
        py::dict ad;
        ad["name"] = a.name;
        switch (a.kind) {
          case Argument::Kind::kTensor:
            ad["shape"] = a.tensor.shape;
            ad["dtype"] = a.tensor.dtype;
            ad["requires_grad"] = i < e.requires_grad.size() && e.requires_grad[i];
            break;
          case Argument::Kind::kScalar:
            ad["scalar"] = a.scalar;
            break;
          case Argument::Kind::kInteger:
            ad["integer"] = a.integer;
            break;
          case Argument::Kind::kBoolean:
            ad["boolean"] = a.boolean;
            break;
          case Argument::Kind::kText:
            ad["text"] = a.text;
            break;
          case Argument::Kind::kIntegers:
            ad["integers"] = a.integers;
            break;
          case Argument::Kind::kNone:
            ad["none"] = true;
            break;
        }
        args.append(ad);
      }
      d["arguments"] = args;
      out.append(d);
    }
    return out;
  }

  // One counter pass (see Tracker::CollectCounters). Profiling errors do
  // not raise: the report's "status" and "message" say what is missing,
  // since the trace is still good without counters. An exception from
  // `step` is re-raised.
  py::dict CollectCounters(const py::function& step, double fraction) {
    py::dict d;
#ifdef HABITAT_AGENT_WITH_CUPTI
    if (!collector_) collector_ = std::make_unique<CuptiCounterCollector>();
    std::exception_ptr raised;
    CounterReport r;
    const auto t0 = std::chrono::steady_clock::now();
    const Status s =
        tracker_->CollectCounters(collector_.get(), PythonWork(step, &raised), fraction, &r);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (raised) std::rethrow_exception(raised);
    if (s.code() == StatusCode::kInvalidArgument) ThrowIfError(s);
    d["status"] = StatusCodeName(s.code());
    d["message"] = s.message();
    d["seconds"] = seconds;
    d["chip"] = collector_->chip_name();
    d["missing_metrics"] = collector_->missing_metrics();
    d["wanted_keys"] = r.wanted_keys;
    d["cached_before"] = r.cached_before;
    d["ran"] = r.ran;
    d["replay_passes"] = r.replay_passes;
    d["dropped_ranges"] = r.dropped_ranges;
    d["ranges"] = r.join.ranges;
    d["kernels"] = r.join.kernels;
    d["matched"] = r.join.matched;
    d["skipped_ranges"] = r.join.skipped_ranges;
    d["skipped_kernels"] = r.join.skipped_kernels;
    d["new_keys"] = r.join.new_keys;
    d["wanted_missing"] = r.join.wanted_missing;
    d["by_position"] = r.join.by_position;
    d["measured_keys"] = tracker_->counters().size();
    // Share of the region's kernel time whose kernels have counters.
    int64_t all = 0, covered = 0;
    for (const KernelRecord& k : tracker_->activities().kernels) {
      all += k.end_ns - k.start_ns;
      if (tracker_->counters().count(KeyOf(k)) > 0) covered += k.end_ns - k.start_ns;
    }
    d["covered_fraction"] = all > 0 ? static_cast<double>(covered) / all : 0.0;
#else
    (void)step;
    (void)fraction;
    d["status"] = StatusCodeName(StatusCode::kUnavailable);
    d["message"] = "this build of habitat_agent._C has no CUPTI support";
#endif
    return d;
  }

  // The measured counters, one entry per kernel key, with the key's launches
  // and summed duration in the last tracked region.
  py::list KernelCounterList() const {
    std::map<KernelKey, std::pair<int64_t, int64_t>> time;  // launches, ns
    for (const KernelRecord& k : tracker_->activities().kernels) {
      auto& t = time[KeyOf(k)];
      ++t.first;
      t.second += k.end_ns - k.start_ns;
    }
    py::list out;
    for (const auto& [key, counters] : tracker_->counters()) {
      py::dict d = KeyDict(key);
      d["counters"] = CountersDict(counters);
      auto it = time.find(key);
      d["launches"] = it == time.end() ? 0 : it->second.first;
      d["duration_ns"] = it == time.end() ? 0 : it->second.second;
      out.append(d);
    }
    return out;
  }

  int64_t NowNs() const { return tracker_->NowNs(); }

  // GPU-busy time per window of the last region (BusyPerWindow), with
  // boundaries taken by now_ns() after device synchronisations.
  std::vector<int64_t> BusyPerWindow(const std::vector<int64_t>& boundaries) const {
    std::vector<int64_t> busy;
    ThrowIfError(habitat::agent::BusyPerWindow(tracker_->activities(), boundaries, &busy));
    return busy;
  }

  py::dict ActivityCounts() const {
    const ActivityRecords& a = tracker_->activities();
    py::dict d;
    d["kernels"] = a.kernels.size();
    d["memory"] = a.memory.size();
    d["api_calls"] = a.api_calls.size();
    d["external_correlations"] = a.external_correlations.size();
    d["dropped_records"] = a.dropped_records;
    // Clock ranges, to diagnose a capture whose records miss the window.
    d["window_start_ns"] = tracker_->window_start_ns();
    d["window_end_ns"] = tracker_->window_end_ns();
    if (!a.kernels.empty()) {
      int64_t lo = a.kernels[0].start_ns, hi = a.kernels[0].end_ns;
      for (const KernelRecord& k : a.kernels) {
        lo = std::min(lo, k.start_ns);
        hi = std::max(hi, k.end_ns);
      }
      d["kernel_start_min_ns"] = lo;
      d["kernel_end_max_ns"] = hi;
    }
    if (!a.api_calls.empty()) {
      int64_t lo = a.api_calls[0].start_ns, hi = a.api_calls[0].start_ns;
      for (const ApiRecord& r : a.api_calls) {
        lo = std::min(lo, r.start_ns);
        hi = std::max(hi, r.start_ns);
      }
      d["api_start_min_ns"] = lo;
      d["api_start_max_ns"] = hi;
    }
    return d;
  }

 private:
  std::unique_ptr<Tracker> tracker_;
#ifdef HABITAT_AGENT_WITH_CUPTI
  std::unique_ptr<CuptiCounterCollector> collector_;
#endif
};

#ifdef HABITAT_AGENT_WITH_CUPTI
// Base counter metrics of the current device containing `part`, to check
// metric names.
std::vector<std::string> ProfilerBaseMetrics(const std::string& part) {
  CuptiCounterCollector c;
  std::vector<std::string> out;
  ThrowIfError(c.ListBaseMetrics(part, &out));
  return out;
}

// Raw metric values of every kernel `step` launches: (metric names,
// [(kernel name, values)], replay passes, dropped ranges).
py::tuple CollectMetrics(const py::function& step, const std::vector<std::string>& metrics,
                         size_t max_kernels) {
  CuptiCounterCollector::Options options;
  options.metrics = metrics;
  CuptiCounterCollector c(options);
  std::exception_ptr raised;
  CounterPass pass;
  const Status s = c.Collect(PythonWork(step, &raised), max_kernels, &pass);
  if (raised) std::rethrow_exception(raised);
  ThrowIfError(s);
  py::list ranges;
  for (const RangeMetrics& r : pass.ranges) {
    ranges.append(py::make_tuple(r.kernel_name, r.values));
  }
  return py::make_tuple(pass.metric_names, ranges, pass.replay_passes, pass.dropped_ranges);
}
#endif

}  // namespace
}  // namespace agent
}  // namespace habitat

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  using habitat::agent::PyTracker;
  m.doc() = "habitat agent: RecordFunction + CUPTI capture of one iteration";
#ifdef HABITAT_AGENT_WITH_CUPTI
  m.attr("has_cupti") = true;
#else
  m.attr("has_cupti") = false;
#endif
#ifdef HABITAT_AGENT_WITH_CUPTI
  m.def("profiler_base_metrics", &habitat::agent::ProfilerBaseMetrics, py::arg("part") = "");
  m.def("collect_metrics", &habitat::agent::CollectMetrics, py::arg("step"), py::arg("metrics"),
        py::arg("max_kernels") = 4096);
#endif
  m.def(
      "is_kernel_varying",
      [](const std::string& name) { return habitat::op_names::IsKernelVaryingName(name); },
      py::arg("name"),
      "whether the engine predicts this ATen op or autograd node as kernel-varying");
  m.def(
      "batch_dimension",
      [](const std::vector<int64_t>& shape, int64_t batch, bool is_parameter) {
        return habitat::BatchDimension(shape, batch,
                                       [&](const std::vector<int64_t>&) { return is_parameter; });
      },
      py::arg("shape"), py::arg("batch"), py::arg("is_parameter"),
      "the dimension of a tensor of `shape` that holds the batch as the engine scales it, or -1");
  m.def("is_recording", &habitat::agent::OpRecorder::AnyRecording,
        "whether a tracker of this process is recording ops now");
  py::class_<PyTracker>(m, "Tracker")
      .def(py::init<const std::string&, bool>(), py::arg("source") = "cupti",
           py::arg("record_inputs") = true)
      .def("start", &PyTracker::Start, py::arg("memory_device") = -1)
      .def("stop", &PyTracker::Stop)
      .def("assemble", &PyTracker::Assemble, py::arg("info"))
      .def("ops", &PyTracker::Ops)
      .def("autocast_seen", &PyTracker::AutocastSeen)
      .def("collect_counters", &PyTracker::CollectCounters, py::arg("step"),
           py::arg("fraction") = 0.995)
      .def("kernel_counters", &PyTracker::KernelCounterList)
      .def("activity_counts", &PyTracker::ActivityCounts)
      .def("now_ns", &PyTracker::NowNs)
      .def("busy_per_window", &PyTracker::BusyPerWindow, py::arg("boundaries"));
}
