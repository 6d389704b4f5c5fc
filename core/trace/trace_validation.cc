#include "core/trace/trace_validation.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/status_macros.h"

namespace habitat {
namespace {

using habitat::v1::Kernel;
using habitat::v1::MemoryActivity;
using habitat::v1::Operation;
using habitat::v1::Pass;
using habitat::v1::Trace;

absl::Status Invalid(absl::string_view field, absl::string_view rule) {
  return absl::InvalidArgumentError(absl::StrCat(field, " ", rule));
}

// At most `limit` entries in the repeated field `field`.
absl::Status CheckEntries(const std::string& field, int64_t count, int64_t limit) {
  if (count <= limit) return absl::OkStatus();
  return Invalid(field, absl::StrCat("has ", count, " entries; the limit is ", limit));
}

// Decodes the UTF-8 sequence at byte `i` of `s` into `*code_point` and
// returns its length; 0 when it is not well-formed UTF-8 (RFC 3629): a stray
// continuation byte, a truncated sequence, an overlong form (C1 85 spelling
// U+0045, E0 82 85 spelling U+0085), a UTF-16 surrogate, a code point above
// U+10FFFF, or a 5- or 6-byte form.
int DecodeUtf8(absl::string_view s, size_t i, char32_t* code_point) {
  const unsigned char c = static_cast<unsigned char>(s[i]);
  if (c < 0x80) {
    *code_point = c;
    return 1;
  }
  int length;
  char32_t value;
  char32_t minimum;
  if ((c & 0xE0) == 0xC0) {
    length = 2, value = c & 0x1F, minimum = 0x80;
  } else if ((c & 0xF0) == 0xE0) {
    length = 3, value = c & 0x0F, minimum = 0x800;
  } else if ((c & 0xF8) == 0xF0) {
    length = 4, value = c & 0x07, minimum = 0x10000;
  } else {
    return 0;
  }
  if (i + length > s.size()) return 0;
  for (int k = 1; k < length; ++k) {
    const unsigned char next = static_cast<unsigned char>(s[i + k]);
    if ((next & 0xC0) != 0x80) return 0;
    value = (value << 6) | (next & 0x3F);
  }
  if (value < minimum || value > 0x10FFFF || (value >= 0xD800 && value <= 0xDFFF)) return 0;
  *code_point = value;
  return length;
}

// Unicode's Bidi_Control characters: U+061C ARABIC LETTER MARK, U+200E and
// U+200F (left-to-right and right-to-left marks), U+202A-U+202E
// (embeddings, overrides) and U+2066-U+2069 (isolates).
bool IsBidiControl(char32_t c) {
  return c == 0x061C || c == 0x200E || c == 0x200F || (c >= 0x202A && c <= 0x202E) ||
         (c >= 0x2066 && c <= 0x2069);
}

std::string CodePoint(char32_t c) {
  std::string hex = absl::StrCat(absl::Hex(static_cast<uint32_t>(c), absl::kZeroPad4));
  for (char& h : hex) h = absl::ascii_toupper(static_cast<unsigned char>(h));
  return absl::StrCat("U+", hex);
}

// Names end up in tables, JSON, logs and metric labels: require well-formed
// UTF-8 of a bounded length without anything that breaks a line or
// reorders text: no C0 or C1 control characters (U+0085 NEXT LINE is one),
// no U+2028/U+2029 (line and paragraph separators), no bidi controls.
absl::Status CheckName(const std::string& field, const std::string& name, const TraceLimits& limits,
                       bool required) {
  if (required && name.empty()) return Invalid(field, "must not be empty");
  if (static_cast<int64_t>(name.size()) > limits.max_name_bytes) {
    return Invalid(
        field, absl::StrCat("is ", name.size(), " bytes; the limit is ", limits.max_name_bytes));
  }
  for (size_t i = 0; i < name.size();) {
    char32_t c = 0;
    const int length = DecodeUtf8(name, i, &c);
    if (length == 0) return Invalid(field, absl::StrCat("is not valid UTF-8 at byte ", i));
    if (c < 0x20 || c == 0x7f) {
      return Invalid(field, absl::StrCat("contains control character 0x",
                                         absl::Hex(static_cast<uint32_t>(c)), " at byte ", i));
    }
    if (c >= 0x80 && c <= 0x9F) {
      return Invalid(field, absl::StrCat("contains control character ", CodePoint(c),
                                         c == 0x85 ? " (NEXT LINE)" : "", " at byte ", i,
                                         " (C1 controls are not text)"));
    }
    if (c == 0x2028 || c == 0x2029) {
      return Invalid(field, absl::StrCat("contains ", CodePoint(c),
                                         c == 0x2028 ? " LINE SEPARATOR" : " PARAGRAPH SEPARATOR",
                                         " at byte ", i, " (it breaks lines like a newline)"));
    }
    if (IsBidiControl(c)) {
      return Invalid(
          field, absl::StrCat("contains a bidirectional text control (", CodePoint(c), ") at byte ",
                              i, " (it would reorder what terminals show)"));
    }
    i += length;
  }
  return absl::OkStatus();
}

absl::Status CheckDuration(const std::string& field, int64_t ns, const TraceLimits& limits) {
  if (ns < 0) return Invalid(field, absl::StrCat("must be >= 0 (got ", ns, ")"));
  if (ns > limits.max_duration_ns) {
    return Invalid(
        field, absl::StrCat("is ", ns, " ns, above the limit of ", limits.max_duration_ns, " ns"));
  }
  return absl::OkStatus();
}

// Times inside the iteration are offsets from its start, so their size
// obeys the same bound as durations (the host replay adds them to scaled
// durations, which must not overflow). GPU starts are never before the
// start; CPU times may be (a launch just before the measured region).
absl::Status CheckOffset(const std::string& field, int64_t ns, const TraceLimits& limits,
                         bool may_be_negative) {
  const int64_t low = may_be_negative ? -limits.max_duration_ns : 0;
  if (ns < low) return Invalid(field, absl::StrCat("must be >= ", low, " (got ", ns, ")"));
  if (ns > limits.max_duration_ns) {
    return Invalid(field, absl::StrCat("is ", ns,
                                       " ns after the iteration start, above the "
                                       "limit of ",
                                       limits.max_duration_ns, " ns"));
  }
  return absl::OkStatus();
}

absl::Status CheckKernel(const std::string& field, const Kernel& kernel,
                         const TraceLimits& limits) {
  HABITAT_RETURN_IF_ERROR(CheckName(field + ".name", kernel.name(), limits, /*required=*/true));
  const auto& g = kernel.grid();
  const auto& b = kernel.block();
  if (g.x() == 0 || g.y() == 0 || g.z() == 0) {
    return Invalid(field + ".grid", absl::StrCat("must be >= 1 in each dimension (got ", g.x(), "x",
                                                 g.y(), "x", g.z(), ")"));
  }
  if (g.y() > 65535 || g.z() > 65535 || g.x() > 2147483647u) {
    return Invalid(field + ".grid", "exceeds CUDA's grid limits (2^31-1 x 65535 x 65535)");
  }
  if (b.x() == 0 || b.y() == 0 || b.z() == 0) {
    return Invalid(field + ".block", absl::StrCat("must be >= 1 in each dimension (got ", b.x(),
                                                  "x", b.y(), "x", b.z(), ")"));
  }
  const uint64_t threads = uint64_t{b.x()} * b.y() * b.z();
  if (threads > 1024) {
    return Invalid(field + ".block",
                   absl::StrCat("has ", threads, " threads; CUDA allows at most 1024"));
  }
  if (kernel.registers_per_thread() > 255) {
    return Invalid(field + ".registers_per_thread",
                   absl::StrCat("must be <= 255 (got ", kernel.registers_per_thread(), ")"));
  }
  const uint64_t smem =
      uint64_t{kernel.static_shared_memory_bytes()} + kernel.dynamic_shared_memory_bytes();
  if (smem > (1u << 20)) {
    return Invalid(
        field + ".dynamic_shared_memory_bytes",
        absl::StrCat("static + dynamic shared memory of ", smem, " bytes exceeds any GPU's limit"));
  }
  HABITAT_RETURN_IF_ERROR(CheckDuration(field + ".duration_ns", kernel.duration_ns(), limits));
  HABITAT_RETURN_IF_ERROR(CheckOffset(field + ".start_ns", kernel.start_ns(), limits, false));
  return CheckOffset(field + ".launch_ns", kernel.launch_ns(), limits, true);
}

absl::Status CheckMemory(const std::string& field, const MemoryActivity& memory,
                         const TraceLimits& limits) {
  if (!MemoryActivity::Kind_IsValid(memory.kind())) {
    return Invalid(field + ".kind", absl::StrCat("is ", static_cast<int>(memory.kind()),
                                                 ", not a known MemoryActivity.Kind value"));
  }
  HABITAT_RETURN_IF_ERROR(CheckDuration(field + ".duration_ns", memory.duration_ns(), limits));
  HABITAT_RETURN_IF_ERROR(CheckOffset(field + ".start_ns", memory.start_ns(), limits, false));
  return CheckOffset(field + ".launch_ns", memory.launch_ns(), limits, true);
}

// Batch sizes a trace may hold, each once per pass (a prediction reads the
// re-run at a batch; two of them would make it ambiguous).
absl::Status CheckBatchReruns(const std::string& field, const Pass& pass,
                              const TraceLimits& limits) {
  HABITAT_RETURN_IF_ERROR(CheckEntries(field + ".batch_reruns", pass.batch_reruns_size(),
                                       limits.max_batch_reruns_per_pass));
  for (int i = 0; i < pass.batch_reruns_size(); ++i) {
    const std::string entry = absl::StrCat(field, ".batch_reruns[", i, "]");
    const uint32_t batch = pass.batch_reruns(i).batch_size();
    if (batch == 0 || batch > kMaxBatchSize) {
      return Invalid(entry + ".batch_size",
                     absl::StrCat("must be in [1, ", kMaxBatchSize, "] (got ", batch, ")"));
    }
    for (int j = 0; j < i; ++j) {
      if (pass.batch_reruns(j).batch_size() == batch) {
        return Invalid(entry + ".batch_size",
                       absl::StrCat("repeats batch size ", batch, " of entry ", j));
      }
    }
    HABITAT_RETURN_IF_ERROR(
        CheckDuration(entry + ".rerun_time_ns", pass.batch_reruns(i).rerun_time_ns(), limits));
  }
  return absl::OkStatus();
}

absl::Status CheckPass(const std::string& field, const Pass& pass, const TraceLimits& limits,
                       int64_t* total_kernels) {
  HABITAT_RETURN_IF_ERROR(CheckDuration(field + ".time_ns", pass.time_ns(), limits));
  HABITAT_RETURN_IF_ERROR(CheckDuration(field + ".rerun_time_ns", pass.rerun_time_ns(), limits));
  HABITAT_RETURN_IF_ERROR(CheckName(field + ".recorded_name", pass.recorded_name(), limits, false));
  if (pass.kernels_size() > limits.max_kernels_per_pass) {
    return absl::InvalidArgumentError(absl::StrCat(field, ".kernels has ", pass.kernels_size(),
                                                   " kernels; the limit (max_kernels_per_pass) is ",
                                                   limits.max_kernels_per_pass));
  }
  if (pass.memory_size() > limits.max_memory_activities_per_pass) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ".memory has ", pass.memory_size(),
                     " memory activities; the limit (max_memory_activities_per_pass) is ",
                     limits.max_memory_activities_per_pass));
  }
  HABITAT_RETURN_IF_ERROR(CheckBatchReruns(field, pass, limits));
  *total_kernels += pass.kernels_size() + pass.memory_size();
  for (int i = 0; i < pass.kernels_size(); ++i) {
    HABITAT_RETURN_IF_ERROR(
        CheckKernel(absl::StrCat(field, ".kernels[", i, "]"), pass.kernels(i), limits));
  }
  for (int i = 0; i < pass.memory_size(); ++i) {
    HABITAT_RETURN_IF_ERROR(
        CheckMemory(absl::StrCat(field, ".memory[", i, "]"), pass.memory(i), limits));
  }
  return absl::OkStatus();
}

