// KernelSource over the CUPTI Activity API (CUDA 13): concurrent kernel
// records (versions in cupti_records.h), memcpy/memset, runtime and driver API
// calls (the CPU launch timestamps) and external correlation records (the
// op that was running when a launch was made).
//
// CUPTI's buffer callbacks are plain functions without a user pointer, so
// one static pointer names the source that is collecting; only one
// CuptiActivitySource can be started at a time (a second Start() fails).
// CUPTI errors are logged to stderr and returned or kept for TakeErrors();
// nothing here throws or exits. CUPTI allows one activity client per
// process: do not run torch.profiler while a tracker is active.
#pragma once

#include <cupti.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "agent/capture/kernel_source.h"

namespace habitat {
namespace agent {

// "CUPTI_ERROR_INSUFFICIENT_PRIVILEGES (35)" etc.
std::string CuptiResultString(CUptiResult result);

// A Status for a failed CUPTI call (OK for CUPTI_SUCCESS), naming the call;
// adds how to fix it for errors users meet in containers.
Status CuptiStatus(CUptiResult result, const char* call);

class CuptiActivitySource : public KernelSource {
 public:
  struct Options {
    // Size of each activity buffer handed to CUPTI.
    size_t buffer_bytes = size_t{8} << 20;
    // Runtime/driver API records: the host timeline. Off saves overhead
    // but leaves kernels without launch times.
    bool record_api_calls = true;
  };

  CuptiActivitySource() = default;
  explicit CuptiActivitySource(Options options) : options_(options) {}
  ~CuptiActivitySource() override;

  CuptiActivitySource(const CuptiActivitySource&) = delete;
  CuptiActivitySource& operator=(const CuptiActivitySource&) = delete;

  Status Start() override;
  Status Flush() override;
  Status Stop(ActivityRecords* out) override;
  Status PushExternalId(uint64_t id) override;
  Status PopExternalId() override;
  int64_t NowNs() const override;
  uint64_t dropped_records() const override { return dropped_.load(); }
  std::vector<Status> TakeErrors() override;

 private:
  static void CUPTIAPI BufferRequested(uint8_t** buffer, size_t* size, size_t* max_records);
  static void CUPTIAPI BufferCompleted(CUcontext context, uint32_t stream_id, uint8_t* buffer,
                                       size_t size, size_t valid_size);
  void Consume(CUcontext context, uint32_t stream_id, uint8_t* buffer, size_t valid_size);
  void Decode(const CUpti_Activity* record);  // mu_ held
  void AddError(Status status);
  const std::string& ApiName(bool runtime, uint32_t cbid);  // mu_ held
  Status DisableAll();

  // The source CUPTI's callbacks deliver to; null when none is started.
  static std::atomic<CuptiActivitySource*> active_;
  static std::atomic<size_t> buffer_bytes_;

  Options options_;
  bool started_ = false;
  std::vector<CUpti_ActivityKind> enabled_;
  std::atomic<uint64_t> dropped_{0};
  std::mutex mu_;
  ActivityRecords records_;                              // guarded by mu_
  std::vector<Status> errors_;                           // guarded by mu_
  std::unordered_map<uint64_t, std::string> api_names_;  // guarded by mu_
};

// Demangles a CUPTI kernel name ("_Z..."), as torch.profiler shows it;
// returns the input when it is not a mangled name.
std::string DemangleKernelName(const std::string& name);

}  // namespace agent
}  // namespace habitat
