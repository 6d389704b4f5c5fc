// Where the GPU side of a trace comes from. The CUPTI activity source
// (agent/cupti) is the real one; tests use FakeKernelSource.
//
// Protocol: Start() once, then the tracked work runs (the op recorder calls
// PushExternalId/PopExternalId around every op on the op's thread), then
// Stop() hands over every record collected since Start(). Errors that occur
// where nothing can return them (CUPTI's buffer callbacks) are kept and
// handed out by TakeErrors(); nothing is thrown.
#pragma once

#include <cstdint>
#include <vector>

#include "agent/capture/records.h"
#include "agent/capture/status.h"

namespace habitat {
namespace agent {

class KernelSource {
 public:
  virtual ~KernelSource() = default;

  virtual Status Start() = 0;
  // Delivers the records of all work finished so far (the caller should
  // have synchronised the device first).
  virtual Status Flush() = 0;
  // Flushes, stops collecting and moves every record out (with
  // `dropped_records` set). `out` is replaced, not appended to.
  virtual Status Stop(ActivityRecords* out) = 0;

  // Called on the thread that makes the CUDA calls, around each op.
  virtual Status PushExternalId(uint64_t id) = 0;
  virtual Status PopExternalId() = 0;

  // The clock the records' timestamps are on, in nanoseconds; op events
  // must be stamped with it.
  virtual int64_t NowNs() const = 0;

  // Records dropped so far (CUPTI buffers full or records it could not
  // decode).
  virtual uint64_t dropped_records() const = 0;
  // Errors raised in callbacks since the last call.
  virtual std::vector<Status> TakeErrors() = 0;
};

}  // namespace agent
}  // namespace habitat
