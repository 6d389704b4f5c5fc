// Cloud price catalogs (data/catalogs/*.textproto) and inline catalogs sent
// with a request: loading, validation, and the price of one GPU-hour.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/devices/device_database.h"
#include "habitat/v1/device.pb.h"

namespace habitat {

// Checks what every catalog needs to be usable for pricing: a currency and,
// per entry, a known device id, an on-demand price that is finite and > 0
// and a spot price that is finite and >= 0 (0: none published). Errors name
// the field and index under `field_prefix`, e.g.
// "inline_catalog.prices[3].on_demand_per_gpu_hour must be finite and > 0".
absl::Status ValidateCatalog(const habitat::v1::PriceCatalog& catalog,
                             const DeviceDatabase& devices,
                             absl::string_view field_prefix = "inline_catalog");

// The catalog entry that prices `device_id`: the smallest instance with
// that GPU (fewest GPUs: a user who needs one GPU cannot rent a share of an
// 8-GPU instance, whose per-GPU price is often lower), the cheaper per
// GPU-hour among instances of the same size. For SPOT only entries with a
// published spot price count. nullptr if none matches.
const habitat::v1::GpuPrice* ChoosePrice(const habitat::v1::PriceCatalog& catalog,
                                         absl::string_view device_id, habitat::v1::PriceKind kind);

// The entry's price per GPU-hour of that kind; 0 where it has none and for
// UNSPECIFIED (the backend resolves a request's unspecified kind).
double PricePerGpuHour(const habitat::v1::GpuPrice& price, habitat::v1::PriceKind kind);

// gpus_per_instance, with 0 (not stated) read as 1.
uint32_t GpusPerInstance(const habitat::v1::GpuPrice& price);

class CatalogSet {
 public:
  // Loads every *.textproto in `dir` (sorted by file name). A catalog's
  // name defaults to the file stem. Server-side catalogs must also say where
  // and when their prices were read (source, retrieved as YYYY-MM-DD),
  // and each entry its instance type and region.
  static absl::StatusOr<CatalogSet> LoadFromDirectory(const std::string& dir,
                                                      const DeviceDatabase& devices);

  // The catalog of that name, in any case ("AWS"); NOT_FOUND (with the
  // closest name and the known ones) if none has it.
  absl::StatusOr<const habitat::v1::PriceCatalog*> Get(absl::string_view name) const;

  const std::vector<habitat::v1::PriceCatalog>& catalogs() const { return catalogs_; }

 private:
  CatalogSet() = default;

  std::vector<habitat::v1::PriceCatalog> catalogs_;
};

}  // namespace habitat