absl::Status CheckArguments(const std::string& field, const Operation& op,
                            const TraceLimits& limits) {
  HABITAT_RETURN_IF_ERROR(
      CheckEntries(field + ".arguments", op.arguments_size(), limits.max_arguments_per_operation));
  for (int i = 0; i < op.arguments_size(); ++i) {
    const auto& arg = op.arguments(i);
    const std::string arg_field = absl::StrCat(field, ".arguments[", i, "]");
    HABITAT_RETURN_IF_ERROR(CheckName(arg_field + ".name", arg.name(), limits, false));
    HABITAT_RETURN_IF_ERROR(CheckName(arg_field + ".text", arg.text(), limits, false));
    if (arg.integers().values_size() > limits.max_argument_values) {
      return Invalid(
          arg_field + ".integers",
          absl::StrCat("has ", arg.integers().values_size(),
                       " values; the limit (max_argument_values) is ", limits.max_argument_values));
    }
    if (!arg.has_tensor()) continue;
    const auto& shape = arg.tensor().shape();
    if (shape.size() > limits.max_tensor_rank) {
      return Invalid(
          arg_field + ".tensor.shape",
          absl::StrCat("has rank ", shape.size(), "; the limit is ", limits.max_tensor_rank));
    }
    // Element counts beyond 2^62 cannot exist in any GPU's memory.
    long double elements = 1;
    for (int d = 0; d < shape.size(); ++d) {
      if (shape[d] < 0) {
        return Invalid(arg_field + ".tensor.shape",
                       absl::StrCat("dimension ", d, " is negative (", shape[d], ")"));
      }
      elements *= static_cast<long double>(shape[d]);
    }
    if (elements > static_cast<long double>(int64_t{1} << 50)) {
      return Invalid(arg_field + ".tensor.shape",
                     "describes more than 2^50 elements, more than any GPU holds");
    }
    HABITAT_RETURN_IF_ERROR(
        CheckName(arg_field + ".tensor.dtype", arg.tensor().dtype(), limits, false));
  }
  return absl::OkStatus();
}

