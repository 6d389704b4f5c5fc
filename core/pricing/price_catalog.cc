#include "core/pricing/price_catalog.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/spelling.h"
#include "common/status_macros.h"
#include "core/devices/text_proto_file.h"

namespace habitat {
namespace {

using habitat::v1::GpuPrice;
using habitat::v1::PriceCatalog;
using habitat::v1::PriceKind;

constexpr absl::string_view kExtension = ".textproto";

// A date written YYYY-MM-DD (digits in the right places, month 01-12, day
// 01-31); enough to catch "last week" or "2024/05/01".
bool IsIsoDate(absl::string_view s) {
  if (s.size() != 10 || s[4] != '-' || s[7] != '-') return false;
  for (int i : {0, 1, 2, 3, 5, 6, 8, 9}) {
    if (!absl::ascii_isdigit(s[i])) return false;
  }
  const int month = (s[5] - '0') * 10 + (s[6] - '0');
  const int day = (s[8] - '0') * 10 + (s[9] - '0');
  return month >= 1 && month <= 12 && day >= 1 && day <= 31;
}

// Requirements that apply only to the server's own catalog files: they are
// published as facts, so they must say where they come from.
absl::Status ValidateFileCatalog(const PriceCatalog& catalog) {
  if (catalog.provider().empty()) {
    return absl::InvalidArgumentError("provider must not be empty");
  }
  if (catalog.source().empty()) {
    return absl::InvalidArgumentError("source must not be empty");
  }
  if (!IsIsoDate(catalog.retrieved())) {
    return absl::InvalidArgumentError(
        absl::StrCat("retrieved must be a date YYYY-MM-DD (got \"", catalog.retrieved(), "\")"));
  }
  for (int i = 0; i < catalog.prices_size(); ++i) {
    const GpuPrice& price = catalog.prices(i);
    if (price.instance_type().empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("prices[", i, "].instance_type must not be empty"));
    }
    if (price.region().empty()) {
      return absl::InvalidArgumentError(absl::StrCat("prices[", i, "].region must not be empty"));
    }
    if (price.gpus_per_instance() == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("prices[", i, "].gpus_per_instance must be at least 1"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<PriceCatalog> LoadCatalogFile(const std::filesystem::path& path,
                                             const DeviceDatabase& devices) {
  const std::string file = path.filename().string();
  PriceCatalog catalog;
  HABITAT_RETURN_IF_ERROR(ReadTextProtoFile(path.string(), &catalog));
  if (catalog.name().empty()) catalog.set_name(path.stem().string());
  // Prefix with "<file>: " rather than a field path: the file is the object.
  absl::Status status = ValidateCatalog(catalog, devices, "");
  if (status.ok()) status = ValidateFileCatalog(catalog);
  if (!status.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(file, ": ", status.message()));
  }
  return catalog;
}

}  // namespace

absl::Status ValidateCatalog(const PriceCatalog& catalog, const DeviceDatabase& devices,
                             absl::string_view field_prefix) {
  const std::string prefix = field_prefix.empty() ? "" : absl::StrCat(field_prefix, ".");
  if (absl::StripAsciiWhitespace(catalog.currency()).empty()) {
    return absl::InvalidArgumentError(absl::StrCat(prefix, "currency must not be empty"));
  }
  if (catalog.prices().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(prefix, "prices must list at least one GPU"));
  }
  for (int i = 0; i < catalog.prices_size(); ++i) {
    const GpuPrice& price = catalog.prices(i);
    const std::string field = absl::StrCat(prefix, "prices[", i, "].");
    if (devices.Find(price.device_id()) == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, "device_id \"", price.device_id(),
                       "\" is not a known GPU id; known ids: ", devices.KnownIds()));
    }
    const double on_demand = price.on_demand_per_gpu_hour();
    if (!std::isfinite(on_demand) || on_demand <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(field,
                       "on_demand_per_gpu_hour must be finite and > 0 "
                       "(got ",
                       on_demand, ")"));
    }
    const double spot = price.spot_per_gpu_hour();
    if (!std::isfinite(spot) || spot < 0) {
      return absl::InvalidArgumentError(absl::StrCat(field,
                                                     "spot_per_gpu_hour must be finite and >= 0 "
                                                     "(got ",
                                                     spot, ")"));
    }
    // Up to 100 Tb/s per instance: today's largest carry 3.2-3.6 Tb/s.
    const double network = price.network_gbps();
    if (!std::isfinite(network) || network < 0 || network > 100'000) {
      return absl::InvalidArgumentError(absl::StrCat(
          field, "network_gbps must be within [0, 100000] (Gb/s per instance; got ", network, ")"));
    }
  }
  return absl::OkStatus();
}

