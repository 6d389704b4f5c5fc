#include "agent/capture/kernel_counters.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>

namespace habitat {
namespace agent {

const char* const kDramReadMetric = "dram__bytes_read.sum";
const char* const kDramWriteMetric = "dram__bytes_write.sum";
const char* const kTensorMetricPrefix = "sm__ops_path_tensor_";

namespace {

// How far ahead (in launches) a mismatch looks for the name it misses;
// beyond that both sides are skipped by one.
constexpr size_t kResyncWindow = 64;

enum class Flop { kNone, kFp64, kFp32, kFp16 };

struct InstMetric {
  const char* name;
  Flop precision;
  double flops_per_inst;  // per thread instruction
};

// Thread instructions of the FP pipes. An FMA is two FLOPs; Nsight
// Compute's roofline counts half precision the same way (a packed HFMA2
// thread instruction counts once). Hopper's SASS counters do not tell
// fp16 from bf16 half instructions: both land in flop_fp16.
constexpr InstMetric kInstMetrics[] = {
    {"sm__sass_thread_inst_executed_op_dadd_pred_on.sum", Flop::kFp64, 1},
    {"sm__sass_thread_inst_executed_op_dmul_pred_on.sum", Flop::kFp64, 1},
    {"sm__sass_thread_inst_executed_op_dfma_pred_on.sum", Flop::kFp64, 2},
    {"sm__sass_thread_inst_executed_op_fadd_pred_on.sum", Flop::kFp32, 1},
    {"sm__sass_thread_inst_executed_op_fmul_pred_on.sum", Flop::kFp32, 1},
    {"sm__sass_thread_inst_executed_op_ffma_pred_on.sum", Flop::kFp32, 2},
    {"sm__sass_thread_inst_executed_op_hadd_pred_on.sum", Flop::kFp16, 1},
    {"sm__sass_thread_inst_executed_op_hmul_pred_on.sum", Flop::kFp16, 1},
    {"sm__sass_thread_inst_executed_op_hfma_pred_on.sum", Flop::kFp16, 2},
};

// sm__ops_path_tensor_src_* count FLOPs already: on an H100 (GH100) a
// 2048^3 bf16, fp16 and tf32 matmul read exactly 2*M*N*K
// (tests/gpu/counter_probe.py, 2026-11-22).
constexpr double kTensorFlopsPerOp = 1.0;

bool StartsWith(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

uint64_t ToCount(double v) {
  if (!std::isfinite(v) || v <= 0) return 0;
  if (v >= 1.8e19) return UINT64_MAX;
  return static_cast<uint64_t>(std::llround(v));
}

std::vector<const KernelRecord*> InLaunchOrder(const std::vector<KernelRecord>& kernels) {
  std::vector<const KernelRecord*> out;
  out.reserve(kernels.size());
  for (const KernelRecord& k : kernels) out.push_back(&k);
  std::stable_sort(out.begin(), out.end(), [](const KernelRecord* a, const KernelRecord* b) {
    return a->correlation_id < b->correlation_id;
  });
  return out;
}

// Offset (1..window) of the first position after `from` in `seq` whose
// name is `name`; 0 when none.
template <typename Seq, typename NameOf>
size_t FindAhead(const Seq& seq, size_t from, const std::string& name, NameOf name_of) {
  for (size_t d = 1; d <= kResyncWindow && from + d < seq.size(); ++d) {
    if (name_of(seq[from + d]) == name) return d;
  }
  return 0;
}

}  // namespace

std::vector<std::string> ScalarCounterMetrics() {
  std::vector<std::string> out = {kDramReadMetric, kDramWriteMetric};
  for (const InstMetric& m : kInstMetrics) out.push_back(m.name);
  return out;
}

std::vector<std::string> TensorCounterMetrics(const std::vector<std::string>& base_metrics) {
  std::vector<std::string> candidates;
  for (const std::string& m : base_metrics) {
    // By source type only ("_src_"): "..._op_hgmma_src_bf16_dst_fp32"
    // counts the same work again by instruction kind (GH100 lists both).
    // Sparse variants count the dense ones' work again; integer and
    // binary types are not floating-point work.
    if (StartsWith(m, kTensorMetricPrefix) &&
        m.rfind(std::string(kTensorMetricPrefix) + "src_", 0) == 0 &&
        m.find("sparsity") == std::string::npos && m.find("_src_int") == std::string::npos &&
        m.find('.') == std::string::npos) {
      candidates.push_back(m);
    }
  }
  // Leaves only: "..._src_fp16" would add up "..._src_fp16_dst_fp16" and
  // "..._src_fp16_dst_fp32", which are kept themselves.
  std::vector<std::string> out;
  for (const std::string& m : candidates) {
    bool aggregate = false;
    for (const std::string& other : candidates) {
      if (other.size() > m.size() + 1 && StartsWith(other, m.c_str()) && other[m.size()] == '_') {
        aggregate = true;
        break;
      }
    }
    if (!aggregate) out.push_back(m + ".sum");
  }
  std::sort(out.begin(), out.end());
  return out;
}

Status CountersFromMetrics(const std::vector<std::string>& names, const std::vector<double>& values,
                           KernelCounters* out) {
  if (names.size() != values.size()) {
    return InvalidArgumentError("counter values: " + std::to_string(values.size()) +
                                " values for " + std::to_string(names.size()) + " metrics");
  }
  double fp64 = 0, fp32 = 0, fp16 = 0, tensor = 0;
  KernelCounters c;
  for (size_t i = 0; i < names.size(); ++i) {
    // The per-SM-subpartition spelling sums to the same total.
    const std::string n = StartsWith(names[i], "smsp__") ? "sm__" + names[i].substr(6) : names[i];
    const double v = std::isfinite(values[i]) && values[i] > 0 ? values[i] : 0;
    if (n == kDramReadMetric) {
      c.dram_read_bytes = ToCount(v);
      continue;
    }
    if (n == kDramWriteMetric) {
      c.dram_write_bytes = ToCount(v);
      continue;
    }
    if (StartsWith(n, kTensorMetricPrefix)) {
      tensor += v * kTensorFlopsPerOp;
      continue;
    }
    for (const InstMetric& m : kInstMetrics) {
      if (n != m.name) continue;
      const double flops = v * m.flops_per_inst;
      switch (m.precision) {
        case Flop::kFp64:
          fp64 += flops;
          break;
        case Flop::kFp32:
          fp32 += flops;
          break;
        case Flop::kFp16:
          fp16 += flops;
          break;
        case Flop::kNone:
          break;
      }
    }
  }
  c.flop_fp64 = ToCount(fp64);
  c.flop_fp32 = ToCount(fp32);
  c.flop_fp16 = ToCount(fp16);
  c.flop_tensor = ToCount(tensor);
  *out = c;
  return Status::Ok();
}

KernelKey KeyOf(const KernelRecord& k) {
  return KernelKey{k.name, k.grid, k.block, k.static_shared_memory_bytes,
                   k.dynamic_shared_memory_bytes};
}

KernelKey KeyOf(const Kernel& k) {
  return KernelKey{k.name, k.grid, k.block, k.static_shared_memory_bytes,
                   k.dynamic_shared_memory_bytes};
}

Status TopKernelKeys(const std::vector<KernelRecord>& kernels, double fraction,
                     std::set<KernelKey>* out) {
  if (!(fraction > 0 && fraction <= 1)) {
    return InvalidArgumentError("counter fraction must be in (0, 1], got " +
                                std::to_string(fraction));
  }
  std::map<KernelKey, int64_t> time;
  int64_t total = 0;
  for (const KernelRecord& k : kernels) {
    const int64_t d = std::max<int64_t>(0, k.end_ns - k.start_ns);
    time[KeyOf(k)] += d;
    total += d;
  }
  std::vector<std::pair<int64_t, const KernelKey*>> order;
  order.reserve(time.size());
  for (const auto& [key, t] : time) order.emplace_back(t, &key);
  // Longest first; ties in key order, so the choice is deterministic.
  std::stable_sort(order.begin(), order.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  out->clear();
  const double goal = fraction * static_cast<double>(total);
  int64_t sum = 0;
  for (const auto& [t, key] : order) {
    if (!out->empty() && static_cast<double>(sum) >= goal) break;
    out->insert(*key);
    sum += t;
  }
  return Status::Ok();
}

Status JoinCounters(const std::vector<KernelRecord>& kernels, const CounterPass& pass,
                    const std::set<KernelKey>& wanted, CounterCache* cache, JoinStats* stats) {
  *stats = JoinStats();
  const std::vector<const KernelRecord*> order = InLaunchOrder(kernels);
  const std::vector<RangeMetrics>& ranges = pass.ranges;
  stats->ranges = ranges.size();
  stats->kernels = order.size();
  auto range_name = [](const RangeMetrics& r) -> const std::string& { return r.kernel_name; };
  auto kernel_name = [](const KernelRecord* k) -> const std::string& { return k->name; };
  // Range names that never equal a kernel name (a profiler naming ranges
  // otherwise) but as many ranges as kernels: join by position.
  bool by_position = ranges.size() == order.size() && !ranges.empty();
  for (size_t k = 0; by_position && k < ranges.size(); ++k) {
    if (ranges[k].kernel_name == order[k]->name) by_position = false;
  }
  stats->by_position = by_position;
  size_t i = 0, j = 0;
  while (i < ranges.size() && j < order.size()) {
    if (by_position || ranges[i].kernel_name == order[j]->name) {
      const KernelKey key = KeyOf(*order[j]);
      if (wanted.count(key) > 0 && cache->count(key) == 0) {
        KernelCounters c;
        HABITAT_AGENT_RETURN_IF_ERROR(CountersFromMetrics(pass.metric_names, ranges[i].values, &c));
        cache->emplace(key, c);
        ++stats->new_keys;
      }
      ++stats->matched;
      ++i;
      ++j;
      continue;
    }
    // Kernels the counter run did not launch, or launches the tracked run
    // did not make: skip whichever side resynchronises sooner.
    const size_t dj = FindAhead(order, j, ranges[i].kernel_name, kernel_name);
    const size_t di = FindAhead(ranges, i, order[j]->name, range_name);
    if (dj == 0 && di == 0) {
      ++i;
      ++j;
      ++stats->skipped_ranges;
      ++stats->skipped_kernels;
    } else if (di == 0 || (dj != 0 && dj <= di)) {
      j += dj;
      stats->skipped_kernels += dj;
    } else {
      i += di;
      stats->skipped_ranges += di;
    }
  }
  stats->skipped_ranges += ranges.size() - std::min(i, ranges.size());
  stats->skipped_kernels += order.size() - std::min(j, order.size());
  for (const KernelKey& key : wanted) {
    if (cache->count(key) == 0) ++stats->wanted_missing;
  }
  return Status::Ok();
}

Status CollectKernelCounters(const std::vector<KernelRecord>& kernels, double fraction,
                             CounterSource* source, const std::function<Status()>& work,
                             CounterCache* cache, CounterReport* report) {
  *report = CounterReport();
  std::set<KernelKey> wanted;
  HABITAT_AGENT_RETURN_IF_ERROR(TopKernelKeys(kernels, fraction, &wanted));
  report->wanted_keys = wanted.size();
  for (const KernelKey& key : wanted) {
    if (cache->count(key) > 0) ++report->cached_before;
  }
  if (report->cached_before == wanted.size()) return Status::Ok();
  CounterPass pass;
  HABITAT_AGENT_RETURN_IF_ERROR(
      source->Collect(work, kernels.size() + kernels.size() / 4 + 64, &pass));
  report->ran = true;
  report->replay_passes = pass.replay_passes;
  report->dropped_ranges = pass.dropped_ranges;
  return JoinCounters(kernels, pass, wanted, cache, &report->join);
}

size_t AttachCounters(const CounterCache& cache, Trace* trace) {
  if (cache.empty()) return 0;
  size_t set = 0;
  auto attach = [&](std::vector<Kernel>* kernels) {
    for (Kernel& k : *kernels) {
      auto it = cache.find(KeyOf(k));
      if (it == cache.end()) continue;
      k.counters = it->second;
      ++set;
    }
  };
  for (Operation& op : trace->operations) {
    attach(&op.forward.kernels);
    if (op.backward.has_value()) attach(&op.backward->kernels);
  }
  attach(&trace->unattributed_kernels);
  return set;
}

}  // namespace agent
}  // namespace habitat