// The GPU time of all kernels and memory activities together is bounded
// like one duration: the predictor sums scaled times, and with each bounded
// only on its own, millions of them could overflow int64 nanoseconds.
absl::Status CheckTotalGpuTime(const Trace& trace, const TraceLimits& limits) {
  int64_t total = 0;  // never above 2 * max_duration_ns: checked after each add
  auto add = [&](int64_t ns) {
    total += ns;
    return total <= limits.max_duration_ns;
  };
  auto add_pass = [&](const Pass& pass) {
    for (const Kernel& k : pass.kernels()) {
      if (!add(k.duration_ns())) return false;
    }
    for (const MemoryActivity& m : pass.memory()) {
      if (!add(m.duration_ns())) return false;
    }
    return true;
  };
  bool within = true;
  for (const Operation& op : trace.operations()) {
    within = within && add_pass(op.forward()) && add_pass(op.backward());
  }
  for (const Kernel& k : trace.unattributed_kernels()) within = within && add(k.duration_ns());
  if (!within) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the kernels and memory activities of the trace add up to more than ",
        limits.max_duration_ns, " ns of GPU time (max_duration_ns) for one iteration"));
  }
  return absl::OkStatus();
}

// Which tool wrote a settings message ("recorded", "inferred", "kineto"):
// a short printable name.
absl::Status CheckSource(const std::string& field, const std::string& source,
                         const TraceLimits& limits) {
  TraceLimits source_limits = limits;
  source_limits.max_name_bytes = std::min<int64_t>(limits.max_name_bytes, 64);
  return CheckName(field, source, source_limits, false);
}

