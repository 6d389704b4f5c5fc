#include "core/trace/parsed_size.h"

#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/protobuf/message.h"
#include "google/protobuf/wire_format_lite.h"

namespace habitat {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::io::CodedInputStream;
using WireFormatLite = google::protobuf::internal::WireFormatLite;

// glibc's per-allocation header and rounding, on 64-bit.
constexpr int64_t kMallocOverhead = 16;
// A repeated element's pointer slot, doubled (arrays grow by doubling),
// and then some for the arrays' own headers.
constexpr int64_t kRepeatedSlot = 3 * sizeof(void*);
// std::string keeps up to 15 bytes inline (libstdc++).
constexpr int64_t kInlineString = 15;
// Protobuf's own nesting limit.
constexpr int kMaxDepth = 100;

int64_t ScalarBytes(FieldDescriptor::CppType type) {
  switch (type) {
    case FieldDescriptor::CPPTYPE_BOOL:
      return 1;
    case FieldDescriptor::CPPTYPE_INT32:
    case FieldDescriptor::CPPTYPE_UINT32:
    case FieldDescriptor::CPPTYPE_FLOAT:
    case FieldDescriptor::CPPTYPE_ENUM:
      return 4;
    default:
      return 8;
  }
}

class Walker {
 public:
  explicit Walker(int64_t stop_above) : stop_above_(stop_above) {}

  // The generated class's size (an empty message's SpaceUsedLong).
  int64_t ClassBytes(const Descriptor& type) {
    auto [it, inserted] = class_bytes_.try_emplace(&type, 0);
    if (inserted) {
      const Message* prototype =
          google::protobuf::MessageFactory::generated_factory()->GetPrototype(&type);
      it->second = prototype == nullptr ? 64 : static_cast<int64_t>(prototype->SpaceUsedLong());
    }
    return it->second;
  }

  // Adds what the fields of one `type` read from `in` allocate; false on
  // malformed input.
  bool Walk(const Descriptor& type, CodedInputStream* in, int depth) {
    if (depth > kMaxDepth) return false;
    while (total_ <= stop_above_) {
      const uint32_t tag = in->ReadTag();
      if (tag == 0) return in->ConsumedEntireMessage();
      const FieldDescriptor* field = type.FindFieldByNumber(WireFormatLite::GetTagFieldNumber(tag));
      if (!Field(field, tag, in, depth)) return false;
    }
    return true;
  }

  int64_t total() const { return total_; }
  void Add(int64_t bytes) { total_ += bytes; }

 private:
  bool Field(const FieldDescriptor* field, uint32_t tag, CodedInputStream* in, int depth) {
    const auto wire_type = WireFormatLite::GetTagWireType(tag);
    if (field == nullptr || wire_type == WireFormatLite::WIRETYPE_START_GROUP) {
      // Kept as unknown-field bytes.
      const int before = in->CurrentPosition();
      if (!WireFormatLite::SkipField(in, tag)) return false;
      total_ += in->CurrentPosition() - before + kMallocOverhead;
      return true;
    }
    if (wire_type != WireFormatLite::WIRETYPE_LENGTH_DELIMITED) {
      uint64_t ignored = 0;
      switch (wire_type) {
        case WireFormatLite::WIRETYPE_VARINT:
          if (!in->ReadVarint64(&ignored)) return false;
          break;
        case WireFormatLite::WIRETYPE_FIXED64:
          if (!in->ReadLittleEndian64(&ignored)) return false;
          break;
        case WireFormatLite::WIRETYPE_FIXED32: {
          uint32_t ignored32 = 0;
          if (!in->ReadLittleEndian32(&ignored32)) return false;
          break;
        }
        default:
          return false;
      }
      if (field->is_repeated()) total_ += 2 * ScalarBytes(field->cpp_type());
      return true;
    }
    uint32_t length = 0;
    if (!in->ReadVarint32(&length)) return false;
    if (field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      total_ += ClassBytes(*field->message_type()) + kMallocOverhead;
      if (field->is_repeated()) total_ += kRepeatedSlot;
      const CodedInputStream::Limit limit = in->PushLimit(static_cast<int>(length));
      if (!Walk(*field->message_type(), in, depth + 1)) return false;
      if (total_ > stop_above_) return true;
      in->PopLimit(limit);
      return true;
    }
    if (field->cpp_type() == FieldDescriptor::CPPTYPE_STRING) {
      // Protobuf 3.21 keeps each set string as its own heap std::string.
      if (field->is_repeated()) total_ += kRepeatedSlot;
      if (field->is_repeated() || length > 0) total_ += sizeof(std::string) + kMallocOverhead;
      if (length > kInlineString) total_ += length + 1 + kMallocOverhead;
    } else {
      // Packed scalars: at most one element per byte (varints), doubled
      // for the array's growth.
      const int64_t elements = field->type() == FieldDescriptor::TYPE_FIXED32 ||
                                       field->type() == FieldDescriptor::TYPE_SFIXED32 ||
                                       field->type() == FieldDescriptor::TYPE_FLOAT
                                   ? length / 4
                               : field->type() == FieldDescriptor::TYPE_FIXED64 ||
                                       field->type() == FieldDescriptor::TYPE_SFIXED64 ||
                                       field->type() == FieldDescriptor::TYPE_DOUBLE
                                   ? length / 8
                                   : length;
      total_ += 2 * elements * ScalarBytes(field->cpp_type()) + kMallocOverhead;
    }
    return in->Skip(static_cast<int>(length));
  }

  const int64_t stop_above_;
  int64_t total_ = 0;
  absl::flat_hash_map<const Descriptor*, int64_t> class_bytes_;
};

int64_t CountMessages(const Message& message) {
  const google::protobuf::Reflection* reflection = message.GetReflection();
  std::vector<const FieldDescriptor*> fields;
  reflection->ListFields(message, &fields);
  int64_t count = 0;
  for (const FieldDescriptor* field : fields) {
    if (field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      if (field->is_repeated()) {
        const int n = reflection->FieldSize(message, field);
        for (int i = 0; i < n; ++i) {
          count += 1 + CountMessages(reflection->GetRepeatedMessage(message, field, i));
        }
      } else {
        count += 1 + CountMessages(reflection->GetMessage(message, field));
      }
    } else if (field->cpp_type() == FieldDescriptor::CPPTYPE_STRING && field->is_repeated()) {
      count += reflection->FieldSize(message, field);
    }
  }
  return count;
}

}  // namespace

absl::StatusOr<int64_t> EstimateParsedBytes(const Descriptor& type,
                                            google::protobuf::io::ZeroCopyInputStream* input,
                                            int64_t stop_above) {
  CodedInputStream in(input);
  in.SetTotalBytesLimit(INT32_MAX);
  Walker walker(stop_above);
  walker.Add(walker.ClassBytes(type));
  if (!walker.Walk(type, &in, 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("the bytes are not a valid ", type.full_name(), " (not protobuf, or cut)"));
  }
  return walker.total();
}

absl::StatusOr<int64_t> EstimateParsedBytes(const Descriptor& type, absl::string_view wire,
                                            int64_t stop_above) {
  google::protobuf::io::ArrayInputStream input(wire.data(), static_cast<int>(wire.size()));
  return EstimateParsedBytes(type, &input, stop_above);
}

int64_t InMemoryBytes(const Message& message) {
  return static_cast<int64_t>(message.SpaceUsedLong()) + kMallocOverhead * CountMessages(message);
}

}  // namespace habitat
