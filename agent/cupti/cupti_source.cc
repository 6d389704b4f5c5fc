#include "agent/cupti/cupti_source.h"

#include <cxxabi.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <utility>

#include "agent/cupti/cupti_records.h"

namespace habitat {
namespace agent {
namespace {

// Kineto (torch.profiler) pushes CUSTOM0/CUSTOM1; a different kind keeps
// the two from reading each other's ids.
constexpr CUpti_ExternalCorrelationKind kExternalKind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2;

// CUPTI wants 8-byte aligned buffers.
constexpr size_t kAlign = 8;

// Serialises buffer delivery against Stop(), so no buffer is consumed by a
// source that has stopped (or been destroyed).
std::mutex& CallbackMutex() {
  static std::mutex* mu = new std::mutex;  // never destroyed: used at exit
  return *mu;
}

void Log(const std::string& message) {
  std::fprintf(stderr, "habitat agent (CUPTI): %s\n", message.c_str());
}

MemoryKind CopyKind(uint8_t copy_kind) {
  switch (copy_kind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD:
      return MemoryKind::kMemcpyHtoD;
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH:
      return MemoryKind::kMemcpyDtoH;
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD:
      return MemoryKind::kMemcpyDtoD;
    default:
      return MemoryKind::kOther;
  }
}

uint32_t Positive(int32_t v) { return v < 0 ? 0 : static_cast<uint32_t>(v); }

// "cudaLaunchKernel_v7000" -> "cudaLaunchKernel".
std::string StripVersion(const char* name) {
  std::string s(name);
  const size_t v = s.rfind("_v");
  if (v != std::string::npos && v + 2 < s.size() &&
      s.find_first_not_of("0123456789", v + 2) == std::string::npos) {
    s.resize(v);
  }
  return s;
}

}  // namespace

std::atomic<CuptiActivitySource*> CuptiActivitySource::active_{nullptr};
std::atomic<size_t> CuptiActivitySource::buffer_bytes_{size_t{8} << 20};

std::string CuptiResultString(CUptiResult result) {
  const char* text = nullptr;
  if (cuptiGetResultString(result, &text) != CUPTI_SUCCESS || text == nullptr) {
    text = "unknown CUPTI error";
  }
  return std::string(text) + " (" + std::to_string(static_cast<int>(result)) + ")";
}

Status CuptiStatus(CUptiResult result, const char* call) {
  if (result == CUPTI_SUCCESS) return Status::Ok();
  std::string message = std::string(call) + " failed: " + CuptiResultString(result);
  switch (result) {
    case CUPTI_ERROR_INSUFFICIENT_PRIVILEGES:
      return PermissionDeniedError(
          message +
          ". The container or driver does not allow GPU profiling; run with "
          "--cap-add=SYS_ADMIN or set the driver option "
          "NVreg_RestrictProfilingToAdminUsers=0");
    case CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED:
      return FailedPreconditionError(message +
                                     ". Another profiler (torch.profiler, Nsight) holds CUPTI; "
                                     "stop it before tracking");
    case CUPTI_ERROR_NOT_INITIALIZED:
    case CUPTI_ERROR_INVALID_DEVICE:
      return UnavailableError(message + ". Is a CUDA GPU and driver present?");
    default:
      return InternalError(message);
  }
}

std::string DemangleKernelName(const std::string& name) {
  if (name.rfind("_Z", 0) != 0) return name;
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> out(
      abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status), std::free);
  if (status != 0 || out == nullptr) return name;
  return out.get();
}

CuptiActivitySource::~CuptiActivitySource() {
  if (!started_) return;
  ActivityRecords discarded;
  const Status s = Stop(&discarded);
  if (!s.ok()) Log("stopping in destructor: " + s.ToString());
}

void CUPTIAPI CuptiActivitySource::BufferRequested(uint8_t** buffer, size_t* size,
                                                   size_t* max_records) {
  size_t bytes = buffer_bytes_.load();
  bytes = (bytes + kAlign - 1) / kAlign * kAlign;
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(kAlign, bytes));
  // A null buffer makes CUPTI drop records, which it then counts.
  *size = *buffer == nullptr ? 0 : bytes;
  *max_records = 0;  // as many as fit
}

void CUPTIAPI CuptiActivitySource::BufferCompleted(CUcontext context, uint32_t stream_id,
                                                   uint8_t* buffer, size_t size,
                                                   size_t valid_size) {
  {
    std::lock_guard<std::mutex> lock(CallbackMutex());
    CuptiActivitySource* self = active_.load();
    if (self != nullptr && buffer != nullptr) {
      self->Consume(context, stream_id, buffer, valid_size);
    }
  }
  std::free(buffer);
}

