#include "core/kernel_varying/op_config.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace habitat {
namespace kernel_varying {
namespace {

constexpr std::array<absl::string_view, kFamilyCount> kFamilyNames = {
    "linear", "bmm", "conv2d", "conv_transpose2d", "lstm", "sdpa"};

constexpr std::array<absl::string_view, kConfigColumnCount> kColumnNames = {
    "b",       "m",    "n",     "k",   "c_in",     "c_out",  "kernel", "stride",
    "padding", "size", "heads", "seq", "head_dim", "layers", "causal", "bias"};

}  // namespace

absl::string_view FamilyName(Family family) { return kFamilyNames[static_cast<size_t>(family)]; }

absl::StatusOr<Family> ParseFamily(absl::string_view name) {
  for (Family family : kAllFamilies) {
    if (FamilyName(family) == name) return family;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown operator family \"", name,
                   "\" (known: linear, bmm, conv2d, conv_transpose2d, lstm, "
                   "sdpa)"));
}

absl::string_view ConfigColumnName(size_t column) {
  return column < kConfigColumnCount ? kColumnNames[column] : "?";
}

absl::StatusOr<size_t> ParseConfigColumn(absl::string_view name) {
  for (size_t i = 0; i < kConfigColumnCount; ++i) {
    if (kColumnNames[i] == name) return i;
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown configuration column \"", name, "\""));
}

bool IsCudnnFamily(Family family) {
  return family == Family::kConv2d || family == Family::kConvTranspose2d || family == Family::kLstm;
}

std::string DescribeConfig(Family family, const OpConfig& config) {
  std::string out = absl::StrCat(FamilyName(family), "{");
  bool first = true;
  for (size_t i = 0; i < kConfigColumnCount; ++i) {
    if (config[i] == 0) continue;
    absl::StrAppend(&out, first ? "" : " ", kColumnNames[i], "=", config[i]);
    first = false;
  }
  out += "}";
  return out;
}

}  // namespace kernel_varying
}  // namespace habitat