// Free-form strings of MathSettings end up in warnings: known values only,
// except `source`, which is bounded and printable.
absl::Status CheckMath(const habitat::v1::MathSettings& math, const TraceLimits& limits) {
  const std::string& precision = math.float32_matmul_precision();
  if (!precision.empty() && precision != "highest" && precision != "high" &&
      precision != "medium") {
    return Invalid("math.float32_matmul_precision",
                   "must be \"highest\", \"high\", \"medium\" or empty");
  }
  const std::string& autocast = math.autocast_dtype();
  if (!autocast.empty() && autocast != "bf16" && autocast != "fp16") {
    return Invalid("math.autocast_dtype", "must be \"bf16\", \"fp16\" or empty");
  }
  return CheckSource("math.source", math.source(), limits);
}

// One PassMemory: names an operation of the trace (and a backward pass only
// where it has one); byte counts are never negative.
absl::Status CheckPassMemory(int index, const habitat::v1::PassMemory& pass, const Trace& trace) {
  const std::string field = absl::StrCat("memory.passes[", index, "]");
  if (pass.operation() >= static_cast<uint32_t>(trace.operations_size())) {
    return Invalid(field + ".operation",
                   absl::StrCat("is ", pass.operation(), " but the trace has ",
                                trace.operations_size(), " operations"));
  }
  if (pass.backward() && !trace.operations(pass.operation()).has_backward()) {
    return Invalid(field + ".backward",
                   absl::StrCat("is set but operations[", pass.operation(), "] has no backward"));
  }
  const std::pair<const char*, int64_t> bytes[] = {
      {".allocated_bytes_before", pass.allocated_bytes_before()},
      {".allocated_bytes_after", pass.allocated_bytes_after()},
      {".peak_allocated_bytes_after", pass.peak_allocated_bytes_after()},
  };
  for (const auto& [name, value] : bytes) {
    if (value < 0) return Invalid(field + name, absl::StrCat("must be >= 0 (got ", value, ")"));
  }
  return absl::OkStatus();
}