void CuptiActivitySource::Consume(CUcontext context, uint32_t stream_id, uint8_t* buffer,
                                  size_t valid_size) {
  std::lock_guard<std::mutex> lock(mu_);
  CUpti_Activity* record = nullptr;
  while (true) {
    const CUptiResult r = cuptiActivityGetNextRecord(buffer, valid_size, &record);
    if (r == CUPTI_ERROR_MAX_LIMIT_REACHED) break;
    if (r != CUPTI_SUCCESS) {
      Status s = CuptiStatus(r, "cuptiActivityGetNextRecord");
      Log(s.ToString());
      errors_.push_back(std::move(s));
      break;
    }
    Decode(record);
  }
  size_t dropped = 0;
  const CUptiResult r = cuptiActivityGetNumDroppedRecords(context, stream_id, &dropped);
  if (r != CUPTI_SUCCESS) {
    Status s = CuptiStatus(r, "cuptiActivityGetNumDroppedRecords");
    Log(s.ToString());
    errors_.push_back(std::move(s));
  } else if (dropped > 0) {
    Log(std::to_string(dropped) +
        " activity records dropped (buffers full); the trace is incomplete");
    dropped_ += dropped;
  }
}

const std::string& CuptiActivitySource::ApiName(bool runtime, uint32_t cbid) {
  const uint64_t key = (uint64_t{runtime} << 32) | cbid;
  auto it = api_names_.find(key);
  if (it != api_names_.end()) return it->second;
  const char* name = nullptr;
  const CUptiResult r = cuptiGetCallbackName(
      runtime ? CUPTI_CB_DOMAIN_RUNTIME_API : CUPTI_CB_DOMAIN_DRIVER_API, cbid, &name);
  std::string s = (r == CUPTI_SUCCESS && name != nullptr)
                      ? StripVersion(name)
                      : std::string(runtime ? "cuda" : "cu") + "Api#" + std::to_string(cbid);
  return api_names_.emplace(key, std::move(s)).first->second;
}

void CuptiActivitySource::Decode(const CUpti_Activity* record) {
  switch (record->kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
      const auto* k = reinterpret_cast<const CuptiKernelRecord*>(record);
      KernelRecord out;
      out.name = k->name != nullptr ? k->name : "<unnamed kernel>";
      out.grid = {Positive(k->gridX), Positive(k->gridY), Positive(k->gridZ)};
      out.block = {Positive(k->blockX), Positive(k->blockY), Positive(k->blockZ)};
      out.registers_per_thread = k->registersPerThread;
      out.static_shared_memory_bytes = Positive(k->staticSharedMemory);
      out.dynamic_shared_memory_bytes = Positive(k->dynamicSharedMemory);
      out.start_ns = static_cast<int64_t>(k->start);
      out.end_ns = static_cast<int64_t>(k->end);
      out.correlation_id = k->correlationId;
      out.device_id = k->deviceId;
      out.stream_id = k->streamId;
      records_.kernels.push_back(std::move(out));
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
      const auto* m = reinterpret_cast<const CuptiMemcpyRecord*>(record);
      MemoryRecord out;
      out.kind = CopyKind(m->copyKind);
      out.bytes = m->bytes;
      out.start_ns = static_cast<int64_t>(m->start);
      out.end_ns = static_cast<int64_t>(m->end);
      out.correlation_id = m->correlationId;
      out.device_id = m->deviceId;
      out.stream_id = m->streamId;
      records_.memory.push_back(out);
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
      const auto* m = reinterpret_cast<const CuptiMemsetRecord*>(record);
      MemoryRecord out;
      out.kind = MemoryKind::kMemset;
      out.bytes = m->bytes;
      out.start_ns = static_cast<int64_t>(m->start);
      out.end_ns = static_cast<int64_t>(m->end);
      out.correlation_id = m->correlationId;
      out.device_id = m->deviceId;
      out.stream_id = m->streamId;
      records_.memory.push_back(out);
      break;
    }
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER: {
      const auto* a = reinterpret_cast<const CuptiApiRecord*>(record);
      ApiRecord out;
      out.name = ApiName(record->kind == CUPTI_ACTIVITY_KIND_RUNTIME, a->cbid);
      out.start_ns = static_cast<int64_t>(a->start);
      out.end_ns = static_cast<int64_t>(a->end);
      out.correlation_id = a->correlationId;
      out.thread_id = a->threadId;
      records_.api_calls.push_back(std::move(out));
      break;
    }
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: {
      const auto* e = reinterpret_cast<const CuptiExternalCorrelationRecord*>(record);
      if (e->externalKind != kExternalKind) break;
      records_.external_correlations.push_back(
          ExternalCorrelation{e->correlationId, e->externalId});
      break;
    }
    default:
      break;  // kinds we did not ask for (other clients' records)
  }
}

