// The trace in memory, field for field the habitat.v1.Trace message of
// proto/habitat/v1/trace.proto (read that file for each field's meaning).
// The agent builds this on the training machine, which has no protobuf C++
// library, and wire_format.h writes it as habitat.v1.Trace bytes.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace habitat {
namespace agent {

// habitat.v1.Precision; the values are the proto enum's.
enum class Precision : int32_t {
  kUnspecified = 0,
  kFp32 = 1,
  kTf32 = 2,
  kFp16 = 3,
  kBf16 = 4,
  kAmpFp16 = 5,
  kAmpBf16 = 6,
};

struct OriginDevice {
  std::string name;
  std::string device_id;
  uint32_t compute_capability_major = 0;
  uint32_t compute_capability_minor = 0;
  uint32_t sm_count = 0;
  uint64_t memory_bytes = 0;
  uint64_t l2_cache_bytes = 0;
  std::string driver_version;
};

struct FrameworkVersions {
  std::string torch;
  std::string cuda;
  std::string cudnn;
  std::string habitat;
};

// habitat.v1.Module: one module of the model, in named_modules() order.
struct Module {
  std::string path;
  std::string class_name;
  int64_t parameter_bytes = 0;
};

struct Dim3 {
  uint32_t x = 0;
  uint32_t y = 0;
  uint32_t z = 0;
};

struct KernelCounters {
  uint64_t dram_read_bytes = 0;
  uint64_t dram_write_bytes = 0;
  uint64_t flop_fp64 = 0;
  uint64_t flop_fp32 = 0;
  uint64_t flop_fp16 = 0;
  uint64_t flop_bf16 = 0;
  uint64_t flop_tensor = 0;
};

struct Kernel {
  std::string name;
  Dim3 grid;
  Dim3 block;
  uint32_t registers_per_thread = 0;
  uint32_t static_shared_memory_bytes = 0;
  uint32_t dynamic_shared_memory_bytes = 0;
  int64_t duration_ns = 0;
  std::optional<KernelCounters> counters;
  int64_t start_ns = 0;
  int64_t launch_ns = 0;
  bool has_launch_time = false;
  uint32_t stream = 0;
  uint64_t correlation_id = 0;
};

// habitat.v1.MemoryActivity.Kind; the values are the proto enum's.
enum class MemoryKind : int32_t {
  kUnspecified = 0,
  kMemcpyHtoD = 1,
  kMemcpyDtoH = 2,
  kMemcpyDtoD = 3,
  kMemset = 4,
  kOther = 5,
};

struct MemoryActivity {
  MemoryKind kind = MemoryKind::kUnspecified;
  uint64_t bytes = 0;
  int64_t duration_ns = 0;
  int64_t start_ns = 0;
  int64_t launch_ns = 0;
  bool has_launch_time = false;
  uint32_t stream = 0;
};

struct TensorArgument {
  std::vector<int64_t> shape;
  std::string dtype;
};

// habitat.v1.Argument: a name and one value of the `value` oneof.
struct Argument {
  enum class Kind {
    kNone,  // oneof field `none` = true: seen but not representable
    kTensor,
    kScalar,
    kInteger,
    kBoolean,
    kText,
    kIntegers,
  };
  std::string name;
  Kind kind = Kind::kNone;
  TensorArgument tensor;
  double scalar = 0;
  int64_t integer = 0;
  bool boolean = false;
  std::string text;
  std::vector<int64_t> integers;
};

// habitat.v1.BatchRerun: a pass re-run alone at a batch size.
struct BatchRerun {
  uint32_t batch_size = 0;
  int64_t rerun_time_ns = 0;
};

struct Pass {
  int64_t time_ns = 0;
  std::vector<Kernel> kernels;
  std::vector<MemoryActivity> memory;
  std::string recorded_name;
  int64_t rerun_time_ns = 0;
  std::vector<BatchRerun> batch_reruns;  // by increasing batch size
};

struct Operation {
  std::string name;
  std::vector<Argument> arguments;
  Pass forward;  // always written, possibly empty
  std::optional<Pass> backward;
  int64_t sequence_number = -1;
  int64_t cpu_start_ns = 0;
  int64_t cpu_duration_ns = 0;
  // AccumulateGrad only: the index of the operation whose backward pass
  // produced the gradient (habitat.v1.Operation.gradient_producer).
  std::optional<uint32_t> gradient_producer;
};

struct HostEvent {
  std::string name;
  int64_t cpu_start_ns = 0;
  int64_t cpu_duration_ns = 0;
};

// habitat.v1.MathSettings. The optional fields have presence on the wire:
// set ones are written even when false or empty.
struct MathSettings {
  std::optional<bool> matmul_tf32;
  std::optional<bool> cudnn_tf32;
  std::string float32_matmul_precision;
  std::optional<std::string> autocast_dtype;
  std::string source;
};

// habitat.v1.PassMemory: the allocator around one outermost recorded range
// (a forward, or one autograd node of a backward), in bytes.
struct PassMemory {
  uint32_t operation = 0;  // index into Trace::operations
  bool backward = false;
  int64_t allocated_bytes_before = 0;
  int64_t allocated_bytes_after = 0;
  // The region's peak allocated so far, read when the range ended.
  int64_t peak_allocated_bytes_after = 0;
};

// habitat.v1.MemoryUsage, in bytes. The optional fields have presence on
// the wire, as in MathSettings: set ones are written even when 0.
struct MemoryUsage {
  std::optional<int64_t> allocated_bytes_at_start;
  std::optional<int64_t> peak_allocated_bytes;
  std::optional<int64_t> peak_reserved_bytes;
  std::string source;
  // In the order the ranges began; empty when not recorded.
  std::vector<PassMemory> passes;
};

struct Trace {
  uint32_t format_version = 1;
  OriginDevice origin;
  FrameworkVersions frameworks;
  std::string model_name;
  uint32_t batch_size = 0;
  Precision precision = Precision::kUnspecified;
  std::vector<Operation> operations;
  int64_t iteration_wall_ns = 0;
  int64_t iteration_gpu_busy_ns = 0;
  std::vector<Kernel> unattributed_kernels;
  std::vector<HostEvent> host_events;
  std::string source;
  std::map<std::string, std::string> metadata;
  std::optional<MathSettings> math;   // unset: not known
  std::optional<MemoryUsage> memory;  // unset: not known
  std::vector<Module> modules;        // empty: the model was not given
};

}  // namespace agent
}  // namespace habitat
