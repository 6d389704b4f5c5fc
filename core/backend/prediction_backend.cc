#include "core/backend/prediction_backend.h"

#include <dirent.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "core/trace/trace_id.h"
#include "core/trace/trace_validation.h"

namespace habitat {
namespace {

constexpr char kTenantsSubdir[] = "/tenants";

absl::Status CheckDeadline(const RequestContext& context, const char* stage) {
  if (absl::Now() <= context.deadline) return absl::OkStatus();
  return absl::DeadlineExceededError(
      absl::StrCat("stopped ", stage, ": past ", context.deadline_source));
}

// Tenant names found under <trace_dir>/tenants, so that traces stored
// before a restart count in stored_traces() from the start.
std::vector<std::string> ExistingTenants(const std::string& trace_dir) {
  std::vector<std::string> tenants;
  if (DIR* dir = ::opendir((trace_dir + kTenantsSubdir).c_str())) {
    while (dirent* entry = ::readdir(dir)) {
      if (IsValidTenantName(entry->d_name)) tenants.emplace_back(entry->d_name);
    }
    ::closedir(dir);
  }
  return tenants;
}

}  // namespace

bool IsValidTenantName(const std::string& name) {
  if (name.empty() || name.size() > 64 || name[0] == '.') return false;
  for (const char c : name) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' &&
        c != '-') {
      return false;
    }
  }
  return true;
}

absl::StatusOr<std::unique_ptr<PredictionBackend>> PredictionBackend::Create(
    const BackendOptions& options) {
  HABITAT_ASSIGN_OR_RETURN(DeviceDatabase devices,
                           DeviceDatabase::LoadFromFile(options.data_dir + "/devices.textproto"));
  HABITAT_ASSIGN_OR_RETURN(CatalogSet catalogs,
                           CatalogSet::LoadFromDirectory(options.data_dir + "/catalogs", devices));
  std::unique_ptr<TraceStore> store;
  if (options.trace_dir.empty()) {
    store = std::make_unique<InMemoryTraceStore>();
  } else {
    HABITAT_ASSIGN_OR_RETURN(store, DirectoryTraceStore::Open(options.trace_dir));
  }
  std::unique_ptr<PredictionBackend> backend(new PredictionBackend(
      options, std::move(devices), std::move(catalogs), std::move(store)));
  if (!options.trace_dir.empty()) {
    for (const std::string& tenant : ExistingTenants(options.trace_dir)) {
      HABITAT_RETURN_IF_ERROR(backend->StoreFor(tenant).status());
    }
  }
  return backend;
}

PredictionBackend::PredictionBackend(const BackendOptions& options, DeviceDatabase devices,
                                     CatalogSet catalogs,
                                     std::unique_ptr<TraceStore> anonymous_store)
    : trace_dir_(options.trace_dir),
      limits_(options.trace_limits),
      devices_(std::move(devices)),
      catalogs_(std::move(catalogs)),
      anonymous_store_(std::move(anonymous_store)),
      cache_(std::make_shared<PredictionCache>(options.cache_entries)),
      engine_(&devices_, cache_) {}

absl::StatusOr<TraceStore*> PredictionBackend::StoreFor(const std::string& tenant) {
  if (tenant.empty()) return anonymous_store_.get();
  // Tenant names come from the server's token file, never from a request,
  // but they become paths: check anyway.
  if (!IsValidTenantName(tenant)) {
    return absl::InternalError("the authenticated tenant name is not usable");
  }
  absl::MutexLock lock(&stores_mutex_);
  auto it = tenant_stores_.find(tenant);
  if (it != tenant_stores_.end()) return it->second.get();
  std::unique_ptr<TraceStore> store;
  if (trace_dir_.empty()) {
    store = std::make_unique<InMemoryTraceStore>();
  } else {
    const std::string parent = trace_dir_ + kTenantsSubdir;
    if (::mkdir(parent.c_str(), 0755) != 0 && errno != EEXIST) {
      return absl::UnavailableError(
          absl::StrCat("cannot create '", parent, "': ", std::strerror(errno)));
    }
    HABITAT_ASSIGN_OR_RETURN(store, DirectoryTraceStore::Open(parent + "/" + tenant));
  }
  TraceStore* result = store.get();
  tenant_stores_.emplace(tenant, std::move(store));
  return result;
}

size_t PredictionBackend::stored_traces() {
  size_t total = anonymous_store_->size();
  absl::MutexLock lock(&stores_mutex_);
  for (auto& [tenant, store] : tenant_stores_) total += store->size();
  return total;
}