void CuptiActivitySource::AddError(Status status) {
  Log(status.ToString());
  std::lock_guard<std::mutex> lock(mu_);
  errors_.push_back(std::move(status));
}

Status CuptiActivitySource::DisableAll() {
  Status first;
  for (auto it = enabled_.rbegin(); it != enabled_.rend(); ++it) {
    const Status s = CuptiStatus(cuptiActivityDisable(*it), "cuptiActivityDisable");
    if (!s.ok() && first.ok()) first = s;
  }
  enabled_.clear();
  return first;
}

Status CuptiActivitySource::Start() {
  if (started_) return FailedPreconditionError("CUPTI source already started");
  CuptiActivitySource* expected = nullptr;
  if (!active_.compare_exchange_strong(expected, this)) {
    return FailedPreconditionError(
        "another habitat tracker is already collecting CUPTI activity in "
        "this process");
  }
  buffer_bytes_ = options_.buffer_bytes;
  {
    std::lock_guard<std::mutex> lock(mu_);
    records_ = ActivityRecords();
    errors_.clear();
  }
  dropped_ = 0;
  Status s = CuptiStatus(cuptiActivityRegisterCallbacks(&BufferRequested, &BufferCompleted),
                         "cuptiActivityRegisterCallbacks");
  std::vector<CUpti_ActivityKind> kinds = {CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION,
                                           CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
                                           CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET};
  if (options_.record_api_calls) {
    kinds.push_back(CUPTI_ACTIVITY_KIND_RUNTIME);
    kinds.push_back(CUPTI_ACTIVITY_KIND_DRIVER);
  }
  for (CUpti_ActivityKind kind : kinds) {
    if (!s.ok()) break;
    s = CuptiStatus(cuptiActivityEnable(kind),
                    ("cuptiActivityEnable(kind " + std::to_string(kind) + ")").c_str());
    if (s.ok()) enabled_.push_back(kind);
  }
  if (!s.ok()) {
    Log(s.ToString());
    (void)DisableAll();
    active_ = nullptr;
    return s;
  }
  started_ = true;
  return Status::Ok();
}

Status CuptiActivitySource::Flush() {
  if (!started_) return FailedPreconditionError("CUPTI source not started");
  return CuptiStatus(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED),
                     "cuptiActivityFlushAll");
}

Status CuptiActivitySource::Stop(ActivityRecords* out) {
  if (!started_) return FailedPreconditionError("CUPTI source not started");
  Status s = Flush();
  const Status disabled = DisableAll();
  if (s.ok()) s = disabled;
  // Records completed while disabling.
  const Status flushed =
      CuptiStatus(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), "cuptiActivityFlushAll");
  if (s.ok()) s = flushed;
  {
    std::lock_guard<std::mutex> lock(CallbackMutex());
    active_ = nullptr;
  }
  started_ = false;
  std::lock_guard<std::mutex> lock(mu_);
  // Demangle once per distinct name: a few hundred for thousands of launches.
  std::unordered_map<std::string, std::string> demangled;
  for (KernelRecord& k : records_.kernels) {
    auto it = demangled.find(k.name);
    if (it == demangled.end()) {
      it = demangled.emplace(k.name, DemangleKernelName(k.name)).first;
    }
    k.name = it->second;
  }
  records_.dropped_records = dropped_.load();
  *out = std::move(records_);
  records_ = ActivityRecords();
  if (!s.ok()) {
    Log(s.ToString());
    errors_.push_back(s);
  }
  return s;
}

Status CuptiActivitySource::PushExternalId(uint64_t id) {
  return CuptiStatus(cuptiActivityPushExternalCorrelationId(kExternalKind, id),
                     "cuptiActivityPushExternalCorrelationId");
}

Status CuptiActivitySource::PopExternalId() {
  uint64_t last = 0;
  return CuptiStatus(cuptiActivityPopExternalCorrelationId(kExternalKind, &last),
                     "cuptiActivityPopExternalCorrelationId");
}

int64_t CuptiActivitySource::NowNs() const {
  uint64_t t = 0;
  if (cuptiGetTimestamp(&t) != CUPTI_SUCCESS) return 0;
  return static_cast<int64_t>(t);
}

std::vector<Status> CuptiActivitySource::TakeErrors() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<Status> out = std::move(errors_);
  errors_.clear();
  return out;
}

}  // namespace agent
}  // namespace habitat
