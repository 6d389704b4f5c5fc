#include "testing/kineto_fixtures.h"

#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "common/file_io.h"
#include "common/status_macros.h"
#include "core/kineto/kineto_import.h"
#include "testing/files.h"

#ifndef HABITAT_TESTDATA_DIR
#error "HABITAT_TESTDATA_DIR must be defined"
#endif

namespace habitat::testing {
namespace {

absl::StatusOr<v1::Precision> FixturePrecision(const std::string& name) {
  if (name == "fp32") return v1::PRECISION_FP32;
  if (name == "bf16") return v1::PRECISION_AMP_BF16;
  if (name == "fp16") return v1::PRECISION_AMP_FP16;
  return absl::InvalidArgumentError(absl::StrCat("unknown fixture precision '", name, "'"));
}

absl::StatusOr<v1::Trace> ImportFixture(const std::string& path) {
  HABITAT_ASSIGN_OR_RETURN(FixtureLabels labels, ParseFixtureName(path));
  HABITAT_ASSIGN_OR_RETURN(std::string json, ReadFile(path));
  KinetoImportOptions options;
  options.model_name = std::move(labels.model_name);
  options.batch_size = labels.batch_size;
  options.precision = labels.precision;
  return ImportKinetoTrace(json, options);
}

}  // namespace

absl::StatusOr<FixtureLabels> ParseFixtureName(const std::string& path) {
  absl::string_view base(path);
  base.remove_prefix(path.find_last_of('/') + 1);  // npos + 1 == 0
  const bool named = absl::ConsumeSuffix(&base, ".json.gz");
  const std::string stem(base);
  const size_t precision_at = stem.rfind('_');
  const size_t batch_at = precision_at == std::string::npos || precision_at == 0
                              ? std::string::npos
                              : stem.rfind("_b", precision_at - 1);
  FixtureLabels labels;
  if (!named || batch_at == std::string::npos ||
      !absl::SimpleAtoi(stem.substr(batch_at + 2, precision_at - batch_at - 2),
                        &labels.batch_size)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not <model>_b<N>_<precision>"));
  }
  labels.model_name = stem.substr(0, batch_at);
  HABITAT_ASSIGN_OR_RETURN(labels.precision, FixturePrecision(stem.substr(precision_at + 1)));
  return labels;
}

absl::StatusOr<v1::Trace> LoadFixtureTrace(const std::string& relative) {
  return ImportFixture(absl::StrCat(HABITAT_TESTDATA_DIR, "/", relative));
}

absl::StatusOr<std::vector<v1::Trace>> LoadFixtureTraces(int count) {
  const std::string dir = absl::StrCat(HABITAT_TESTDATA_DIR, "/kineto/h100");
  const std::vector<std::string> files = FilesWithSuffix(dir, ".json.gz");
  if (static_cast<int>(files.size()) < count) {
    return absl::NotFoundError(absl::StrCat("only ", files.size(), " fixtures in ", dir));
  }
  std::vector<v1::Trace> traces;
  for (int i = 0; i < count; ++i) {
    HABITAT_ASSIGN_OR_RETURN(v1::Trace trace, ImportFixture(absl::StrCat(dir, "/", files[i])));
    traces.push_back(std::move(trace));
  }
  return traces;
}

}  // namespace habitat::testing
