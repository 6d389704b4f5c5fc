#include "core/scaling/occupancy.h"

#include <algorithm>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace habitat {
namespace {

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t RoundUp(int64_t a, int64_t unit) { return CeilDiv(a, unit) * unit; }

// Register files are split between the SM's warp schedulers and a warp's
// registers come from one partition, so the per-SM register limit is applied
// per partition (CUDA occupancy calculator, cuda_occupancy.h: two partitions
// on compute capability 6.0, four on every other supported one).
int RegisterPartitions(const habitat::v1::DeviceSpec& device) {
  if (device.compute_capability_major() == 6 && device.compute_capability_minor() == 0) {
    return 2;
  }
  return 4;
}

absl::Status RequirePositive(const habitat::v1::DeviceSpec& device, const char* field,
                             uint64_t value) {
  if (value == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "device '", device.id(), "': ", field, " must be positive for the occupancy calculation"));
  }
  return absl::OkStatus();
}

}  // namespace

const char* OccupancyLimitName(OccupancyLimit limit) {
  switch (limit) {
    case OccupancyLimit::kBlocksPerSm:
      return "max_blocks_per_sm";
    case OccupancyLimit::kWarpsPerSm:
      return "max_warps_per_sm";
    case OccupancyLimit::kRegisters:
      return "registers";
    case OccupancyLimit::kSharedMemory:
      return "shared_memory";
  }
  return "unknown";
}

absl::StatusOr<Occupancy> ComputeOccupancy(const habitat::v1::DeviceSpec& device,
                                           const KernelResources& kernel) {
  for (const auto& [field, value] :
       {std::pair<const char*, uint64_t>{"warp_size", device.warp_size()},
        {"max_blocks_per_sm", device.max_blocks_per_sm()},
        {"max_warps_per_sm", device.max_warps_per_sm()},
        {"max_threads_per_block", device.max_threads_per_block()},
        {"registers_per_sm", device.registers_per_sm()},
        {"register_allocation_unit", device.register_allocation_unit()},
        {"shared_memory_per_sm_bytes", device.shared_memory_per_sm_bytes()},
        {"shared_memory_allocation_unit_bytes", device.shared_memory_allocation_unit_bytes()}}) {
    if (auto s = RequirePositive(device, field, value); !s.ok()) return s;
  }

  if (kernel.threads_per_block <= 0 ||
      static_cast<uint64_t>(kernel.threads_per_block) > device.max_threads_per_block()) {
    return absl::InvalidArgumentError(
        absl::StrCat("threads_per_block = ", kernel.threads_per_block, " is outside 1..",
                     device.max_threads_per_block(), " on device '", device.id(), "'"));
  }
  const int64_t max_regs_per_thread =
      device.max_registers_per_thread() > 0 ? device.max_registers_per_thread() : 255;
  if (kernel.registers_per_thread < 0 || kernel.registers_per_thread > max_regs_per_thread) {
    return absl::InvalidArgumentError(
        absl::StrCat("registers_per_thread = ", kernel.registers_per_thread, " is outside 0..",
                     max_regs_per_thread, " on device '", device.id(), "'"));
  }
  if (kernel.static_shared_memory_bytes < 0 || kernel.dynamic_shared_memory_bytes < 0) {
    return absl::InvalidArgumentError(
        "static_shared_memory_bytes and dynamic_shared_memory_bytes must not "
        "be negative");
  }
  const int64_t user_smem = kernel.static_shared_memory_bytes + kernel.dynamic_shared_memory_bytes;
  if (user_smem > static_cast<int64_t>(device.max_shared_memory_per_block_bytes())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "shared memory per block (static ", kernel.static_shared_memory_bytes, " + dynamic ",
        kernel.dynamic_shared_memory_bytes, " bytes) exceeds ",
        "max_shared_memory_per_block_bytes = ", device.max_shared_memory_per_block_bytes(),
        " on device '", device.id(), "'"));
  }

  const int64_t warps_per_block = CeilDiv(kernel.threads_per_block, device.warp_size());

  Occupancy best{static_cast<int>(device.max_blocks_per_sm()), OccupancyLimit::kBlocksPerSm};
  auto consider = [&best](int64_t blocks, OccupancyLimit limit) {
    if (blocks < best.blocks_per_sm) {
      best.blocks_per_sm = static_cast<int>(blocks);
      best.limited_by = limit;
    }
  };

  consider(device.max_warps_per_sm() / warps_per_block, OccupancyLimit::kWarpsPerSm);

  if (kernel.registers_per_thread > 0) {
    const int64_t regs_per_warp = RoundUp(int64_t{kernel.registers_per_thread} * device.warp_size(),
                                          device.register_allocation_unit());
    if (device.max_registers_per_block() > 0 &&
        regs_per_warp * warps_per_block > static_cast<int64_t>(device.max_registers_per_block())) {
      return absl::InvalidArgumentError(
          absl::StrCat("registers_per_thread = ", kernel.registers_per_thread, " with ",
                       kernel.threads_per_block, " threads needs ", regs_per_warp * warps_per_block,
                       " registers per block, above max_registers_per_block = ",
                       device.max_registers_per_block(), " on device '", device.id(), "'"));
    }
    const int partitions = RegisterPartitions(device);
    const int64_t warps_per_partition = (device.registers_per_sm() / partitions) / regs_per_warp;
    consider(warps_per_partition * partitions / warps_per_block, OccupancyLimit::kRegisters);
  }

  // The driver reserves some shared memory for every block (1 KiB since
  // compute capability 8.0), even for kernels that use none.
  const int64_t smem_per_block =
      RoundUp(user_smem + device.reserved_shared_memory_per_block_bytes(),
              device.shared_memory_allocation_unit_bytes());
  if (smem_per_block > 0) {
    consider(device.shared_memory_per_sm_bytes() / smem_per_block, OccupancyLimit::kSharedMemory);
  }
  return best;
}

absl::StatusOr<int> MaxActiveBlocksPerSm(const habitat::v1::DeviceSpec& device,
                                         const KernelResources& kernel) {
  absl::StatusOr<Occupancy> occupancy = ComputeOccupancy(device, kernel);
  if (!occupancy.ok()) return occupancy.status();
  return occupancy->blocks_per_sm;
}

}  // namespace habitat
