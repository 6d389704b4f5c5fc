#include "core/backend/prediction_backend.h"

#include <stdlib.h>

#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <set>

#include "absl/time/clock.h"
#include "common/file_io.h"
#include "core/testing/trace_fixtures.h"
#include "gtest/gtest.h"

namespace habitat {
namespace {

class BackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    BackendOptions options;
    options.data_dir = HABITAT_DATA_DIR;
    auto backend = PredictionBackend::Create(options, std::make_unique<InMemoryTraceStore>());
    ASSERT_TRUE(backend.ok()) << backend.status();
    backend_ = std::move(*backend);
    auto trace = testing::LoadKinetoFixture("h100", "transformer_b32_bf16", 32);
    ASSERT_TRUE(trace.ok()) << trace.status();
    trace_ = std::move(*trace);
  }

  std::unique_ptr<PredictionBackend> backend_;
  v1::Trace trace_;
};

TEST_F(BackendTest, TheServerChoosesTheCatalogWhenTheRequestNamesNone) {
  EXPECT_EQ(backend_->default_catalog(), kPreferredDefaultCatalog);
  v1::PredictRequest request;
  *request.mutable_trace() = trace_;
  request.add_devices("L4");
  auto priced = backend_->Predict(request);
  ASSERT_TRUE(priced.ok()) << priced.status();
  EXPECT_EQ(priced->catalog(), "aws");
  EXPECT_TRUE(priced->predictions(0).has_price());
  for (const std::string none : {"none", ""}) {
    request.set_catalog(none);
    auto unpriced = backend_->Predict(request);
    ASSERT_TRUE(unpriced.ok()) << unpriced.status();
    EXPECT_EQ(unpriced->catalog(), "") << none;
    EXPECT_FALSE(unpriced->predictions(0).has_price()) << none;
  }
}

TEST(BackendDefaultCatalogTest, TheDeploymentNamesItOrTurnsItOff) {
  BackendOptions options;
  options.data_dir = HABITAT_DATA_DIR;
  options.default_catalog = "gcp";
  auto gcp = PredictionBackend::Create(options, std::make_unique<InMemoryTraceStore>());
  ASSERT_TRUE(gcp.ok()) << gcp.status();
  EXPECT_EQ((*gcp)->default_catalog(), "gcp");
  // Listed for clients that check the prices before predicting (--plot).
  EXPECT_TRUE((*gcp)->ListCatalogs().has_default_catalog());
  EXPECT_EQ((*gcp)->ListCatalogs().default_catalog(), "gcp");
  options.default_catalog = kNoCatalog;
  auto none = PredictionBackend::Create(options, std::make_unique<InMemoryTraceStore>());
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_EQ((*none)->default_catalog(), "");
  EXPECT_TRUE((*none)->ListCatalogs().has_default_catalog());
  EXPECT_EQ((*none)->ListCatalogs().default_catalog(), "");
  options.default_catalog = "nosuch";
  auto bad = PredictionBackend::Create(options, std::make_unique<InMemoryTraceStore>());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("the default catalog"), std::string::npos) << bad.status();
}

TEST_F(BackendTest, UploadThenPredictByIdMatchesInline) {
  v1::UploadTraceRequest upload;
  *upload.mutable_trace() = trace_;
  auto stored = backend_->UploadTrace(upload);
  ASSERT_TRUE(stored.ok()) << stored.status();
  EXPECT_TRUE(stored->created());
  auto again = backend_->UploadTrace(upload);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->created());
  EXPECT_EQ(again->trace_id(), stored->trace_id());

  v1::PredictRequest by_id;
  by_id.set_trace_id(stored->trace_id());
  by_id.add_devices("H200");
  by_id.add_devices("L4");
  by_id.set_catalog("aws");
  v1::PredictRequest inline_request = by_id;
  *inline_request.mutable_trace() = trace_;
  auto a = backend_->Predict(by_id);
  auto b = backend_->Predict(inline_request);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(a->SerializeAsString(), b->SerializeAsString());
  EXPECT_EQ(a->catalog(), "aws");
  EXPECT_EQ(a->predictions_size(), 2);
}

