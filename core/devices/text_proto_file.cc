#include "core/devices/text_proto_file.h"

#include "absl/strings/str_cat.h"
#include "common/file_io.h"
#include "common/status_macros.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/text_format.h"

namespace habitat {
namespace {

// Keeps the first parse error, with 1-based line and column (protobuf
// reports them 0-based).
class FirstErrorCollector : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, google::protobuf::io::ColumnNumber column,
                const std::string& message) override {
    if (error_.empty()) {
      error_ = absl::StrCat("line ", line + 1, ", column ", column + 1, ": ", message);
    }
  }
  void AddWarning(int, google::protobuf::io::ColumnNumber, const std::string&) override {}
  const std::string& error() const { return error_; }

 private:
  std::string error_;
};

}  // namespace

absl::Status ReadTextProtoFile(const std::string& path, google::protobuf::Message* message) {
  HABITAT_ASSIGN_OR_RETURN(const std::string text, ReadFile(path));
  google::protobuf::TextFormat::Parser parser;
  FirstErrorCollector errors;
  parser.RecordErrorsTo(&errors);
  if (!parser.ParseFromString(text, message)) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": not a text-format ", message->GetTypeName(), ": ",
                     errors.error().empty() ? "parse failed" : errors.error()));
  }
  return absl::OkStatus();
}

}  // namespace habitat
