#include "agent/capture/wire_format.h"

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

namespace habitat {
namespace agent {
namespace {

enum WireType : uint32_t {
  kVarint = 0,
  kFixed64 = 1,
  kLengthDelimited = 2,
};

// Appends fields to one message's bytes.
class Writer {
 public:
  const std::string& bytes() const { return out_; }

  void Varint(uint64_t v) {
    while (v >= 0x80) {
      out_.push_back(static_cast<char>((v & 0x7f) | 0x80));
      v >>= 7;
    }
    out_.push_back(static_cast<char>(v));
  }
  void Tag(uint32_t field, WireType type) { Varint((uint64_t{field} << 3) | type); }
  // int64/uint64/uint32/enum/bool as varint; negative int64 as its two's
  // complement (10 bytes), as protobuf does.
  void ForceVarint(uint32_t field, uint64_t v) {
    Tag(field, kVarint);
    Varint(v);
  }
  void U64(uint32_t field, uint64_t v) {
    if (v != 0) ForceVarint(field, v);
  }
  void I64(uint32_t field, int64_t v) { U64(field, static_cast<uint64_t>(v)); }
  void Bool(uint32_t field, bool v) { U64(field, v ? 1 : 0); }
  void Enum(uint32_t field, int32_t v) {
    // Negative enum values are sign-extended to 64 bits on the wire.
    U64(field, static_cast<uint64_t>(static_cast<int64_t>(v)));
  }
  void ForceDouble(uint32_t field, double v) {
    Tag(field, kFixed64);
    uint64_t bits;
    std::memcpy(&bits, &v, sizeof(bits));
    for (int i = 0; i < 8; ++i) {
      out_.push_back(static_cast<char>((bits >> (8 * i)) & 0xff));
    }
  }
  void ForceBytes(uint32_t field, const std::string& s) {
    Tag(field, kLengthDelimited);
    Varint(s.size());
    out_.append(s);
  }
  void String(uint32_t field, const std::string& s) {
    if (!s.empty()) ForceBytes(field, s);
  }
  void Message(uint32_t field, const Writer& w) { ForceBytes(field, w.out_); }
  void PackedI64(uint32_t field, const std::vector<int64_t>& values) {
    if (values.empty()) return;
    Writer inner;
    for (int64_t v : values) inner.Varint(static_cast<uint64_t>(v));
    Message(field, inner);
  }