absl::StatusOr<v1::PredictResponse> PredictionBackend::Predict(
    const v1::PredictRequest& request, const RequestContext& context,
    PredictionStats* stats) {
  HABITAT_RETURN_IF_ERROR(CheckDeadline(context, "before reading the trace"));
  std::shared_ptr<const v1::Trace> trace;
  std::string trace_id;
  switch (request.trace_source_case()) {
    case v1::PredictRequest::kTrace:
      // Aliasing pointer: no copy of a possibly large inline trace.
      trace = std::shared_ptr<const v1::Trace>(std::shared_ptr<void>(), &request.trace());
      break;
    case v1::PredictRequest::kTraceId: {
      if (!IsWellFormedTraceId(request.trace_id())) {
        return absl::InvalidArgumentError(absl::StrCat(
            "trace_id '", request.trace_id(), "' is not of the form sha256:<64 hex digits>"));
      }
      // Another tenant's trace is simply not in this tenant's store, so
      // the answer is the same NOT_FOUND as for an id nobody uploaded.
      HABITAT_ASSIGN_OR_RETURN(TraceStore * store, StoreFor(context.tenant));
      HABITAT_ASSIGN_OR_RETURN(trace, store->Get(request.trace_id()));
      trace_id = request.trace_id();
      break;
    }
    default:
      return absl::InvalidArgumentError(
          "the request needs a trace: set `trace` or `trace_id` (from UploadTrace)");
  }

  // Stored traces were validated by UploadTrace; inline ones are checked
  // here against the configured limits (the engine would use the defaults).
  if (trace_id.empty()) HABITAT_RETURN_IF_ERROR(ValidateTrace(*trace, limits_));
  PredictionQuery query;
  query.devices.assign(request.devices().begin(), request.devices().end());
  query.include_breakdown = request.include_breakdown();
  query.trace_already_validated = true;
  if (!v1::PriceKind_IsValid(request.price_kind())) {
    return absl::InvalidArgumentError(
        absl::StrCat("price_kind ", request.price_kind(), " is not a known PriceKind"));
  }
  query.price_kind = request.price_kind() == v1::PRICE_KIND_UNSPECIFIED
                         ? v1::PRICE_KIND_ON_DEMAND
                         : request.price_kind();
  if (request.pricing_case() == v1::PredictRequest::kCatalog && !request.catalog().empty()) {
    HABITAT_ASSIGN_OR_RETURN(query.catalog, catalogs_.Get(request.catalog()));
  } else if (request.pricing_case() == v1::PredictRequest::kInlineCatalog) {
    HABITAT_RETURN_IF_ERROR(ValidateCatalog(request.inline_catalog(), devices_));
    query.catalog = &request.inline_catalog();
  }
  HABITAT_RETURN_IF_ERROR(CheckDeadline(context, "before predicting"));
  return engine_.Predict(*trace, std::move(trace_id), query, stats);
}

absl::StatusOr<v1::UploadTraceResponse> PredictionBackend::UploadTrace(
    const v1::UploadTraceRequest& request, const RequestContext& context) {
  if (!request.has_trace()) {
    return absl::InvalidArgumentError("UploadTrace needs `trace`");
  }
  HABITAT_RETURN_IF_ERROR(CheckDeadline(context, "before validating the trace"));
  HABITAT_RETURN_IF_ERROR(ValidateTrace(request.trace(), limits_));
  // Reject traces we could never predict from before storing them.
  HABITAT_RETURN_IF_ERROR(engine_.ResolveOrigin(request.trace()).status());
  HABITAT_ASSIGN_OR_RETURN(TraceStore * store, StoreFor(context.tenant));
  // Checked before the write only: once stored, the id is acknowledged.
  HABITAT_RETURN_IF_ERROR(CheckDeadline(context, "before storing the trace"));
  HABITAT_ASSIGN_OR_RETURN(StoredTrace stored, store->Put(request.trace()));
  v1::UploadTraceResponse response;
  response.set_trace_id(stored.id);
  response.set_created(stored.created);
  return response;
}

v1::ListDevicesResponse PredictionBackend::ListDevices(
    const v1::ListDevicesRequest& request) const {
  v1::ListDevicesResponse response;
  for (const auto& spec : devices_.devices()) {
    if (spec.test_only() && !request.include_test_only()) continue;
    *response.add_devices() = spec;
  }
  return response;
}

v1::ListCatalogsResponse PredictionBackend::ListCatalogs() const {
  v1::ListCatalogsResponse response;
  for (const auto& catalog : catalogs_.catalogs()) *response.add_catalogs() = catalog;
  return response;
}

}  // namespace habitat