// MemoryUsage: byte counts are never negative; `source` as MathSettings'; at
// most kPassMemoryPerOperation records per operation (a forward, and one per
// autograd node of its backward: a few for a layer like linear).
absl::Status CheckMemory(const Trace& trace, const TraceLimits& limits) {
  const habitat::v1::MemoryUsage& memory = trace.memory();
  const std::pair<const char*, int64_t> bytes[] = {
      {"memory.allocated_bytes_at_start", memory.allocated_bytes_at_start()},
      {"memory.peak_allocated_bytes", memory.peak_allocated_bytes()},
      {"memory.peak_reserved_bytes", memory.peak_reserved_bytes()},
  };
  for (const auto& [field, value] : bytes) {
    if (value < 0) return Invalid(field, absl::StrCat("must be >= 0 (got ", value, ")"));
  }
  // The iteration's peak counts what was allocated when it began.
  if (memory.has_allocated_bytes_at_start() && memory.has_peak_allocated_bytes() &&
      memory.peak_allocated_bytes() < memory.allocated_bytes_at_start()) {
    return Invalid(
        "memory.peak_allocated_bytes",
        absl::StrCat("is ", memory.peak_allocated_bytes(),
                     ", below memory.allocated_bytes_at_start (", memory.allocated_bytes_at_start(),
                     "); the peak of an iteration is at least what it began with"));
  }
  constexpr int64_t kPassMemoryPerOperation = 8;
  if (memory.passes_size() > kPassMemoryPerOperation * int64_t{trace.operations_size()}) {
    return Invalid(
        "memory.passes",
        absl::StrCat("has ", memory.passes_size(), " entries for ", trace.operations_size(),
                     " operations; the limit is ", kPassMemoryPerOperation, " per operation"));
  }
  for (int i = 0; i < memory.passes_size(); ++i) {
    HABITAT_RETURN_IF_ERROR(CheckPassMemory(i, memory.passes(i), trace));
  }
  return CheckSource("memory.source", memory.source(), limits);
}

absl::Status CheckTotalKernels(int64_t total, const TraceLimits& limits) {
  if (total <= limits.max_total_kernels) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "the trace has more than ", limits.max_total_kernels,
      " kernels and memory activities, unattributed kernels included (max_total_kernels)"));
}

absl::Status CheckMetadata(const Trace& trace, const TraceLimits& limits) {
  if (trace.metadata_size() > limits.max_metadata_entries) {
    return absl::InvalidArgumentError(absl::StrCat("metadata has ", trace.metadata_size(),
                                                   " entries; the limit (max_metadata_entries) is ",
                                                   limits.max_metadata_entries));
  }
  for (const auto& [key, value] : trace.metadata()) {
    HABITAT_RETURN_IF_ERROR(CheckName("metadata key", key, limits, false));
    HABITAT_RETURN_IF_ERROR(
        CheckName(absl::StrCat("metadata[", key.substr(0, 64), "]"), value, limits, false));
  }
  return absl::OkStatus();
}