// The bf16 Transformer fixture is host-bound on the H100 (about 57 ms wall
// for 9 ms of GPU time): a faster target host shortens its wall time, not its
// GPU time; a prediction for one host speed is never served for another.
TEST_F(BackendTest, TargetHostSpeedMovesOnlyTheWallTimeOfAHostBoundIteration) {
  v1::PredictRequest request;
  *request.mutable_trace() = trace_;
  request.add_devices("H200");
  auto same_host = backend_->Predict(request);
  ASSERT_TRUE(same_host.ok()) << same_host.status();
  request.set_target_host_speed(2.0);
  auto faster_host = backend_->Predict(request);
  ASSERT_TRUE(faster_host.ok()) << faster_host.status();
  const auto& a = same_host->predictions(0);
  const auto& b = faster_host->predictions(0);
  ASSERT_GT(a.wall_time_ns(), 0);
  ASSERT_FALSE(a.wall_time_is_gpu_time());
  EXPECT_TRUE(a.host_bound());
  EXPECT_EQ(b.gpu_time_ns(), a.gpu_time_ns());
  EXPECT_LT(b.wall_time_ns(), a.wall_time_ns() * 3 / 4);
  EXPECT_GE(b.wall_time_ns(), a.wall_time_ns() / 2);

  for (double edge : {kMinTargetHostSpeed, kMaxTargetHostSpeed}) {
    request.set_target_host_speed(edge);
    auto accepted = backend_->Predict(request);
    ASSERT_TRUE(accepted.ok()) << edge << ": " << accepted.status();
    EXPECT_GT(accepted->predictions(0).wall_time_ns(), 0);
    // At most 1/0.01 times the origin host's share: never years.
    EXPECT_LT(accepted->predictions(0).wall_time_ns(), a.wall_time_ns() * 101);
  }
  for (double bad : {-1.0, 101.0, std::nan(""), 1e-12, 1e-300, 0.0099,
                     std::numeric_limits<double>::infinity()}) {
    request.set_target_host_speed(bad);
    auto rejected = backend_->Predict(request);
    ASSERT_FALSE(rejected.ok()) << bad;
    EXPECT_EQ(rejected.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(rejected.status().message().find("target_host_speed"), std::string::npos);
  }
}

TEST_F(BackendTest, InlineCatalogPricesTheRequest) {
  v1::PredictRequest request;
  *request.mutable_trace() = trace_;
  request.add_devices("H100-SXM");
  auto* catalog = request.mutable_inline_catalog();
  catalog->set_name("on-prem");
  catalog->set_currency("EUR");
  catalog->set_source("amortised cluster cost");
  catalog->set_retrieved("2026-11-22");
  auto* price = catalog->add_prices();
  price->set_device_id("H100-SXM");
  price->set_on_demand_per_gpu_hour(1.25);
  auto response = backend_->Predict(request);
  ASSERT_TRUE(response.ok()) << response.status();
  ASSERT_EQ(response->predictions_size(), 1);
  const auto& p = response->predictions(0);
  EXPECT_TRUE(p.has_price());
  EXPECT_DOUBLE_EQ(p.price_per_hour(), 1.25);
  EXPECT_EQ(p.rank_by_cost(), 1u);
  EXPECT_EQ(response->currency(), "EUR");
  EXPECT_TRUE(p.is_origin());
}

TEST_F(BackendTest, BadRequestsGetActionableErrors) {
  struct Case {
    const char* name;
    absl::StatusCode code;
    const char* message_part;
    std::function<void(v1::PredictRequest*)> build;
  };
  const std::vector<Case> cases = {
      {"no trace", absl::StatusCode::kInvalidArgument, "trace_id", [](v1::PredictRequest*) {}},
      {"malformed id", absl::StatusCode::kInvalidArgument,
       "sha256:", [](v1::PredictRequest* r) { r->set_trace_id("abc"); }},
      {"unknown id", absl::StatusCode::kNotFound, "UploadTrace",
       [](v1::PredictRequest* r) { r->set_trace_id("sha256:" + std::string(64, 'b')); }},
      {"unknown catalog", absl::StatusCode::kNotFound, "nope",
       [this](v1::PredictRequest* r) {
         *r->mutable_trace() = trace_;
         r->set_catalog("nope");
       }},
      {"negative price", absl::StatusCode::kInvalidArgument, "prices[0]",
       [this](v1::PredictRequest* r) {
         *r->mutable_trace() = trace_;
         auto* c = r->mutable_inline_catalog();
         c->set_currency("USD");
         c->set_source("x");
         c->set_retrieved("2026-11-22");
         auto* p = c->add_prices();
         p->set_device_id("T4");
         p->set_on_demand_per_gpu_hour(-1);
       }},
      {"NaN price", absl::StatusCode::kInvalidArgument, "prices[0]",
       [this](v1::PredictRequest* r) {
         *r->mutable_trace() = trace_;
         auto* c = r->mutable_inline_catalog();
         c->set_currency("USD");
         c->set_source("x");
         c->set_retrieved("2026-11-22");
         auto* p = c->add_prices();
         p->set_device_id("T4");
         p->set_on_demand_per_gpu_hour(std::nan(""));
       }},
      {"unknown price kind", absl::StatusCode::kInvalidArgument, "price_kind",
       [this](v1::PredictRequest* r) {
         *r->mutable_trace() = trace_;
         r->set_price_kind(static_cast<v1::PriceKind>(42));
       }},
      {"unknown device", absl::StatusCode::kNotFound, "GTX 9999",
       [this](v1::PredictRequest* r) {
         *r->mutable_trace() = trace_;
         r->add_devices("GTX 9999");
       }},
  };
  for (const auto& c : cases) {
    v1::PredictRequest request;
    c.build(&request);
    auto response = backend_->Predict(request);
    EXPECT_EQ(response.status().code(), c.code) << c.name << ": " << response.status();
    EXPECT_NE(response.status().message().find(c.message_part), std::string::npos)
        << c.name << ": " << response.status();
  }
  v1::UploadTraceRequest empty_upload;
  EXPECT_EQ(backend_->UploadTrace(empty_upload).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(BackendTest, TenantsSeeOnlyTheirOwnTraces) {
  v1::UploadTraceRequest upload;
  *upload.mutable_trace() = trace_;
  RequestContext alpha, beta, anonymous;
  alpha.tenant = "alpha";
  beta.tenant = "beta";
  auto stored = backend_->UploadTrace(upload, alpha);
  ASSERT_TRUE(stored.ok()) << stored.status();
  EXPECT_TRUE(stored->created());

  v1::PredictRequest by_id;
  by_id.set_trace_id(stored->trace_id());
  by_id.add_devices("H200");
  EXPECT_TRUE(backend_->Predict(by_id, alpha).ok());
  const std::string unknown_id = "sha256:" + std::string(64, 'c');
  v1::PredictRequest unknown = by_id;
  unknown.set_trace_id(unknown_id);
  for (const RequestContext* other : {&beta, &anonymous}) {
    auto foreign = backend_->Predict(by_id, *other);
    auto never = backend_->Predict(unknown, *other);
    EXPECT_EQ(foreign.status().code(), absl::StatusCode::kNotFound);
    // Word for word what an id nobody uploaded gets.
    std::string expected(never.status().message());
    expected.replace(expected.find(unknown_id), unknown_id.size(), stored->trace_id());
    EXPECT_EQ(foreign.status().message(), expected);
  }
  // The same content is a new trace in another namespace, under the same id.
  auto beta_stored = backend_->UploadTrace(upload, beta);
  ASSERT_TRUE(beta_stored.ok());
  EXPECT_TRUE(beta_stored->created());
  EXPECT_EQ(beta_stored->trace_id(), stored->trace_id());
  EXPECT_EQ(backend_->stored_traces(), 2u);

  RequestContext bad;
  bad.tenant = "../escape";
  EXPECT_EQ(backend_->UploadTrace(upload, bad).status().code(), absl::StatusCode::kInternal);
}

// A cache shared by tenants is a timing oracle: a fast answer to an inline
// trace would tell one tenant that another had predicted the same bytes.
TEST_F(BackendTest, TenantsDoNotShareCachedPredictions) {
  v1::PredictRequest inline_trace;
  *inline_trace.mutable_trace() = trace_;
  inline_trace.add_devices("H200");
  inline_trace.add_devices("A100-SXM-80GB");
  RequestContext alpha, beta;
  alpha.tenant = "alpha";
  beta.tenant = "beta";
  PredictionStats first, other_tenant, again;
  ASSERT_TRUE(backend_->Predict(inline_trace, alpha, &first).ok());
  ASSERT_TRUE(backend_->Predict(inline_trace, beta, &other_tenant).ok());
  ASSERT_TRUE(backend_->Predict(inline_trace, alpha, &again).ok());
  EXPECT_EQ(first.cache_misses, 2);
  EXPECT_EQ(other_tenant.cache_hits, 0);
  EXPECT_EQ(other_tenant.cache_misses, 2);
  EXPECT_EQ(again.cache_hits, 2);
}

TEST(BackendDirectoryTest, TenantTracesPersistInTheirOwnDirectories) {
  std::string dir = ::testing::TempDir() + "/backend_tenants_XXXXXX";
  ASSERT_NE(mkdtemp(dir.data()), nullptr);
  BackendOptions options;
  options.data_dir = HABITAT_DATA_DIR;
  auto trace = testing::LoadKinetoFixture("h100", "resnet50_b16_fp32", 16);
  ASSERT_TRUE(trace.ok()) << trace.status();
  v1::UploadTraceRequest upload;
  *upload.mutable_trace() = *trace;
  RequestContext alpha;
  alpha.tenant = "alpha";
  std::string id;
  // As a server with --store=dir:DIR opens it, twice.
  const auto open_store = [&dir] { return DirectoryTraceStore::Open(dir, TraceStoreOptions()); };
  {
    auto store = open_store();
    ASSERT_TRUE(store.ok()) << store.status();
    auto backend = PredictionBackend::Create(options, std::move(*store));
    ASSERT_TRUE(backend.ok()) << backend.status();
    auto stored = (*backend)->UploadTrace(upload, alpha);
    ASSERT_TRUE(stored.ok()) << stored.status();
    id = stored->trace_id();
  }
  EXPECT_TRUE(ReadFile(dir + "/tenants/alpha/" + id.substr(7) + ".trace").ok());
  auto reopened = open_store();
  ASSERT_TRUE(reopened.ok()) << reopened.status();
  auto restarted = PredictionBackend::Create(options, std::move(*reopened));
  ASSERT_TRUE(restarted.ok());
  EXPECT_GE((*restarted)->stored_traces(), 1u);
  v1::PredictRequest by_id;
  by_id.set_trace_id(id);
  by_id.add_devices("H200");
  EXPECT_TRUE((*restarted)->Predict(by_id, alpha).ok());
  EXPECT_EQ((*restarted)->Predict(by_id).status().code(), absl::StatusCode::kNotFound);
}

TEST(BackendLimitsTest, ConfiguredTraceLimitsApplyToUploadsAndInlineTraces) {
  BackendOptions options;
  options.data_dir = HABITAT_DATA_DIR;
  options.trace_limits.max_operations = 10;
  auto backend = PredictionBackend::Create(options, std::make_unique<InMemoryTraceStore>());
  ASSERT_TRUE(backend.ok()) << backend.status();
  auto trace = testing::LoadKinetoFixture("h100", "resnet50_b16_fp32", 16);
  ASSERT_TRUE(trace.ok()) << trace.status();
  ASSERT_GT(trace->operations_size(), 10);
  v1::UploadTraceRequest upload;
  *upload.mutable_trace() = *trace;
  auto stored = (*backend)->UploadTrace(upload);
  EXPECT_EQ(stored.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(stored.status().message().find("the limit (max_operations) is 10"), std::string::npos)
      << stored.status();
  v1::PredictRequest request;
  *request.mutable_trace() = *trace;
  auto predicted = (*backend)->Predict(request);
  EXPECT_EQ(predicted.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(predicted.status().message().find("(max_operations) is 10"), std::string::npos);
}

TEST_F(BackendTest, PassedDeadlineStopsWorkAndStoresNothing) {
  RequestContext late;
  late.deadline = absl::Now() - absl::Seconds(1);
  late.deadline_source = "the test's deadline";
  v1::UploadTraceRequest upload;
  *upload.mutable_trace() = trace_;
  auto stored = backend_->UploadTrace(upload, late);
  EXPECT_EQ(stored.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_NE(stored.status().message().find("past the test's deadline"), std::string::npos);
  EXPECT_EQ(backend_->stored_traces(), 0u);
  v1::PredictRequest request;
  *request.mutable_trace() = trace_;
  EXPECT_EQ(backend_->Predict(request, late).status().code(), absl::StatusCode::kDeadlineExceeded);
}

TEST(TenantNameTest, OnlyPathSafeNames) {
  EXPECT_TRUE(IsValidTenantName("team-a.prod_1"));
  EXPECT_FALSE(IsValidTenantName(""));
  EXPECT_FALSE(IsValidTenantName("."));
  EXPECT_FALSE(IsValidTenantName(".."));
  EXPECT_FALSE(IsValidTenantName("a/b"));
  EXPECT_FALSE(IsValidTenantName("a b"));
  EXPECT_FALSE(IsValidTenantName(std::string(65, 'a')));
}

TEST_F(BackendTest, ListsDevicesAndCatalogs) {
  auto devices = backend_->ListDevices(v1::ListDevicesRequest());
  EXPECT_GE(devices.devices_size(), 20);
  auto catalogs = backend_->ListCatalogs();
  EXPECT_GE(catalogs.catalogs_size(), 4);
}

// An agent trace that recorded its memory (tests/testdata/agent_suite/
// h100_memory: ResNet-50, batch 16, fp32, on an H100).
v1::Trace AgentTraceWithMemory() {
  v1::Trace trace;
  auto bytes = ReadFile(std::string(HABITAT_TESTDATA_DIR) +
                        "/agent_suite/h100_memory/resnet50_b16_fp32.trace.gz");
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  if (bytes.ok()) {
    EXPECT_TRUE(trace.ParseFromString(*bytes));
  }
  EXPECT_TRUE(trace.has_memory());
  return trace;
}

TEST_F(BackendTest, FitPredictsEachGpuAtTheLargestBatchThatFitsAndRanksThemAll) {
  v1::PredictRequest request;
  *request.mutable_trace() = AgentTraceWithMemory();
  for (const char* id : {"T4", "L4", "A100-SXM-40GB", "H100-SXM", "H200"}) request.add_devices(id);
  request.mutable_fit();
  auto fitted = backend_->Predict(request);
  ASSERT_TRUE(fitted.ok()) << fitted.status();
  EXPECT_EQ(fitted->batch_size(), 0u);
  EXPECT_EQ(fitted->traced_batch_size(), 16u);
  std::map<std::string, uint32_t> batch;
  std::set<uint32_t> cost_ranks;
  for (const v1::DevicePrediction& p : fitted->predictions()) {
    ASSERT_TRUE(p.has_memory()) << p.device_id();
    EXPECT_TRUE(p.memory().fits()) << p.device_id();
    EXPECT_EQ(p.batch_size(), p.memory().largest_fitting_batch()) << p.device_id();
    EXPECT_EQ(p.batch_size() & (p.batch_size() - 1), 0u) << p.device_id();
    EXPECT_LT(p.memory().peak_allocated_bytes(), p.memory().usable_bytes()) << p.device_id();
    EXPECT_NEAR(p.samples_per_second(), p.batch_size() / (p.wall_time_ns() / 1e9),
                1e-6 * p.samples_per_second());
    EXPECT_GT(p.rank_by_time(), 0u);
    cost_ranks.insert(p.rank_by_cost());
    batch[p.device_id()] = p.batch_size();
  }
  EXPECT_EQ(cost_ranks, (std::set<uint32_t>{1, 2, 3, 4, 5}));
  // More memory holds a larger batch; 16 GB holds more than the traced 16.
  EXPECT_GT(batch["T4"], 16u);
  EXPECT_LE(batch["T4"], batch["L4"]);
  EXPECT_LE(batch["L4"], batch["A100-SXM-40GB"]);
  EXPECT_LE(batch["A100-SXM-40GB"], batch["H100-SXM"]);
  EXPECT_LE(batch["H100-SXM"], batch["H200"]);

  // Multiples of a step instead of powers of two.
  request.mutable_fit()->set_batch_step(48);
  auto stepped = backend_->Predict(request);
  ASSERT_TRUE(stepped.ok()) << stepped.status();
  for (const v1::DevicePrediction& p : stepped->predictions()) {
    EXPECT_EQ(p.batch_size() % 48, 0u) << p.device_id();
    EXPECT_EQ(p.batch_size(), p.memory().largest_fitting_batch()) << p.device_id();
  }
}

TEST_F(BackendTest, AGpuTheBatchDoesNotFitIsPredictedButNotRanked) {
  v1::PredictRequest request;
  *request.mutable_trace() = AgentTraceWithMemory();
  request.add_devices("T4");
  request.add_devices("H100-SXM");
  request.set_batch_size(256);
  auto response = backend_->Predict(request);
  ASSERT_TRUE(response.ok()) << response.status();
  for (const v1::DevicePrediction& p : response->predictions()) {
    ASSERT_TRUE(p.has_memory());
    EXPECT_EQ(p.batch_size(), 256u);
    if (p.device_id() == "T4") {
      EXPECT_FALSE(p.memory().fits());
      EXPECT_EQ(p.rank_by_time(), 0u);
      EXPECT_EQ(p.rank_by_cost(), 0u);
      ASSERT_GT(p.warnings_size(), 0);
      EXPECT_NE(p.warnings(p.warnings_size() - 1).find("may run out of memory: batch 256"),
                std::string::npos)
          << p.warnings(p.warnings_size() - 1);
    } else {
      EXPECT_TRUE(p.memory().fits());
      EXPECT_EQ(p.rank_by_time(), 1u);
    }
  }
}

TEST_F(BackendTest, FitNeedsMemoryDataAndExcludesABatchSize) {
  v1::PredictRequest request;
  *request.mutable_trace() = trace_;  // a Kineto import without memory events
  request.mutable_fit();
  auto no_memory = backend_->Predict(request);
  EXPECT_EQ(no_memory.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(no_memory.status().message().find("no memory data"), std::string::npos)
      << no_memory.status();
  // Without a fit the same trace is predicted, with a warning and no memory.
  request.clear_fit();
  auto plain = backend_->Predict(request);
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_FALSE(plain->predictions(0).has_memory());
  bool warned = false;
  for (const auto& w : plain->warnings()) warned |= w.find("no memory prediction") == 0;
  EXPECT_TRUE(warned);

  *request.mutable_trace() = AgentTraceWithMemory();
  request.mutable_fit();
  request.set_batch_size(64);
  EXPECT_EQ(backend_->Predict(request).status().code(), absl::StatusCode::kInvalidArgument);
  request.set_batch_size(0);
  request.mutable_fit()->set_batch_step(kMaxBatchSize + 1);
  EXPECT_EQ(backend_->Predict(request).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(BackendTest, DataParallelStepsForEveryGpuNamedOrNot) {
  v1::PredictRequest request;
  *request.mutable_trace() = AgentTraceWithMemory();
  request.add_parallel()->set_gpus_per_node(8);
  request.set_catalog_instances(true);
  auto all = backend_->Predict(request);
  ASSERT_TRUE(all.ok()) << all.status();
  std::map<std::string, const v1::DevicePrediction*> by_id;
  for (const auto& p : all->predictions()) by_id[p.device_id()] = &p;
  const v1::DevicePrediction& h100 = *by_id.at("H100-SXM");
  // The request's 8 GPUs are the catalog's p5.48xlarge: not asked again.
  ASSERT_EQ(h100.parallel_size(), 1);
  EXPECT_TRUE(h100.parallel(0).unavailable().empty()) << h100.parallel(0).unavailable();
  EXPECT_EQ(h100.parallel(0).instance_type(), "p5.48xlarge");
  EXPECT_EQ(h100.operations_size(), 0);  // the breakdown stays out unless asked
  // With every GPU, one without interconnect data says why and the rest answer.
  ASSERT_EQ(by_id.at("RTX4090")->parallel_size(), 1);
  EXPECT_NE(by_id.at("RTX4090")->parallel(0).unavailable().find("interconnect"), std::string::npos)
      << by_id.at("RTX4090")->parallel(0).unavailable();
  // A PCIe node answers, over its link's published range: the request's 8
  // GPUs are the catalog's g4dn.metal (8 x T4).
  ASSERT_EQ(by_id.at("T4")->parallel_size(), 1);
  EXPECT_TRUE(by_id.at("T4")->parallel(0).unavailable().empty())
      << by_id.at("T4")->parallel(0).unavailable();
  EXPECT_TRUE(by_id.at("T4")->parallel(0).bandwidth_range());
  EXPECT_EQ(by_id.at("T4")->parallel(0).instance_type(), "g4dn.metal");
  // A size the request does not ask for follows, with the request's
  // settings.
  request.mutable_parallel(0)->set_gpus_per_node(2);
  request.mutable_parallel(0)->set_disable_nvls(true);
  auto two = backend_->Predict(request);
  ASSERT_TRUE(two.ok()) << two.status();
  for (const auto& p : two->predictions()) {
    if (p.device_id() != "H100-SXM") continue;
    ASSERT_EQ(p.parallel_size(), 2);
    EXPECT_EQ(p.parallel(0).gpus_per_node(), 2u);
    EXPECT_EQ(p.parallel(1).gpus_per_node(), 8u);
    EXPECT_EQ(p.parallel(1).instance_type(), "p5.48xlarge");
    EXPECT_FALSE(p.parallel(1).nvls());  // as the request asked
  }
  request.mutable_parallel(0)->set_gpus_per_node(8);
  request.mutable_parallel(0)->set_disable_nvls(false);

  // A named GPU that cannot run it answers as it does unnamed: its other
  // times, and the configuration's reason; the others still answer.
  request.add_devices("H100-SXM");
  request.add_devices("RTX4090");
  auto named = backend_->Predict(request);
  ASSERT_TRUE(named.ok()) << named.status();
  ASSERT_EQ(named->predictions_size(), 2);
  for (const auto& p : named->predictions()) {
    ASSERT_GE(p.parallel_size(), 1) << p.device_id();
    EXPECT_GT(p.wall_time_ns(), 0) << p.device_id();
    EXPECT_EQ(p.parallel(0).unavailable().find("interconnect") != std::string::npos,
              p.device_id() == "RTX4090")
        << p.device_id() << ": " << p.parallel(0).unavailable();
  }

  request.clear_devices();
  request.mutable_parallel(0)->set_gpus_per_node(0);
  EXPECT_EQ(backend_->Predict(request).status().code(), absl::StatusCode::kInvalidArgument);
  request.mutable_parallel(0)->set_gpus_per_node(8);
  request.mutable_parallel(0)->set_bucket_cap_bytes(-1);
  EXPECT_EQ(backend_->Predict(request).status().code(), absl::StatusCode::kInvalidArgument);
  request.mutable_parallel(0)->set_bucket_cap_bytes(0);
  request.set_catalog("none");
  EXPECT_EQ(backend_->Predict(request).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(BackendTest, FullyShardedStepsAndTheUnmodelledKindsRefused) {
  v1::PredictRequest request;
  *request.mutable_trace() = AgentTraceWithMemory();
  request.add_devices("H100-SXM");
  v1::ParallelConfig* config = request.add_parallel();
  config->set_gpus_per_node(4);
  config->set_kind(v1::ParallelConfig::KIND_FULLY_SHARDED);
  auto sharded = backend_->Predict(request);
  ASSERT_TRUE(sharded.ok()) << sharded.status();
  const v1::ParallelPrediction& p = sharded->predictions(0).parallel(0);
  EXPECT_TRUE(p.unavailable().empty()) << p.unavailable();
  EXPECT_EQ(p.kind(), v1::ParallelConfig::KIND_FULLY_SHARDED);
  EXPECT_GT(p.peak_memory_bytes_per_gpu(), 0);
  EXPECT_GT(p.step_ns(), 0);

  for (v1::ParallelConfig::Kind kind :
       {v1::ParallelConfig::KIND_HYBRID_SHARDED, v1::ParallelConfig::KIND_TENSOR_PARALLEL,
        v1::ParallelConfig::KIND_PIPELINE_PARALLEL}) {
    config->set_kind(kind);
    const absl::Status refused = backend_->Predict(request).status();
    EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << kind;
    EXPECT_NE(refused.message().find("not modelled"), std::string::npos) << refused;
  }
  config->set_kind(v1::ParallelConfig::KIND_FULLY_SHARDED);
  config->set_cpu_offload(true);
  const absl::Status offload = backend_->Predict(request).status();
  EXPECT_EQ(offload.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(offload.message().find("CPU offload"), std::string::npos) << offload;
  config->set_cpu_offload(false);
  config->set_fsdp_units(kMaxFsdpUnits + 1);
  const absl::Status units = backend_->Predict(request).status();
  EXPECT_EQ(units.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(units.message().find("fsdp_units must be at most"), std::string::npos) << units;
  config->set_fsdp_units(8);
  config->set_fsdp_wrap("GPT2Block");
  const absl::Status both = backend_->Predict(request).status();
  EXPECT_EQ(both.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(both.message().find("give one of them"), std::string::npos) << both;
  config->set_fsdp_units(0);
  config->set_fsdp_wrap(std::string(kMaxFsdpWrapChars + 1, 'B'));
  const absl::Status long_name = backend_->Predict(request).status();
  EXPECT_EQ(long_name.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(long_name.message().find("fsdp_wrap must be at most"), std::string::npos) << long_name;
}

}  // namespace
}  // namespace habitat