 private:
  std::string out_;
};

Writer WriteDim3(const Dim3& d) {
  Writer w;
  w.U64(1, d.x);
  w.U64(2, d.y);
  w.U64(3, d.z);
  return w;
}

Writer WriteCounters(const KernelCounters& c) {
  Writer w;
  w.U64(1, c.dram_read_bytes);
  w.U64(2, c.dram_write_bytes);
  w.U64(3, c.flop_fp64);
  w.U64(4, c.flop_fp32);
  w.U64(5, c.flop_fp16);
  w.U64(6, c.flop_bf16);
  w.U64(7, c.flop_tensor);
  return w;
}

Writer WriteKernel(const Kernel& k) {
  Writer w;
  w.String(1, k.name);
  w.Message(2, WriteDim3(k.grid));
  w.Message(3, WriteDim3(k.block));
  w.U64(4, k.registers_per_thread);
  w.U64(5, k.static_shared_memory_bytes);
  w.U64(6, k.dynamic_shared_memory_bytes);
  w.I64(7, k.duration_ns);
  if (k.counters.has_value()) w.Message(8, WriteCounters(*k.counters));
  w.I64(9, k.start_ns);
  w.I64(10, k.launch_ns);
  w.Bool(11, k.has_launch_time);
  w.U64(12, k.stream);
  w.U64(13, k.correlation_id);
  return w;
}

Writer WriteMemory(const MemoryActivity& m) {
  Writer w;
  w.Enum(1, static_cast<int32_t>(m.kind));
  w.U64(2, m.bytes);
  w.I64(3, m.duration_ns);
  w.I64(4, m.start_ns);
  w.I64(5, m.launch_ns);
  w.Bool(6, m.has_launch_time);
  w.U64(7, m.stream);
  return w;
}

Writer WriteArgument(const Argument& a) {
  Writer w;
  w.String(1, a.name);
  // Oneof members have presence: written even when they hold the default.
  switch (a.kind) {
    case Argument::Kind::kTensor: {
      Writer t;
      t.PackedI64(1, a.tensor.shape);
      t.String(2, a.tensor.dtype);
      w.Message(2, t);
      break;
    }
    case Argument::Kind::kScalar:
      w.ForceDouble(3, a.scalar);
      break;
    case Argument::Kind::kInteger:
      w.ForceVarint(4, static_cast<uint64_t>(a.integer));
      break;
    case Argument::Kind::kBoolean:
      w.ForceVarint(5, a.boolean ? 1 : 0);
      break;
    case Argument::Kind::kText:
      w.ForceBytes(6, a.text);
      break;
    case Argument::Kind::kIntegers: {
      Writer list;
      list.PackedI64(1, a.integers);
      w.Message(7, list);
      break;
    }
    case Argument::Kind::kNone:
      w.ForceVarint(8, 1);
      break;
  }
  return w;
}

Writer WritePass(const Pass& p) {
  Writer w;
  w.I64(1, p.time_ns);
  for (const Kernel& k : p.kernels) w.Message(2, WriteKernel(k));
  for (const MemoryActivity& m : p.memory) w.Message(3, WriteMemory(m));
  w.String(4, p.recorded_name);
  w.I64(5, p.rerun_time_ns);
  for (const BatchRerun& r : p.batch_reruns) {
    Writer rerun;
    rerun.U64(1, r.batch_size);
    rerun.I64(2, r.rerun_time_ns);
    w.Message(6, rerun);
  }
  return w;
}

Writer WriteOperation(const Operation& o) {
  Writer w;
  w.String(1, o.name);
  for (const Argument& a : o.arguments) w.Message(2, WriteArgument(a));
  w.Message(3, WritePass(o.forward));
  if (o.backward.has_value()) w.Message(4, WritePass(*o.backward));
  w.I64(6, o.sequence_number);
  w.I64(7, o.cpu_start_ns);
  w.I64(8, o.cpu_duration_ns);
  if (o.gradient_producer.has_value()) w.ForceVarint(9, *o.gradient_producer);
  return w;
}

Writer WriteOrigin(const OriginDevice& d) {
  Writer w;
  w.String(1, d.name);
  w.String(2, d.device_id);
  w.U64(3, d.compute_capability_major);
  w.U64(4, d.compute_capability_minor);
  w.U64(5, d.sm_count);
  w.U64(6, d.memory_bytes);
  w.U64(7, d.l2_cache_bytes);
  w.String(8, d.driver_version);
  return w;
}

Writer WriteMath(const MathSettings& m) {
  Writer w;
  // proto3 `optional` fields: present means written, default value or not.
  if (m.matmul_tf32.has_value()) w.ForceVarint(1, *m.matmul_tf32 ? 1 : 0);
  if (m.cudnn_tf32.has_value()) w.ForceVarint(2, *m.cudnn_tf32 ? 1 : 0);
  w.String(3, m.float32_matmul_precision);
  if (m.autocast_dtype.has_value()) w.ForceBytes(4, *m.autocast_dtype);
  w.String(5, m.source);
  return w;
}

Writer WriteMemoryUsage(const MemoryUsage& m) {
  Writer w;
  // proto3 `optional` fields: present means written, 0 or not.
  auto optional = [&w](uint32_t field, const std::optional<int64_t>& v) {
    if (v.has_value()) w.ForceVarint(field, static_cast<uint64_t>(*v));
  };
  optional(1, m.allocated_bytes_at_start);
  optional(2, m.peak_allocated_bytes);
  optional(3, m.peak_reserved_bytes);
  w.String(5, m.source);
  for (const PassMemory& p : m.passes) {
    Writer e;
    e.U64(1, p.operation);
    e.Bool(2, p.backward);
    e.I64(3, p.allocated_bytes_before);
    e.I64(4, p.allocated_bytes_after);
    e.I64(5, p.peak_allocated_bytes_after);
    w.Message(6, e);
  }
  return w;
}

Writer WriteFrameworks(const FrameworkVersions& f) {
  Writer w;
  w.String(1, f.torch);
  w.String(2, f.cuda);
  w.String(3, f.cudnn);
  w.String(4, f.habitat);
  return w;
}

}  // namespace

std::string SerializeTrace(const Trace& t) {
  Writer w;
  w.U64(1, t.format_version);
  w.Message(2, WriteOrigin(t.origin));
  w.Message(3, WriteFrameworks(t.frameworks));
  w.String(4, t.model_name);
  w.U64(5, t.batch_size);
  w.Enum(6, static_cast<int32_t>(t.precision));
  for (const Operation& o : t.operations) w.Message(7, WriteOperation(o));
  w.I64(8, t.iteration_wall_ns);
  w.I64(9, t.iteration_gpu_busy_ns);
  for (const Kernel& k : t.unattributed_kernels) w.Message(10, WriteKernel(k));
  for (const HostEvent& h : t.host_events) {
    Writer e;
    e.String(1, h.name);
    e.I64(2, h.cpu_start_ns);
    e.I64(3, h.cpu_duration_ns);
    w.Message(11, e);
  }
  w.String(12, t.source);
  for (const auto& [key, value] : t.metadata) {
    // Map entries always carry both fields, as protobuf writes them.
    Writer entry;
    entry.ForceBytes(1, key);
    entry.ForceBytes(2, value);
    w.Message(13, entry);
  }
  if (t.math.has_value()) w.Message(14, WriteMath(*t.math));
  if (t.memory.has_value()) w.Message(15, WriteMemoryUsage(*t.memory));
  for (const Module& m : t.modules) {
    Writer e;
    e.String(1, m.path);
    e.String(2, m.class_name);
    e.I64(3, m.parameter_bytes);
    w.Message(16, e);
  }
  return w.bytes();
}

}  // namespace agent
}  // namespace habitat
