#include "core/kineto/kineto_events.h"

#include <cmath>
#include <limits>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/json_text.h"
#include "common/status_macros.h"

namespace habitat {
namespace kineto {
namespace {

using nlohmann::json;

// Timestamps beyond this (in microseconds) could overflow int64 nanoseconds
// once differences are taken. Epoch-based µs timestamps (~1.7e15) fit.
constexpr double kMaxAbsMicros = 4e15;

// Where a field error happened, turned into a message prefix.
struct Where {
  size_t index;
  const json& event;
};

absl::Status FieldError(const Where& where, absl::string_view field, absl::string_view problem) {
  return absl::InvalidArgumentError(
      absl::StrCat(DescribeEvent(where.index, where.event), ": field \"", field, "\" ", problem));
}

absl::Status CheckDepth(absl::string_view text) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;  // skip the escaped character
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth) {
        return absl::InvalidArgumentError(absl::StrCat("Kineto trace: JSON nested deeper than ",
                                                       kMaxJsonDepth, " levels at byte ", i));
      }
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> RequiredString(const Where& where, const json& object,
                                           const char* field) {
  auto it = object.find(field);
  if (it == object.end()) return FieldError(where, field, "is missing");
  if (!it->is_string()) {
    return FieldError(where, field, absl::StrCat("must be a string, got ", it->type_name()));
  }
  return it->get<std::string>();
}

// An integer-valued JSON number (floats with an integral value accepted).
absl::StatusOr<int64_t> AsInt64(const Where& where, const json& value, absl::string_view field) {
  if (value.is_number_integer() && !value.is_number_unsigned()) {
    return value.get<int64_t>();
  }
  if (value.is_number_unsigned()) {
    const uint64_t u = value.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return FieldError(where, field, "is out of range");
    }
    return static_cast<int64_t>(u);
  }
  if (value.is_number_float()) {
    const double d = value.get<double>();
    if (!std::isfinite(d) || d != std::floor(d) || std::fabs(d) > 9e18) {
      return FieldError(where, field, absl::StrCat("must be an integer, got ", d));
    }
    return static_cast<int64_t>(d);
  }
  return FieldError(where, field, absl::StrCat("must be an integer, got ", value.type_name()));
}

absl::StatusOr<uint32_t> AsUint32(const Where& where, const json& value, absl::string_view field) {
  HABITAT_ASSIGN_OR_RETURN(int64_t v, AsInt64(where, value, field));
  if (v < 0 || v > std::numeric_limits<uint32_t>::max()) {
    return FieldError(where, field, absl::StrCat("is ", v, ", outside [0, 2^32)"));
  }
  return static_cast<uint32_t>(v);
}

// Microsecond field ("ts", "dur") to nanoseconds.
absl::StatusOr<Nanoseconds> Micros(const Where& where, const json& object, const char* field,
                                   bool non_negative) {
  auto it = object.find(field);
  if (it == object.end()) return FieldError(where, field, "is missing");
  if (!it->is_number()) {
    return FieldError(where, field, absl::StrCat("must be a number, got ", it->type_name()));
  }
  const double us = it->get<double>();
  if (!std::isfinite(us) || std::fabs(us) > kMaxAbsMicros) {
    return FieldError(where, field, absl::StrCat("is ", us, " µs, not a finite time"));
  }
  if (non_negative && us < 0) {
    return FieldError(where, field, absl::StrCat("is negative (", us, " µs)"));
  }
  return UsToNs(us);
}

// pid/tid are numbers for real threads and strings for synthetic rows.
absl::StatusOr<std::string> IdString(const Where& where, const json& object, const char* field) {
  auto it = object.find(field);
  if (it == object.end()) return FieldError(where, field, "is missing");
  if (it->is_string()) return it->get<std::string>();
  if (it->is_number()) {
    HABITAT_ASSIGN_OR_RETURN(int64_t v, AsInt64(where, *it, field));
    return absl::StrCat(v);
  }
  return FieldError(where, field,
                    absl::StrCat("must be a number or string, got ", it->type_name()));
}

// Optional integer arg: -1 when absent.
absl::StatusOr<int64_t> OptionalIntArg(const Where& where, const json* args, const char* field) {
  if (args == nullptr) return -1;
  auto it = args->find(field);
  if (it == args->end() || it->is_null()) return -1;
  return AsInt64(where, *it, absl::StrCat("args.", field));
}

absl::StatusOr<int64_t> RequiredIntArg(const Where& where, const json* args, const char* field) {
  if (args == nullptr || !args->contains(field)) {
    return FieldError(where, absl::StrCat("args.", field), "is missing");
  }
  return AsInt64(where, (*args)[field], absl::StrCat("args.", field));
}

absl::StatusOr<uint32_t> RequiredUint32Arg(const Where& where, const json& args,
                                           const char* field) {
  const std::string path = absl::StrCat("args.", field);
  auto it = args.find(field);
  if (it == args.end()) return FieldError(where, path, "is missing");
  return AsUint32(where, *it, path);
}

absl::Status ReadDim3(const Where& where, const json& args, const char* field, uint32_t out[3]) {
  const std::string path = absl::StrCat("args.", field);
  auto it = args.find(field);
  if (it == args.end()) return FieldError(where, path, "is missing");
  if (!it->is_array() || it->size() != 3) {
    return FieldError(where, path, "must be an array of 3 integers");
  }
  for (size_t i = 0; i < 3; ++i) {
    HABITAT_ASSIGN_OR_RETURN(out[i], AsUint32(where, (*it)[i], path));
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> KindOf(const json& event, EventKind* kind) {
  auto ph = event.find("ph");
  auto cat = event.find("cat");
  if (ph == event.end() || cat == event.end() || !ph->is_string() || !cat->is_string() ||
      ph->get_ref<const std::string&>() != "X") {
    return false;  // metadata, instants, flows: not used
  }
  const std::string& c = cat->get_ref<const std::string&>();
  if (c == "cpu_op") {
    *kind = EventKind::kCpuOp;
  } else if (c == "user_annotation") {
    *kind = EventKind::kUserAnnotation;
  } else if (c == "cuda_runtime" || c == "cuda_driver") {
    *kind = EventKind::kRuntime;
  } else if (c == "kernel") {
    *kind = EventKind::kKernel;
  } else if (c == "gpu_memcpy") {
    *kind = EventKind::kMemcpy;
  } else if (c == "gpu_memset") {
    *kind = EventKind::kMemset;
  } else {
    return false;  // python_function, gpu_user_annotation, overhead, ...
  }
  return true;
}

absl::StatusOr<const json*> ArgsObject(const Where& where, const json& event, bool required) {
  auto it = event.find("args");
  if (it == event.end()) {
    if (required) return FieldError(where, "args", "is missing");
    return nullptr;
  }
  if (!it->is_object()) {
    return FieldError(where, "args", absl::StrCat("must be an object, got ", it->type_name()));
  }
  return &*it;
}

absl::StatusOr<HostEvent> ParseHost(const Where& where, EventKind kind) {
  const json& event = where.event;
  HostEvent out;
  out.index = where.index;
  out.kind = kind;
  HABITAT_ASSIGN_OR_RETURN(out.name, RequiredString(where, event, "name"));
  HABITAT_ASSIGN_OR_RETURN(std::string pid, IdString(where, event, "pid"));
  HABITAT_ASSIGN_OR_RETURN(std::string tid, IdString(where, event, "tid"));
  out.thread = absl::StrCat(pid, "/", tid);
  HABITAT_ASSIGN_OR_RETURN(out.start, Micros(where, event, "ts", false));
  HABITAT_ASSIGN_OR_RETURN(out.duration, Micros(where, event, "dur", true));
  const bool is_runtime = kind == EventKind::kRuntime;
  HABITAT_ASSIGN_OR_RETURN(const json* args, ArgsObject(where, event, is_runtime));
  HABITAT_ASSIGN_OR_RETURN(out.external_id, OptionalIntArg(where, args, "External id"));
  if (is_runtime) {
    HABITAT_ASSIGN_OR_RETURN(out.correlation, RequiredIntArg(where, args, "correlation"));
  }
  if (kind == EventKind::kCpuOp) {
    HABITAT_ASSIGN_OR_RETURN(out.sequence_number, OptionalIntArg(where, args, "Sequence number"));
  }
  return out;
}

absl::StatusOr<DeviceEvent> ParseDevice(const Where& where, EventKind kind) {
  const json& event = where.event;
  DeviceEvent out;
  out.index = where.index;
  out.kind = kind;
  HABITAT_ASSIGN_OR_RETURN(out.name, RequiredString(where, event, "name"));
  HABITAT_ASSIGN_OR_RETURN(out.start, Micros(where, event, "ts", false));
  HABITAT_ASSIGN_OR_RETURN(out.duration, Micros(where, event, "dur", true));
  HABITAT_ASSIGN_OR_RETURN(const json* args, ArgsObject(where, event, true));
  HABITAT_ASSIGN_OR_RETURN(out.correlation, RequiredIntArg(where, args, "correlation"));
  HABITAT_ASSIGN_OR_RETURN(out.external_id, OptionalIntArg(where, args, "External id"));
  HABITAT_ASSIGN_OR_RETURN(out.device, OptionalIntArg(where, args, "device"));
  // The stream is in args; older traces only have it as the tid.
  if (args->contains("stream")) {
    HABITAT_ASSIGN_OR_RETURN(out.stream, RequiredUint32Arg(where, *args, "stream"));
  } else {
    auto tid = event.find("tid");
    if (tid != event.end() && tid->is_number_unsigned() &&
        tid->get<uint64_t>() <= std::numeric_limits<uint32_t>::max()) {
      out.stream = static_cast<uint32_t>(tid->get<uint64_t>());
    }
  }
  if (kind == EventKind::kKernel) {
    HABITAT_RETURN_IF_ERROR(ReadDim3(where, *args, "grid", out.grid));
    HABITAT_RETURN_IF_ERROR(ReadDim3(where, *args, "block", out.block));
    HABITAT_ASSIGN_OR_RETURN(out.registers_per_thread,
                             RequiredUint32Arg(where, *args, "registers per thread"));
    if (args->contains("static shared memory") && args->contains("dynamic shared memory")) {
      HABITAT_ASSIGN_OR_RETURN(out.static_shared_memory,
                               RequiredUint32Arg(where, *args, "static shared memory"));
      HABITAT_ASSIGN_OR_RETURN(out.dynamic_shared_memory,
                               RequiredUint32Arg(where, *args, "dynamic shared memory"));
      out.shared_memory_split = true;
    } else {
      // Combined static + dynamic: stored as dynamic (see kineto_import.h).
      HABITAT_ASSIGN_OR_RETURN(out.dynamic_shared_memory,
                               RequiredUint32Arg(where, *args, "shared memory"));
    }
  } else {
    HABITAT_ASSIGN_OR_RETURN(int64_t bytes, OptionalIntArg(where, args, "bytes"));
    out.bytes = bytes > 0 ? static_cast<uint64_t>(bytes) : 0;
  }
  return out;
}

bool IsMemoryEvent(const json& event) {
  auto ph = event.find("ph");
  auto name = event.find("name");
  return ph != event.end() && ph->is_string() && ph->get_ref<const std::string&>() == "i" &&
         name != event.end() && name->is_string() &&
         name->get_ref<const std::string&>() == "[memory]";
}

// An allocator total: absent is -1, present must be >= 0.
absl::StatusOr<int64_t> TotalArg(const Where& where, const json& args, const char* field) {
  auto it = args.find(field);
  if (it == args.end() || it->is_null()) return -1;
  HABITAT_ASSIGN_OR_RETURN(int64_t v, AsInt64(where, *it, absl::StrCat("args.", field)));
  if (v < 0) return FieldError(where, absl::StrCat("args.", field), "is negative");
  return v;
}

absl::StatusOr<MemoryEvent> ParseMemory(const Where& where) {
  MemoryEvent out;
  out.index = where.index;
  HABITAT_ASSIGN_OR_RETURN(out.time, Micros(where, where.event, "ts", false));
  HABITAT_ASSIGN_OR_RETURN(const json* args, ArgsObject(where, where.event, true));
  HABITAT_ASSIGN_OR_RETURN(out.device_type, OptionalIntArg(where, args, "Device Type"));
  HABITAT_ASSIGN_OR_RETURN(out.device_id, OptionalIntArg(where, args, "Device Id"));
  HABITAT_ASSIGN_OR_RETURN(out.total_allocated, TotalArg(where, *args, "Total Allocated"));
  HABITAT_ASSIGN_OR_RETURN(out.total_reserved, TotalArg(where, *args, "Total Reserved"));
  if (args->contains("Bytes") && !args->at("Bytes").is_null()) {
    HABITAT_ASSIGN_OR_RETURN(int64_t bytes, AsInt64(where, args->at("Bytes"), "args.Bytes"));
    out.bytes = bytes;
  }
  return out;
}

}  // namespace

std::string DescribeEvent(size_t index, const json& event) {
  std::string name = "(unnamed)";
  if (event.is_object()) {
    auto it = event.find("name");
    if (it != event.end() && it->is_string()) {
      name = it->get<std::string>();
      // Template-heavy kernel names run to kilobytes; keep messages short.
      if (name.size() > 120) name = absl::StrCat(name.substr(0, 117), "...");
    }
  }
  return absl::StrCat("traceEvents[", index, "] \"", name, "\"");
}

absl::StatusOr<std::unique_ptr<ParsedTrace>> ParseKinetoTrace(absl::string_view json_text) {
  json_text = StripUtf8Bom(json_text);
  HABITAT_RETURN_IF_ERROR(CheckDepth(json_text));
  auto trace = std::make_unique<ParsedTrace>();
  try {
    trace->document = json::parse(json_text.begin(), json_text.end());
  } catch (const json::parse_error& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("Kineto trace is not valid JSON (byte ", e.byte, "): ", e.what()));
  } catch (const json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("Kineto trace is not valid JSON: ", e.what()));
  }
  const json& doc = trace->document;
  if (!doc.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat("Kineto trace: top level must be an object, got ", doc.type_name()));
  }
  auto events = doc.find("traceEvents");
  if (events == doc.end()) {
    return absl::InvalidArgumentError(
        "Kineto trace: no \"traceEvents\" array (is this a Chrome trace "
        "from torch.profiler's export_chrome_trace?)");
  }
  if (!events->is_array()) {
    return absl::InvalidArgumentError(
        absl::StrCat("Kineto trace: \"traceEvents\" must be an array, got ", events->type_name()));
  }
  if (events->empty()) {
    return absl::InvalidArgumentError("Kineto trace: \"traceEvents\" is empty");
  }
  // All field access below is checked first, but nlohmann throws on any
  // type mismatch we missed; keep such a slip an error, not a crash.
  try {
    for (size_t i = 0; i < events->size(); ++i) {
      const json& event = (*events)[i];
      const Where where{i, event};
      if (!event.is_object()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "Kineto trace: traceEvents[", i, "] must be an object, got ", event.type_name()));
      }
      if (IsMemoryEvent(event)) {
        HABITAT_ASSIGN_OR_RETURN(MemoryEvent memory, ParseMemory(where));
        trace->memory.push_back(memory);
        continue;
      }
      EventKind kind;
      HABITAT_ASSIGN_OR_RETURN(bool used, KindOf(event, &kind));
      if (!used) continue;
      switch (kind) {
        case EventKind::kCpuOp:
        case EventKind::kUserAnnotation:
        case EventKind::kRuntime: {
          HABITAT_ASSIGN_OR_RETURN(HostEvent host, ParseHost(where, kind));
          trace->host.push_back(std::move(host));
          break;
        }
        case EventKind::kKernel:
        case EventKind::kMemcpy:
        case EventKind::kMemset: {
          HABITAT_ASSIGN_OR_RETURN(DeviceEvent dev, ParseDevice(where, kind));
          trace->device.push_back(std::move(dev));
          break;
        }
      }
    }
  } catch (const json::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("Kineto trace: unexpected JSON content: ", e.what()));
  }
  return trace;
}

}  // namespace kineto
}  // namespace habitat