absl::Status CheckModules(const Trace& trace, const TraceLimits& limits) {
  if (trace.modules_size() > limits.max_modules) {
    return absl::InvalidArgumentError(absl::StrCat("modules has ", trace.modules_size(),
                                                   " entries; the limit (max_modules) is ",
                                                   limits.max_modules));
  }
  for (int i = 0; i < trace.modules_size(); ++i) {
    const habitat::v1::Module& m = trace.modules(i);
    HABITAT_RETURN_IF_ERROR(
        CheckName(absl::StrCat("modules[", i, "].path"), m.path(), limits, false));
    HABITAT_RETURN_IF_ERROR(
        CheckName(absl::StrCat("modules[", i, "].class_name"), m.class_name(), limits, false));
    if (m.parameter_bytes() < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("modules[", i, "].parameter_bytes must be >= 0, got ", m.parameter_bytes()));
    }
  }
  return absl::OkStatus();
}

// Version strings are short; bounded like MathSettings.source.
absl::Status CheckFrameworks(const habitat::v1::FrameworkVersions& frameworks,
                             const TraceLimits& limits) {
  TraceLimits short_limits = limits;
  short_limits.max_name_bytes = std::min<int64_t>(limits.max_name_bytes, 256);
  for (const auto& [field, value] :
       {std::pair<const char*, const std::string*>{"frameworks.torch", &frameworks.torch()},
        {"frameworks.cuda", &frameworks.cuda()},
        {"frameworks.cudnn", &frameworks.cudnn()},
        {"frameworks.habitat", &frameworks.habitat()}}) {
    HABITAT_RETURN_IF_ERROR(CheckName(field, *value, short_limits, false));
  }
  return absl::OkStatus();
}

// What the trace says of itself, before its operations: version, origin,
// names, batch size, precision, operation count and iteration times.
absl::Status CheckTraceHeader(const Trace& trace, const TraceLimits& limits) {
  if (trace.format_version() > 1) {
    return Invalid("format_version",
                   absl::StrCat("is ", trace.format_version(),
                                "; this server understands version 1 (upgrade the server)"));
  }
  if (trace.origin().name().empty() && trace.origin().device_id().empty()) {
    return Invalid("origin",
                   "must name the GPU the trace was measured on "
                   "(origin.name or origin.device_id)");
  }
  HABITAT_RETURN_IF_ERROR(CheckName("origin.name", trace.origin().name(), limits, false));
  HABITAT_RETURN_IF_ERROR(CheckName("origin.device_id", trace.origin().device_id(), limits, false));
  HABITAT_RETURN_IF_ERROR(CheckName("model_name", trace.model_name(), limits, false));
  HABITAT_RETURN_IF_ERROR(CheckName("source", trace.source(), limits, false));
  HABITAT_RETURN_IF_ERROR(CheckFrameworks(trace.frameworks(), limits));
  if (trace.batch_size() == 0) {
    return Invalid("batch_size",
                   "must be >= 1 (samples per iteration; needed for "
                   "throughput and cost per sample)");
  }
  if (trace.batch_size() > kMaxBatchSize) {
    return Invalid("batch_size", absl::StrCat("is ", trace.batch_size(), "; the limit is 2^30"));
  }
  if (!habitat::v1::Precision_IsValid(trace.precision())) {
    return Invalid("precision", absl::StrCat("is ", static_cast<int>(trace.precision()),
                                             ", not a known Precision value"));
  }
  if (trace.operations_size() == 0) {
    return Invalid("operations",
                   trace.unattributed_kernels_size() == 0
                       ? "is empty: the trace holds no operations to predict"
                       : "is empty: the trace holds only unattributed_kernels, which are carried "
                         "along but not predicted (it would be predicted at 0 ns); attribute "
                         "them to operations");
  }
  if (trace.operations_size() > limits.max_operations) {
    return absl::InvalidArgumentError(absl::StrCat("operations has ", trace.operations_size(),
                                                   " entries; the limit (max_operations) is ",
                                                   limits.max_operations));
  }
  HABITAT_RETURN_IF_ERROR(CheckDuration("iteration_wall_ns", trace.iteration_wall_ns(), limits));
  return CheckDuration("iteration_gpu_busy_ns", trace.iteration_gpu_busy_ns(), limits);
}

