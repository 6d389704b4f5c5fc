#include "agent/cupti/counter_collector.h"

#include <cuda.h>
#include <cupti.h>
#include <cupti_profiler_host.h>
#include <cupti_profiler_target.h>
#include <cupti_range_profiler.h>
#include <cupti_target.h>
#include <dlfcn.h>

#include <cstdio>
#include <cstring>
#include <set>
#include <utility>

#include "agent/capture/kernel_counters.h"
#include "agent/cupti/cupti_source.h"

namespace habitat {
namespace agent {
namespace {

void Log(const std::string& message) {
  std::fprintf(stderr, "habitat agent (CUPTI profiler): %s\n", message.c_str());
}

const char* const kEnableHint =
    "Hardware counters need GPU profiling permission: load the NVIDIA driver "
    "with NVreg_RestrictProfilingToAdminUsers=0 (e.g. `options nvidia "
    "NVreg_RestrictProfilingToAdminUsers=0` in /etc/modprobe.d, then reboot) "
    "or run as root / with CAP_SYS_ADMIN (docker run --cap-add SYS_ADMIN). "
    "The trace is still produced, without counters.";

// A failed profiler call, with the remedy for the errors users meet.
Status ProfilerStatus(CUptiResult r, const char* call) {
  if (r == CUPTI_SUCCESS) return Status::Ok();
  const std::string what = std::string(call) + " failed: " + CuptiResultString(r);
  switch (r) {
    case CUPTI_ERROR_INSUFFICIENT_PRIVILEGES:
    case CUPTI_ERROR_VIRTUALIZED_DEVICE_INSUFFICIENT_PRIVILEGES:
      return PermissionDeniedError(what + ". " + kEnableHint);
    case CUPTI_ERROR_NOT_SUPPORTED:
    case CUPTI_ERROR_LEGACY_PROFILER_NOT_SUPPORTED:
    case CUPTI_ERROR_VIRTUALIZED_DEVICE_NOT_SUPPORTED:
    case CUPTI_ERROR_CONFIDENTIAL_COMPUTING_NOT_SUPPORTED:
    case CUPTI_ERROR_CMP_DEVICE_NOT_SUPPORTED:
    case CUPTI_ERROR_MIG_DEVICE_NOT_SUPPORTED:
    case CUPTI_ERROR_SLI_DEVICE_NOT_SUPPORTED:
    case CUPTI_ERROR_WSL_DEVICE_NOT_SUPPORTED:
    case CUPTI_ERROR_INVALID_CHIP_NAME:
      return UnavailableError(what +
                              ". GPU profiling is not supported on this "
                              "device or configuration; the trace is still "
                              "produced, without counters.");
    case CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED:
    case CUPTI_ERROR_HARDWARE_BUSY:
      return FailedPreconditionError(what +
                                     ". Another profiler (torch.profiler, Nsight, DCGM "
                                     "profiling) holds the GPU counters; stop it first.");
    default:
      return InternalError(what);
  }
}

// CUPTI's parameter structs: zeroed, with their size set.
template <typename T>
T Params(size_t struct_size) {
  T p;
  std::memset(&p, 0, sizeof(p));
  p.structSize = struct_size;
  return p;
}

#define HABITAT_PARAMS(type) Params<type>(type##_STRUCT_SIZE)

#define HABITAT_PROFILER_CALL(call, params) \
  HABITAT_AGENT_RETURN_IF_ERROR(ProfilerStatus(call(&params), #call))

const char* LevelName(CUpti_Profiler_Support_Level l) {
  switch (l) {
    case CUPTI_PROFILER_CONFIGURATION_SUPPORTED:
      return "supported";
    case CUPTI_PROFILER_CONFIGURATION_DISABLED:
      return "disabled";
    case CUPTI_PROFILER_CONFIGURATION_UNSUPPORTED:
      return "unsupported";
    default:
      return "unknown";
  }
}

// The current thread's CUDA context and its device. The driver library is
// already loaded by torch; looking the two calls up there spares the
// extension a link dependency on libcuda (a stub on build machines).
Status CurrentContext(CUcontext* ctx, CUdevice* device) {
  void* cuda = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
  if (cuda == nullptr) cuda = dlopen("libcuda.so.1", RTLD_LAZY);
  if (cuda == nullptr) {
    return UnavailableError("libcuda.so.1 not found: no NVIDIA driver?");
  }
  using GetCurrent = CUresult (*)(CUcontext*);
  using GetDevice = CUresult (*)(CUdevice*);
  auto get_current = reinterpret_cast<GetCurrent>(dlsym(cuda, "cuCtxGetCurrent"));
  auto get_device = reinterpret_cast<GetDevice>(dlsym(cuda, "cuCtxGetDevice"));
  if (get_current == nullptr || get_device == nullptr) {
    return UnavailableError("libcuda.so.1 lacks cuCtxGetCurrent/cuCtxGetDevice");
  }
  *ctx = nullptr;
  if (get_current(ctx) != CUDA_SUCCESS || *ctx == nullptr) {
    return FailedPreconditionError(
        "no current CUDA context on this thread: run CUDA work (e.g. one "
        "training step) before collecting counters");
  }
  if (get_device(device) != CUDA_SUCCESS) {
    return InternalError("cuCtxGetDevice failed");
  }
  return Status::Ok();
}

// Everything one profiling session holds, released in reverse order.
class Session {
 public:
  ~Session() {
    if (profiler_ != nullptr) {
      auto p = HABITAT_PARAMS(CUpti_RangeProfiler_Disable_Params);
      p.pRangeProfilerObject = profiler_;
      const Status s = ProfilerStatus(cuptiRangeProfilerDisable(&p), "cuptiRangeProfilerDisable");
      if (!s.ok()) Log(s.ToString());
    }
    if (host_ != nullptr) {
      auto p = HABITAT_PARAMS(CUpti_Profiler_Host_Deinitialize_Params);
      p.pHostObject = host_;
      const Status s =
          ProfilerStatus(cuptiProfilerHostDeinitialize(&p), "cuptiProfilerHostDeinitialize");
      if (!s.ok()) Log(s.ToString());
    }
    if (initialized_) {
      auto p = HABITAT_PARAMS(CUpti_Profiler_DeInitialize_Params);
      const Status s = ProfilerStatus(cuptiProfilerDeInitialize(&p), "cuptiProfilerDeInitialize");
      if (!s.ok()) Log(s.ToString());
    }
  }

  // Initialises the profiler and a host object for the current device.
  Status Open() {
    HABITAT_AGENT_RETURN_IF_ERROR(CurrentContext(&ctx_, &device_));
    auto init = HABITAT_PARAMS(CUpti_Profiler_Initialize_Params);
    HABITAT_PROFILER_CALL(cuptiProfilerInitialize, init);
    initialized_ = true;

    auto sup = HABITAT_PARAMS(CUpti_Profiler_DeviceSupported_Params);
    sup.cuDevice = device_;
    sup.api = CUPTI_PROFILER_RANGE_PROFILING;
    HABITAT_PROFILER_CALL(cuptiProfilerDeviceSupported, sup);
    if (sup.isSupported != CUPTI_PROFILER_CONFIGURATION_SUPPORTED) {
      return UnavailableError(std::string("GPU profiling is not supported on this device "
                                          "(architecture ") +
                              LevelName(sup.architecture) + ", SLI " + LevelName(sup.sli) +
                              ", vGPU " + LevelName(sup.vGpu) + ", confidential computing " +
                              LevelName(sup.confidentialCompute) + ", CMP " + LevelName(sup.cmp) +
                              ", WSL " + LevelName(sup.wsl) +
                              "); the trace is still produced, without counters.");
    }

    auto chip = HABITAT_PARAMS(CUpti_Device_GetChipName_Params);
    chip.deviceIndex = static_cast<size_t>(device_);
    HABITAT_PROFILER_CALL(cuptiDeviceGetChipName, chip);
    chip_name_ = chip.pChipName != nullptr ? chip.pChipName : "";

    auto avail = HABITAT_PARAMS(CUpti_Profiler_GetCounterAvailability_Params);
    avail.ctx = ctx_;
    HABITAT_PROFILER_CALL(cuptiProfilerGetCounterAvailability, avail);
    availability_.assign(avail.counterAvailabilityImageSize, 0);
    avail.pCounterAvailabilityImage = availability_.data();
    HABITAT_PROFILER_CALL(cuptiProfilerGetCounterAvailability, avail);

    auto host = HABITAT_PARAMS(CUpti_Profiler_Host_Initialize_Params);
    host.profilerType = CUPTI_PROFILER_TYPE_RANGE_PROFILER;
    host.pChipName = chip_name_.c_str();
    host.pCounterAvailabilityImage = availability_.data();
    HABITAT_PROFILER_CALL(cuptiProfilerHostInitialize, host);
    host_ = host.pHostObject;
    return Status::Ok();
  }

  Status BaseMetrics(std::vector<std::string>* out) {
    auto p = HABITAT_PARAMS(CUpti_Profiler_Host_GetBaseMetrics_Params);
    p.pHostObject = host_;
    p.metricType = CUPTI_METRIC_TYPE_COUNTER;
    HABITAT_PROFILER_CALL(cuptiProfilerHostGetBaseMetrics, p);
    out->clear();
    for (size_t i = 0; i < p.numMetrics; ++i) {
      if (p.ppMetricNames[i] != nullptr) out->push_back(p.ppMetricNames[i]);
    }
    return Status::Ok();
  }

  Status Configure(const std::vector<const char*>& metrics, size_t max_ranges, bool user_replay,
                   size_t* passes) {
    user_replay_ = user_replay;
    auto add = HABITAT_PARAMS(CUpti_Profiler_Host_ConfigAddMetrics_Params);
    add.pHostObject = host_;
    add.ppMetricNames = const_cast<const char**>(metrics.data());
    add.numMetrics = metrics.size();
    HABITAT_PROFILER_CALL(cuptiProfilerHostConfigAddMetrics, add);

    auto size = HABITAT_PARAMS(CUpti_Profiler_Host_GetConfigImageSize_Params);
    size.pHostObject = host_;
    HABITAT_PROFILER_CALL(cuptiProfilerHostGetConfigImageSize, size);
    config_.assign(size.configImageSize, 0);
    auto image = HABITAT_PARAMS(CUpti_Profiler_Host_GetConfigImage_Params);
    image.pHostObject = host_;
    image.configImageSize = config_.size();
    image.pConfigImage = config_.data();
    HABITAT_PROFILER_CALL(cuptiProfilerHostGetConfigImage, image);

    auto np = HABITAT_PARAMS(CUpti_Profiler_Host_GetNumOfPasses_Params);
    np.configImageSize = config_.size();
    np.pConfigImage = config_.data();
    HABITAT_PROFILER_CALL(cuptiProfilerHostGetNumOfPasses, np);
    *passes = np.numOfPasses;

    auto enable = HABITAT_PARAMS(CUpti_RangeProfiler_Enable_Params);
    enable.ctx = ctx_;
    HABITAT_PROFILER_CALL(cuptiRangeProfilerEnable, enable);
    profiler_ = enable.pRangeProfilerObject;

    auto cds = HABITAT_PARAMS(CUpti_RangeProfiler_GetCounterDataSize_Params);
    cds.pRangeProfilerObject = profiler_;
    cds.pMetricNames = const_cast<const char**>(metrics.data());
    cds.numMetrics = metrics.size();
    cds.maxNumOfRanges = max_ranges;
    cds.maxNumRangeTreeNodes = static_cast<uint32_t>(max_ranges);
    HABITAT_PROFILER_CALL(cuptiRangeProfilerGetCounterDataSize, cds);
    counter_data_.assign(cds.counterDataSize, 0);
    auto cdi = HABITAT_PARAMS(CUpti_RangeProfiler_CounterDataImage_Initialize_Params);
    cdi.pRangeProfilerObject = profiler_;
    cdi.counterDataSize = counter_data_.size();
    cdi.pCounterData = counter_data_.data();
    HABITAT_PROFILER_CALL(cuptiRangeProfilerCounterDataImageInitialize, cdi);

    auto set = HABITAT_PARAMS(CUpti_RangeProfiler_SetConfig_Params);
    set.pRangeProfilerObject = profiler_;
    set.configSize = config_.size();
    set.pConfig = config_.data();
    set.counterDataImageSize = counter_data_.size();
    set.pCounterDataImage = counter_data_.data();
    set.range = CUPTI_AutoRange;
    set.replayMode = user_replay ? CUPTI_UserReplay : CUPTI_KernelReplay;
    set.maxRangesPerPass = max_ranges;
    set.numNestingLevels = 1;
    set.minNestingLevel = 1;
    set.passIndex = 0;
    set.targetNestingLevel = 1;
    HABITAT_PROFILER_CALL(cuptiRangeProfilerSetConfig, set);
    return Status::Ok();
  }

  // Runs the work between start and stop, once (kernel replay: CUPTI
  // replays each kernel per pass) or once per pass (user replay: the work
  // must launch the same kernels every time). The work's error wins.
  Status Run(const std::function<Status()>& work, size_t passes, uint64_t* dropped) {
    // A few spare runs: CUPTI, not the pass count, says when it is done.
    const size_t max_runs = user_replay_ ? passes + 2 : 1;
    bool all_submitted = false;
    size_t runs = 0;
    while (runs < max_runs && !all_submitted) {
      auto start = HABITAT_PARAMS(CUpti_RangeProfiler_Start_Params);
      start.pRangeProfilerObject = profiler_;
      HABITAT_PROFILER_CALL(cuptiRangeProfilerStart, start);
      const Status worked = work();
      ++runs;
      auto stop = HABITAT_PARAMS(CUpti_RangeProfiler_Stop_Params);
      stop.pRangeProfilerObject = profiler_;
      const Status stopped =
          ProfilerStatus(cuptiRangeProfilerStop(&stop), "cuptiRangeProfilerStop");
      if (!worked.ok()) return worked;
      HABITAT_AGENT_RETURN_IF_ERROR(stopped);
      all_submitted = stop.isAllPassSubmitted != 0;
    }
    if (!all_submitted) {
      // Decode what was collected rather than lose it.
      Log("cuptiRangeProfilerStop: not all passes submitted after " + std::to_string(runs) +
          " run(s); some metrics may be missing");
    }
    auto decode = HABITAT_PARAMS(CUpti_RangeProfiler_DecodeData_Params);
    decode.pRangeProfilerObject = profiler_;
    HABITAT_PROFILER_CALL(cuptiRangeProfilerDecodeData, decode);
    *dropped = decode.numOfRangeDropped;
    return Status::Ok();
  }

  Status Evaluate(const std::vector<const char*>& metrics, std::vector<RangeMetrics>* out) {
    auto info = HABITAT_PARAMS(CUpti_RangeProfiler_GetCounterDataInfo_Params);
    info.pCounterDataImage = counter_data_.data();
    info.counterDataImageSize = counter_data_.size();
    HABITAT_PROFILER_CALL(cuptiRangeProfilerGetCounterDataInfo, info);
    out->clear();
    out->reserve(info.numTotalRanges);
    for (size_t i = 0; i < info.numTotalRanges; ++i) {
      auto range = HABITAT_PARAMS(CUpti_RangeProfiler_CounterData_GetRangeInfo_Params);
      range.pCounterDataImage = counter_data_.data();
      range.counterDataImageSize = counter_data_.size();
      range.rangeIndex = i;
      range.rangeDelimiter = "/";
      HABITAT_PROFILER_CALL(cuptiRangeProfilerCounterDataGetRangeInfo, range);
      RangeMetrics r;
      r.kernel_name = DemangleKernelName(range.rangeName != nullptr ? range.rangeName : "");
      r.values.assign(metrics.size(), 0.0);
      auto eval = HABITAT_PARAMS(CUpti_Profiler_Host_EvaluateToGpuValues_Params);
      eval.pHostObject = host_;
      eval.pCounterDataImage = counter_data_.data();
      eval.counterDataImageSize = counter_data_.size();
      eval.rangeIndex = i;
      eval.ppMetricNames = const_cast<const char**>(metrics.data());
      eval.numMetrics = metrics.size();
      eval.pMetricValues = r.values.data();
      HABITAT_PROFILER_CALL(cuptiProfilerHostEvaluateToGpuValues, eval);
      out->push_back(std::move(r));
    }
    return Status::Ok();
  }

  const std::string& chip_name() const { return chip_name_; }

 private:
  CUcontext ctx_ = nullptr;
  CUdevice device_ = 0;
  bool initialized_ = false;
  bool user_replay_ = false;
  std::string chip_name_;
  std::vector<uint8_t> availability_;
  CUpti_Profiler_Host_Object* host_ = nullptr;
  CUpti_RangeProfiler_Object* profiler_ = nullptr;
  std::vector<uint8_t> config_;
  std::vector<uint8_t> counter_data_;
};

std::string BaseName(const std::string& metric) {
  const size_t dot = metric.find('.');
  return dot == std::string::npos ? metric : metric.substr(0, dot);
}

}  // namespace

Status CuptiCounterCollector::ListBaseMetrics(const std::string& part,
                                              std::vector<std::string>* out) {
  Session session;
  Status s = session.Open();
  if (s.ok()) s = session.BaseMetrics(out);
  if (!s.ok()) {
    Log(s.ToString());
    return s;
  }
  chip_name_ = session.chip_name();
  if (!part.empty()) {
    std::vector<std::string> kept;
    for (std::string& m : *out) {
      if (m.find(part) != std::string::npos) kept.push_back(std::move(m));
    }
    *out = std::move(kept);
  }
  return Status::Ok();
}

Status CuptiCounterCollector::Collect(const std::function<Status()>& work, size_t max_kernels,
                                      CounterPass* out) {
  if (max_kernels == 0) {
    return InvalidArgumentError("counter collection: max_kernels must be > 0");
  }
  Session session;
  auto fail = [](Status s) {
    Log(s.ToString());
    return s;
  };
  Status s = session.Open();
  if (!s.ok()) return fail(s);
  chip_name_ = session.chip_name();

  // Keep only metrics the device has, so one unknown name does not cost
  // all counters.
  std::vector<std::string> base;
  s = session.BaseMetrics(&base);
  if (!s.ok()) return fail(s);
  const std::set<std::string> known(base.begin(), base.end());
  std::vector<std::string> wanted = options_.metrics;
  if (wanted.empty()) {
    wanted = ScalarCounterMetrics();
    for (std::string& m : TensorCounterMetrics(base)) wanted.push_back(std::move(m));
  }
  missing_metrics_.clear();
  out->metric_names.clear();
  for (const std::string& m : wanted) {
    if (known.count(BaseName(m)) > 0) {
      out->metric_names.push_back(m);
    } else if (m.rfind("sm__", 0) == 0 && known.count("smsp__" + BaseName(m).substr(4)) > 0) {
      out->metric_names.push_back("smsp__" + m.substr(4));  // same total
    } else {
      missing_metrics_.push_back(m);
    }
  }
  if (!missing_metrics_.empty()) {
    std::string list;
    for (const std::string& m : missing_metrics_) list += " " + m;
    Log("metrics unknown on " + chip_name_ + ", left out:" + list);
  }
  if (out->metric_names.empty()) {
    return fail(UnavailableError("none of the counter metrics exists on " + chip_name_));
  }
  std::vector<const char*> names;
  for (const std::string& m : out->metric_names) names.push_back(m.c_str());

  s = session.Configure(names, max_kernels, options_.user_replay, &out->replay_passes);
  if (!s.ok()) return fail(s);
  s = session.Run(work, out->replay_passes, &out->dropped_ranges);
  if (!s.ok()) return fail(s);
  s = session.Evaluate(names, &out->ranges);
  if (!s.ok()) return fail(s);
  return Status::Ok();
}

}  // namespace agent
}  // namespace habitat