double PricePerGpuHour(const GpuPrice& price, PriceKind kind) {
  switch (kind) {
    case habitat::v1::PRICE_KIND_ON_DEMAND:
      return price.on_demand_per_gpu_hour();
    case habitat::v1::PRICE_KIND_SPOT:
      return price.spot_per_gpu_hour();
    default:
      return 0.0;
  }
}

uint32_t GpusPerInstance(const GpuPrice& price) {
  return std::max<uint32_t>(price.gpus_per_instance(), 1);
}

const GpuPrice* ChoosePrice(const PriceCatalog& catalog, absl::string_view device_id,
                            PriceKind kind) {
  const GpuPrice* best = nullptr;
  for (const GpuPrice& price : catalog.prices()) {
    if (price.device_id() != device_id) continue;
    if (!(PricePerGpuHour(price, kind) > 0)) continue;  // no spot price published
    if (best == nullptr || std::pair(GpusPerInstance(price), PricePerGpuHour(price, kind)) <
                               std::pair(GpusPerInstance(*best), PricePerGpuHour(*best, kind))) {
      best = &price;
    }
  }
  return best;
}

absl::StatusOr<CatalogSet> CatalogSet::LoadFromDirectory(const std::string& dir,
                                                         const DeviceDatabase& devices) {
  std::error_code ec;
  std::filesystem::directory_iterator it(dir, ec);
  if (ec) {
    return absl::NotFoundError(
        absl::StrCat("cannot list catalog directory ", dir, ": ", ec.message()));
  }
  std::vector<std::filesystem::path> files;
  for (const auto& entry : it) {
    const std::string name = entry.path().filename().string();
    if (entry.is_regular_file(ec) && absl::EndsWith(name, kExtension)) {
      files.push_back(entry.path());
    }
  }
  // Sorted, so the order (and ListCatalogs output) does not depend on the
  // file system.
  std::sort(files.begin(), files.end());
  if (files.empty()) {
    return absl::NotFoundError(absl::StrCat("no *", kExtension, " catalogs in ", dir));
  }

  CatalogSet set;
  absl::flat_hash_set<std::string> names;
  for (const auto& path : files) {
    HABITAT_ASSIGN_OR_RETURN(PriceCatalog catalog, LoadCatalogFile(path, devices));
    if (!names.insert(catalog.name()).second) {
      return absl::InvalidArgumentError(absl::StrCat(path.filename().string(), ": catalog name \"",
                                                     catalog.name(), "\" is used by another file"));
    }
    set.catalogs_.push_back(std::move(catalog));
  }
  return set;
}

absl::StatusOr<const PriceCatalog*> CatalogSet::Get(absl::string_view name) const {
  for (const PriceCatalog& catalog : catalogs_) {
    if (catalog.name() == name) return &catalog;
  }
  // People type "AWS" as often as "aws".
  for (const PriceCatalog& catalog : catalogs_) {
    if (absl::EqualsIgnoreCase(catalog.name(), name)) return &catalog;
  }
  std::vector<std::string> names;
  for (const PriceCatalog& catalog : catalogs_) names.push_back(catalog.name());
  return absl::NotFoundError(absl::StrCat("unknown price catalog \"", name, "\"",
                                          DidYouMean(name, names),
                                          "; known catalogs: ", absl::StrJoin(names, ", ")));
}

}  // namespace habitat