// Operation `i`, its passes' kernels added to `total_kernels`.
absl::Status CheckOperation(const Operation& op, int i, const TraceLimits& limits,
                            int64_t* total_kernels) {
  const std::string field = absl::StrCat("operations[", i, "]");
  HABITAT_RETURN_IF_ERROR(CheckName(field + ".name", op.name(), limits, true));
  HABITAT_RETURN_IF_ERROR(CheckArguments(field, op, limits));
  HABITAT_RETURN_IF_ERROR(CheckOffset(field + ".cpu_start_ns", op.cpu_start_ns(), limits, true));
  HABITAT_RETURN_IF_ERROR(CheckDuration(field + ".cpu_duration_ns", op.cpu_duration_ns(), limits));
  // The producer's backward ended before this accumulation began, and
  // operations are in the order they began: an earlier operation.
  if (op.has_gradient_producer() && op.gradient_producer() >= static_cast<uint32_t>(i)) {
    return Invalid(field + ".gradient_producer",
                   i == 0 ? absl::StrCat("is ", op.gradient_producer(),
                                         "; it must name an earlier operation, and the first "
                                         "operation has none")
                          : absl::StrCat("is ", op.gradient_producer(),
                                         "; it must name an earlier operation (0 to ", i - 1,
                                         "), whose backward produced the gradient this one "
                                         "accumulates"));
  }
  HABITAT_RETURN_IF_ERROR(CheckPass(field + ".forward", op.forward(), limits, total_kernels));
  if (op.has_backward()) {
    HABITAT_RETURN_IF_ERROR(CheckPass(field + ".backward", op.backward(), limits, total_kernels));
  }
  return CheckTotalKernels(*total_kernels, limits);
}

absl::Status CheckHostEvents(const Trace& trace, const TraceLimits& limits) {
  if (trace.host_events_size() > limits.max_host_events) {
    return absl::InvalidArgumentError(absl::StrCat("host_events has ", trace.host_events_size(),
                                                   " entries; the limit (max_host_events) is ",
                                                   limits.max_host_events));
  }
  for (int i = 0; i < trace.host_events_size(); ++i) {
    const std::string field = absl::StrCat("host_events[", i, "]");
    HABITAT_RETURN_IF_ERROR(CheckName(field + ".name", trace.host_events(i).name(), limits, false));
    HABITAT_RETURN_IF_ERROR(
        CheckOffset(field + ".cpu_start_ns", trace.host_events(i).cpu_start_ns(), limits, true));
    HABITAT_RETURN_IF_ERROR(
        CheckDuration(field + ".cpu_duration_ns", trace.host_events(i).cpu_duration_ns(), limits));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateTrace(const Trace& trace, const TraceLimits& limits) {
  HABITAT_RETURN_IF_ERROR(CheckTraceHeader(trace, limits));
  int64_t total_kernels = 0;
  for (int i = 0; i < trace.operations_size(); ++i) {
    HABITAT_RETURN_IF_ERROR(CheckOperation(trace.operations(i), i, limits, &total_kernels));
  }
  HABITAT_RETURN_IF_ERROR(
      CheckTotalKernels(total_kernels + trace.unattributed_kernels_size(), limits));
  for (int i = 0; i < trace.unattributed_kernels_size(); ++i) {
    HABITAT_RETURN_IF_ERROR(CheckKernel(absl::StrCat("unattributed_kernels[", i, "]"),
                                        trace.unattributed_kernels(i), limits));
  }
  HABITAT_RETURN_IF_ERROR(CheckHostEvents(trace, limits));
  if (trace.has_math()) HABITAT_RETURN_IF_ERROR(CheckMath(trace.math(), limits));
  if (trace.has_memory()) HABITAT_RETURN_IF_ERROR(CheckMemory(trace, limits));
  HABITAT_RETURN_IF_ERROR(CheckMetadata(trace, limits));
  HABITAT_RETURN_IF_ERROR(CheckModules(trace, limits));
  return CheckTotalGpuTime(trace, limits);
}

}  // namespace habitat
