#include "core/devices/device_database.h"

#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/spelling.h"
#include "common/status_macros.h"
#include "core/devices/text_proto_file.h"

namespace habitat {
namespace {

using habitat::v1::DeviceSpec;

// Sanity bounds: wide enough for any GPU we can foresee, narrow enough to
// catch unit mistakes (MB for bytes, GHz for MHz, TB/s for GB/s).
constexpr double kMaxBandwidthGbps = 100000;
constexpr double kMaxTflops = 100000;
constexpr uint64_t kMaxMemoryBytes = uint64_t{1} << 44;  // 16 TiB
constexpr uint64_t kMaxL2Bytes = uint64_t{1} << 32;      // 4 GiB
constexpr uint64_t kMaxSharedPerSm = uint64_t{1} << 24;  // 16 MiB

std::string Basename(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// Driver names differ in case and padding between driver versions.
std::string NormalizeDriverName(absl::string_view name) {
  return absl::AsciiStrToLower(absl::StripAsciiWhitespace(name));
}

// Builds "<origin>: GPU "<id>": <field> <rule> (got <value>)".
class SpecChecker {
 public:
  SpecChecker(absl::string_view origin, const DeviceSpec& spec)
      : label_(absl::StrCat(origin, ": GPU \"", spec.id(), "\"")) {}

  template <typename T>
  absl::Status Fail(absl::string_view field, absl::string_view rule, const T& got) const {
    return absl::InvalidArgumentError(
        absl::StrCat(label_, ": ", field, " ", rule, " (got ", got, ")"));
  }

  absl::Status NonEmpty(absl::string_view field, absl::string_view value) const {
    if (!value.empty()) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat(label_, ": ", field, " must not be empty"));
  }

  absl::Status InRange(absl::string_view field, uint64_t value, uint64_t lo, uint64_t hi) const {
    if (value >= lo && value <= hi) return absl::OkStatus();
    return Fail(field, absl::StrCat("must be in [", lo, ", ", hi, "]"), value);
  }

  // finite, > 0 and < upper.
  absl::Status Positive(absl::string_view field, double value, double upper) const {
    if (std::isfinite(value) && value > 0 && value < upper) {
      return absl::OkStatus();
    }
    return Fail(field, absl::StrCat("must be > 0 and < ", upper), value);
  }

  // finite, >= 0 and < upper (0 means "none" or "unknown").
  absl::Status NonNegative(absl::string_view field, double value, double upper) const {
    if (std::isfinite(value) && value >= 0 && value < upper) {
      return absl::OkStatus();
    }
    return Fail(field, absl::StrCat("must be >= 0 and < ", upper), value);
  }

 private:
  std::string label_;
};

absl::Status ValidateIdentity(const SpecChecker& c, const DeviceSpec& s) {
  HABITAT_RETURN_IF_ERROR(c.NonEmpty("id", s.id()));
  for (char ch : s.id()) {
    if (!absl::ascii_isalnum(ch) && ch != '-' && ch != '_' && ch != '.') {
      return c.Fail("id", "may contain only letters, digits, '-', '_', '.'",
                    absl::StrCat("\"", s.id(), "\""));
    }
  }
  HABITAT_RETURN_IF_ERROR(c.NonEmpty("display_name", s.display_name()));
  HABITAT_RETURN_IF_ERROR(c.NonEmpty("architecture", s.architecture()));
  HABITAT_RETURN_IF_ERROR(c.NonEmpty("source", s.source()));
  // A test-only partition of a real GPU need not be resolvable from a trace.
  if (s.driver_names().empty() && !s.test_only()) {
    return c.Fail("driver_names", "must list at least one name", 0);
  }
  for (int i = 0; i < s.driver_names_size(); ++i) {
    if (absl::StripAsciiWhitespace(s.driver_names(i)).empty()) {
      return c.Fail(absl::StrCat("driver_names[", i, "]"), "must not be empty", "\"\"");
    }
  }
  HABITAT_RETURN_IF_ERROR(
      c.InRange("compute_capability_major", s.compute_capability_major(), 1, 20));
  HABITAT_RETURN_IF_ERROR(
      c.InRange("compute_capability_minor", s.compute_capability_minor(), 0, 9));
  return absl::OkStatus();
}

absl::Status ValidateOccupancyLimits(const SpecChecker& c, const DeviceSpec& s) {
  HABITAT_RETURN_IF_ERROR(c.InRange("sm_count", s.sm_count(), 1, 1000));
  if (s.warp_size() != 32) {
    return c.Fail("warp_size", "must be 32", s.warp_size());
  }
  HABITAT_RETURN_IF_ERROR(c.InRange("max_warps_per_sm", s.max_warps_per_sm(), 1, 128));
  HABITAT_RETURN_IF_ERROR(c.InRange("max_threads_per_sm", s.max_threads_per_sm(), 32, 4096));
  if (s.max_threads_per_sm() != s.max_warps_per_sm() * s.warp_size()) {
    return c.Fail("max_threads_per_sm",
                  absl::StrCat("must equal max_warps_per_sm * warp_size = ",
                               s.max_warps_per_sm() * s.warp_size()),
                  s.max_threads_per_sm());
  }
  HABITAT_RETURN_IF_ERROR(c.InRange("max_blocks_per_sm", s.max_blocks_per_sm(), 1, 128));
  HABITAT_RETURN_IF_ERROR(c.InRange("max_threads_per_block", s.max_threads_per_block(),
                                    s.warp_size(), s.max_threads_per_sm()));
  if (s.max_threads_per_block() % s.warp_size() != 0) {
    return c.Fail("max_threads_per_block", "must be a multiple of warp_size",
                  s.max_threads_per_block());
  }

  HABITAT_RETURN_IF_ERROR(c.InRange("registers_per_sm", s.registers_per_sm(), 1024, 1 << 20));
  HABITAT_RETURN_IF_ERROR(
      c.InRange("max_registers_per_block", s.max_registers_per_block(), 1, s.registers_per_sm()));
  HABITAT_RETURN_IF_ERROR(
      c.InRange("max_registers_per_thread", s.max_registers_per_thread(), 1, 1024));
  HABITAT_RETURN_IF_ERROR(
      c.InRange("register_allocation_unit", s.register_allocation_unit(), 1, s.registers_per_sm()));

  HABITAT_RETURN_IF_ERROR(
      c.InRange("shared_memory_per_sm_bytes", s.shared_memory_per_sm_bytes(), 1, kMaxSharedPerSm));
  HABITAT_RETURN_IF_ERROR(c.InRange("max_shared_memory_per_block_bytes",
                                    s.max_shared_memory_per_block_bytes(), 1,
                                    s.shared_memory_per_sm_bytes()));
  // A block's usable shared memory plus the driver's reservation must fit in
  // the SM, or not even one such block could be resident.
  HABITAT_RETURN_IF_ERROR(c.InRange(
      "reserved_shared_memory_per_block_bytes", s.reserved_shared_memory_per_block_bytes(), 0,
      s.shared_memory_per_sm_bytes() - s.max_shared_memory_per_block_bytes()));
  const uint32_t unit = s.shared_memory_allocation_unit_bytes();
  if (unit == 0 || (unit & (unit - 1)) != 0 || unit > s.max_shared_memory_per_block_bytes()) {
    return c.Fail("shared_memory_allocation_unit_bytes",
                  "must be a power of two <= max_shared_memory_per_block_bytes", unit);
  }
  return absl::OkStatus();
}

absl::Status ValidateThroughput(const SpecChecker& c, const DeviceSpec& s) {
  HABITAT_RETURN_IF_ERROR(c.InRange("boost_clock_mhz", s.boost_clock_mhz(), 1, 10000));
  HABITAT_RETURN_IF_ERROR(c.InRange("base_clock_mhz", s.base_clock_mhz(), 1, s.boost_clock_mhz()));
  if (s.sustained_clock_mhz() != 0) {
    HABITAT_RETURN_IF_ERROR(c.InRange("sustained_clock_mhz", s.sustained_clock_mhz(),
                                      s.base_clock_mhz(), 2 * s.boost_clock_mhz()));
    HABITAT_RETURN_IF_ERROR(c.NonEmpty("sustained_clock_source", s.sustained_clock_source()));
  }
  HABITAT_RETURN_IF_ERROR(c.InRange("memory_bytes", s.memory_bytes(), 1, kMaxMemoryBytes));
  HABITAT_RETURN_IF_ERROR(c.InRange("l2_cache_bytes", s.l2_cache_bytes(), 1, kMaxL2Bytes));
  HABITAT_RETURN_IF_ERROR(
      c.Positive("memory_bandwidth_gbps", s.memory_bandwidth_gbps(), kMaxBandwidthGbps));
  HABITAT_RETURN_IF_ERROR(c.NonNegative("measured_memory_bandwidth_gbps",
                                        s.measured_memory_bandwidth_gbps(), kMaxBandwidthGbps));
  // A measured copy can approach the datasheet peak but not beat it; a larger
  // value means a unit or bookkeeping error (e.g. counting bytes twice).
  if (s.measured_memory_bandwidth_gbps() > s.memory_bandwidth_gbps()) {
    return c.Fail(
        "measured_memory_bandwidth_gbps",
        absl::StrCat("must not exceed memory_bandwidth_gbps (", s.memory_bandwidth_gbps(), ")"),
        s.measured_memory_bandwidth_gbps());
  }
  HABITAT_RETURN_IF_ERROR(c.Positive("peak_fp32_tflops", s.peak_fp32_tflops(), kMaxTflops));
  HABITAT_RETURN_IF_ERROR(c.NonNegative("peak_tf32_tflops", s.peak_tf32_tflops(), kMaxTflops));
  HABITAT_RETURN_IF_ERROR(
      c.NonNegative("peak_fp16_tensor_tflops", s.peak_fp16_tensor_tflops(), kMaxTflops));
  HABITAT_RETURN_IF_ERROR(
      c.NonNegative("peak_bf16_tensor_tflops", s.peak_bf16_tensor_tflops(), kMaxTflops));
  return absl::OkStatus();
}

// The driver's total is optional (0: derated from the datasheet) but can
// only be below the datasheet capacity, and must say where it was read.
absl::Status ValidateDriverMemory(const SpecChecker& c, const DeviceSpec& s) {
  if (s.driver_memory_bytes() == 0) return absl::OkStatus();
  HABITAT_RETURN_IF_ERROR(
      c.InRange("driver_memory_bytes", s.driver_memory_bytes(), 1, s.memory_bytes()));
  return c.NonEmpty("driver_memory_source", s.driver_memory_source());
}

// The interconnect is optional (multi-GPU predictions are then refused);
// present, it needs a bandwidth, a node size and where they come from.
absl::Status ValidateInterconnect(const SpecChecker& c, const DeviceSpec& s) {
  if (!s.has_interconnect()) return absl::OkStatus();
  const habitat::v1::Interconnect& link = s.interconnect();
  HABITAT_RETURN_IF_ERROR(c.Positive("interconnect.allreduce_busbw_gbps",
                                     link.allreduce_busbw_gbps(), kMaxBandwidthGbps));
  HABITAT_RETURN_IF_ERROR(
      c.InRange("interconnect.max_gpus_per_node", link.max_gpus_per_node(), 1, 64));
  HABITAT_RETURN_IF_ERROR(c.NonNegative("interconnect.nvls_allreduce_busbw_gbps",
                                        link.nvls_allreduce_busbw_gbps(), kMaxBandwidthGbps));
  if (link.nvls_allreduce_busbw_gbps() > 0 && link.max_gpus_per_node() < 2) {
    return c.Fail("interconnect.nvls_allreduce_busbw_gbps",
                  "needs max_gpus_per_node >= 2 (it is a full node's figure)",
                  link.nvls_allreduce_busbw_gbps());
  }
  HABITAT_RETURN_IF_ERROR(c.NonNegative("interconnect.allreduce_busbw_low_gbps",
                                        link.allreduce_busbw_low_gbps(), kMaxBandwidthGbps));
  if (link.allreduce_busbw_low_gbps() >= link.allreduce_busbw_gbps()) {
    return c.Fail("interconnect.allreduce_busbw_low_gbps",
                  "must be below allreduce_busbw_gbps (the lowest published, beside the usual)",
                  link.allreduce_busbw_low_gbps());
  }
  return c.NonEmpty("interconnect.source", link.source());
}

// The kernel-scaling constants are optional (0: not measured, core/scaling
// derives a default), but a measured one must be plausible and say where it
// came from.
absl::Status ValidateScalingConstants(const SpecChecker& c, const DeviceSpec& s) {
  HABITAT_RETURN_IF_ERROR(
      c.NonNegative("streaming_bandwidth_gbps", s.streaming_bandwidth_gbps(), kMaxBandwidthGbps));
  constexpr int64_t kMaxLatencyNs = 1'000'000'000;  // 1 s
  const std::pair<const char*, int64_t> latencies[] = {
      {"op_fixed_latency_ns", s.op_fixed_latency_ns()},
      {"op_latency_floor_ns", s.op_latency_floor_ns()},
      {"kernel_fixed_latency_ns", s.kernel_fixed_latency_ns()},
  };
  bool any_set = s.streaming_bandwidth_gbps() > 0;
  for (const auto& [field, value] : latencies) {
    if (value < 0 || value > kMaxLatencyNs) {
      return c.Fail(field, absl::StrCat("must be in [0, ", kMaxLatencyNs, "]"), value);
    }
    any_set = any_set || value > 0;
  }
  if (any_set && s.scaling_constants_source().empty()) {
    return c.Fail("scaling_constants_source",
                  "must say how the kernel-scaling constants were measured", "\"\"");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateDeviceSpec(const DeviceSpec& spec, absl::string_view origin) {
  const SpecChecker checker(origin, spec);
  HABITAT_RETURN_IF_ERROR(ValidateIdentity(checker, spec));
  HABITAT_RETURN_IF_ERROR(ValidateOccupancyLimits(checker, spec));
  HABITAT_RETURN_IF_ERROR(ValidateThroughput(checker, spec));
  HABITAT_RETURN_IF_ERROR(ValidateDriverMemory(checker, spec));
  HABITAT_RETURN_IF_ERROR(ValidateInterconnect(checker, spec));
  return ValidateScalingConstants(checker, spec);
}

absl::StatusOr<DeviceDatabase> DeviceDatabase::LoadFromFile(const std::string& path) {
  habitat::v1::DeviceDatabase proto;
  HABITAT_RETURN_IF_ERROR(ReadTextProtoFile(path, &proto));
  return FromProto(std::move(proto), Basename(path));
}

absl::StatusOr<DeviceDatabase> DeviceDatabase::FromProto(habitat::v1::DeviceDatabase proto,
                                                         absl::string_view origin) {
  if (proto.devices().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(origin, ": lists no devices"));
  }
  DeviceDatabase db;
  db.devices_.reserve(proto.devices_size());
  for (DeviceSpec& spec : *proto.mutable_devices()) {
    HABITAT_RETURN_IF_ERROR(ValidateDeviceSpec(spec, origin));
    const size_t index = db.devices_.size();
    if (!db.by_id_.emplace(spec.id(), index).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(origin, ": GPU \"", spec.id(), "\": id is used more than once"));
    }
    for (const std::string& name : spec.driver_names()) {
      auto [it, inserted] = db.by_driver_name_.emplace(NormalizeDriverName(name), index);
      if (!inserted) {
        return absl::InvalidArgumentError(
            absl::StrCat(origin, ": GPU \"", spec.id(), "\": driver_names entry \"", name,
                         "\" is also listed by GPU \"", db.devices_[it->second].id(), "\""));
      }
    }
    db.devices_.push_back(std::move(spec));
  }
  return db;
}

const DeviceSpec* DeviceDatabase::Find(absl::string_view id) const {
  auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : &devices_[it->second];
}

absl::StatusOr<const DeviceSpec*> DeviceDatabase::Get(absl::string_view id) const {
  if (const DeviceSpec* spec = Find(id)) return spec;
  for (const DeviceSpec& spec : devices_) {
    if (absl::EqualsIgnoreCase(spec.id(), id)) return &spec;
  }
  if (const DeviceSpec* spec = FindByDriverName(id)) return spec;
  std::vector<std::string> ids;
  for (const DeviceSpec& spec : devices_) ids.push_back(spec.id());
  return absl::NotFoundError(absl::StrCat("unknown GPU id \"", id, "\"", DidYouMean(id, ids),
                                          "; known ids: ", KnownIds()));
}

const DeviceSpec* DeviceDatabase::FindByDriverName(absl::string_view name) const {
  auto it = by_driver_name_.find(NormalizeDriverName(name));
  return it == by_driver_name_.end() ? nullptr : &devices_[it->second];
}

std::string DeviceDatabase::KnownIds() const {
  return absl::StrJoin(devices_, ", ",
                       [](std::string* out, const DeviceSpec& spec) { out->append(spec.id()); });
}

}  // namespace habitat
