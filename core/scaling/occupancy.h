// How many thread blocks of a kernel fit on one SM at once: the CUDA
// occupancy calculator's rules, applied to a habitat.v1.DeviceSpec. Wave
// scaling needs this on GPUs we cannot run on, so it is computed from the
// documented limits rather than asked of a driver.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "habitat/v1/device.pb.h"

namespace habitat {

// The launch resources of one kernel (what cudaFuncGetAttributes and the
// launch configuration say).
struct KernelResources {
  int threads_per_block = 0;
  // 0 means unknown; then registers do not limit occupancy.
  int registers_per_thread = 0;
  int64_t static_shared_memory_bytes = 0;
  int64_t dynamic_shared_memory_bytes = 0;
};

// Which resource set the result of MaxActiveBlocksPerSm.
enum class OccupancyLimit {
  kBlocksPerSm,
  kWarpsPerSm,
  kRegisters,
  kSharedMemory,
};

struct Occupancy {
  int blocks_per_sm = 0;
  OccupancyLimit limited_by = OccupancyLimit::kBlocksPerSm;
};

// Maximum resident blocks per SM, as cudaOccupancyMaxActiveBlocksPerMultiprocessor
// computes it with the default shared-memory carveout. INVALID_ARGUMENT,
// naming the field, for a launch the device would refuse (threads 0 or above
// the per-block limit, registers above the per-thread or per-block limit,
// shared memory above the per-block limit) or for a spec missing a limit.
absl::StatusOr<int> MaxActiveBlocksPerSm(const habitat::v1::DeviceSpec& device,
                                         const KernelResources& kernel);

// The same, also saying which limit bound (ties go to the earliest in
// OccupancyLimit's order).
absl::StatusOr<Occupancy> ComputeOccupancy(const habitat::v1::DeviceSpec& device,
                                           const KernelResources& kernel);

const char* OccupancyLimitName(OccupancyLimit limit);

}  // namespace habitat
