#include "core/kineto/kineto_arguments.h"

#include <cmath>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"
#include "core/kineto/kineto_events.h"

namespace habitat {
namespace kineto {
namespace {

using habitat::v1::Argument;
using nlohmann::json;

absl::Status ArgError(size_t index, const json& event, absl::string_view field,
                      absl::string_view problem) {
  return absl::InvalidArgumentError(
      absl::StrCat(DescribeEvent(index, event), ": field \"args.", field, "\" ", problem));
}

// An optional array arg; nullptr when absent.
absl::StatusOr<const json*> OptionalArray(size_t index, const json& event, const json& args,
                                          const char* field) {
  auto it = args.find(field);
  if (it == args.end() || it->is_null()) return nullptr;
  if (!it->is_array()) {
    return ArgError(index, event, field, absl::StrCat("must be an array, got ", it->type_name()));
  }
  return &*it;
}

absl::StatusOr<std::vector<int64_t>> Shape(size_t index, const json& event, const json& dims,
                                           absl::string_view field) {
  if (!dims.is_array()) {
    return ArgError(index, event, field,
                    absl::StrCat("must be an array of integers, got ", dims.type_name()));
  }
  std::vector<int64_t> shape;
  shape.reserve(dims.size());
  for (const json& d : dims) {
    if (!d.is_number_integer() ||
        (d.is_number_unsigned() && d.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))) {
      return ArgError(index, event, field, absl::StrCat("must hold int64 sizes, got ", d.dump()));
    }
    shape.push_back(d.get<int64_t>());
  }
  return shape;
}

// "[2, 2]" -> {2, 2}; false if any element is not an integer.
bool ParseIntList(absl::string_view text, std::vector<int64_t>* out) {
  text = absl::StripAsciiWhitespace(text);
  if (!absl::ConsumePrefix(&text, "[") && !absl::ConsumePrefix(&text, "(")) {
    return false;
  }
  if (!absl::ConsumeSuffix(&text, "]") && !absl::ConsumeSuffix(&text, ")")) {
    return false;
  }
  if (absl::StripAsciiWhitespace(text).empty()) return true;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    int64_t v;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(part), &v)) return false;
    out->push_back(v);
  }
  return true;
}

bool ParseBool(absl::string_view text, bool* out) {
  if (text == "True" || text == "true") {
    *out = true;
    return true;
  }
  if (text == "False" || text == "false") {
    *out = false;
    return true;
  }
  return false;
}

// A non-tensor input from its IValue tag and its printed value.
void FillValue(absl::string_view tag, absl::string_view concrete, Argument* arg) {
  concrete = absl::StripAsciiWhitespace(concrete);
  if (concrete.empty() || concrete == "None") {
    arg->set_none(true);
    return;
  }
  int64_t i;
  double d;
  bool b;
  std::vector<int64_t> list;
  if (ParseBool(concrete, &b)) {
    arg->set_boolean(b);
  } else if (tag != "Double" && tag != "Scalar" && absl::SimpleAtoi(concrete, &i)) {
    arg->set_integer(i);
  } else if (absl::SimpleAtod(concrete, &d) && std::isfinite(d)) {
    arg->set_scalar(d);
  } else if (ParseIntList(concrete, &list)) {
    arg->mutable_integers()->mutable_values()->Add(list.begin(), list.end());
  } else {
    // Strings print quoted; keep the value without the quotes.
    if (concrete.size() >= 2 && (concrete.front() == '\'' || concrete.front() == '"') &&
        concrete.back() == concrete.front()) {
      concrete = concrete.substr(1, concrete.size() - 2);
    }
    arg->set_text(std::string(concrete));
  }
}

bool IsIValueTag(absl::string_view type) {
  // ATen dtype names are lower case or namespaced ("float", "c10::Half");
  // IValue tags are capitalised ("Int", "ScalarList", "TensorList").
  return !type.empty() && absl::ascii_isupper(static_cast<unsigned char>(type[0]));
}

}  // namespace

absl::StatusOr<std::vector<Argument>> ConvertArguments(size_t index, const json& event) {
  std::vector<Argument> out;
  auto args_it = event.find("args");
  if (args_it == event.end() || !args_it->is_object()) return out;
  const json& args = *args_it;
  HABITAT_ASSIGN_OR_RETURN(const json* dims, OptionalArray(index, event, args, "Input Dims"));
  HABITAT_ASSIGN_OR_RETURN(const json* types, OptionalArray(index, event, args, "Input type"));
  HABITAT_ASSIGN_OR_RETURN(const json* concrete,
                           OptionalArray(index, event, args, "Concrete Inputs"));
  if (types == nullptr) return out;  // record_shapes was off
  if (dims != nullptr && dims->size() != types->size()) {
    return ArgError(index, event, "Input Dims",
                    absl::StrCat("has ", dims->size(),
                                 " entries but "
                                 "\"Input type\" has ",
                                 types->size()));
  }
  for (size_t i = 0; i < types->size(); ++i) {
    const json& type_json = (*types)[i];
    if (!type_json.is_string()) {
      return ArgError(index, event, absl::StrCat("Input type[", i, "]"),
                      absl::StrCat("must be a string, got ", type_json.type_name()));
    }
    const std::string& type = type_json.get_ref<const std::string&>();
    std::string value;
    if (concrete != nullptr && i < concrete->size()) {
      const json& c = (*concrete)[i];
      if (!c.is_string()) {
        return ArgError(index, event, absl::StrCat("Concrete Inputs[", i, "]"),
                        absl::StrCat("must be a string, got ", c.type_name()));
      }
      value = c.get<std::string>();
    }
    const std::string name = absl::StrCat(i);
    if (type == "TensorList") {
      const json* list = dims != nullptr ? &(*dims)[i] : nullptr;
      if (list == nullptr || !list->is_array() || list->empty() || !(*list)[0].is_array()) {
        Argument arg;
        arg.set_name(name);
        arg.set_none(true);  // element shapes not recorded
        out.push_back(std::move(arg));
        continue;
      }
      for (size_t j = 0; j < list->size(); ++j) {
        const std::string field = absl::StrCat("Input Dims[", i, "][", j, "]");
        HABITAT_ASSIGN_OR_RETURN(std::vector<int64_t> shape,
                                 Shape(index, event, (*list)[j], field));
        Argument arg;
        arg.set_name(absl::StrCat(i, ".", j));
        arg.mutable_tensor()->mutable_shape()->Add(shape.begin(), shape.end());
        out.push_back(std::move(arg));
      }
      continue;
    }
    Argument arg;
    arg.set_name(name);
    if (type.empty()) {
      arg.set_none(true);
    } else if (IsIValueTag(type)) {
      FillValue(type, value, &arg);
    } else {
      if (dims == nullptr) {
        return ArgError(index, event, "Input Dims", "is missing but \"Input type\" names tensors");
      }
      HABITAT_ASSIGN_OR_RETURN(
          std::vector<int64_t> shape,
          Shape(index, event, (*dims)[i], absl::StrCat("Input Dims[", i, "]")));
      auto* tensor = arg.mutable_tensor();
      tensor->mutable_shape()->Add(shape.begin(), shape.end());
      tensor->set_dtype(type);
    }
    out.push_back(std::move(arg));
  }
  return out;
}

}  // namespace kineto
}  // namespace habitat
