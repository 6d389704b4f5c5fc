// End-to-end tests of habitat-server's gRPC interface: a real
// PredictionServer on 127.0.0.1:0 (metrics on 127.0.0.1:0) called through
// the real PredictionClient with a trace captured on an H100.
//
// gtest_discover_tests runs every TEST in its own process, so each test
// starts its own server and checks metric *deltas*, never totals.
#include <sqlite3.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/prediction_client.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "server/persistence/trace_store_factory.h"
#include "server/prediction_server.h"
#include "testing/files.h"
#include "testing/health_check.h"
#include "testing/kineto_fixtures.h"
#include "testing/metrics.h"

namespace habitat {
namespace {

using ::google::protobuf::util::MessageDifferencer;
using ::testing::HasSubstr;
using ::testing::SizeIs;
using v1::PredictRequest;
using v1::PredictResponse;

constexpr int kServerMaxMessageBytes = 4 << 20;

class ServerIntegrationTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto trace = testing::LoadFixtureTrace(testing::kFixtureTrace);
    ASSERT_TRUE(trace.ok()) << trace.status();
    trace_ = new v1::Trace(std::move(*trace));
  }
  static void TearDownTestSuite() {
    delete trace_;
    trace_ = nullptr;
  }

  void SetUp() override {
    ServerOptions options;
    options.address = "127.0.0.1:0";
    options.metrics_address = "127.0.0.1:0";
    options.backend.data_dir = HABITAT_DATA_DIR;
    options.max_receive_message_bytes = kServerMaxMessageBytes;
    auto server = PredictionServer::Start(options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    ASSERT_GT(server_->port(), 0);
    ASSERT_GT(server_->metrics_port(), 0);
    address_ = absl::StrCat("127.0.0.1:", server_->port());
    auto client = PredictionClient::Connect(address_);
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = std::move(*client);
  }

  void TearDown() override {
    // Close the connection first: an idle connected client holds a
    // draining gRPC server until the grace period ends.
    client_.reset();
    if (server_ != nullptr) {
      server_->Shutdown(absl::Seconds(1));
      server_->Wait();
    }
  }

  // Every device a Predict without a device list covers.
  std::vector<std::string> ListedDeviceIds() {
    auto devices = client_->ListDevices();
    EXPECT_TRUE(devices.ok()) << devices.status();
    std::vector<std::string> ids;
    if (devices.ok()) {
      for (const auto& d : devices->devices()) ids.push_back(d.id());
    }
    return ids;
  }

  PredictRequest InlineRequest() const {
    PredictRequest request;
    *request.mutable_trace() = *trace_;
    return request;
  }

  static v1::Trace* trace_;
  std::unique_ptr<PredictionServer> server_;
  std::string address_;
  std::unique_ptr<PredictionClient> client_;
};

v1::Trace* ServerIntegrationTest::trace_ = nullptr;

// The invariants every prediction response must satisfy.
void CheckResponse(const PredictResponse& response, uint32_t batch_size) {
  EXPECT_EQ(response.batch_size(), batch_size);
  EXPECT_EQ(response.origin_device_id(), "H100-SXM");
  std::set<uint32_t> ranks;
  for (const auto& p : response.predictions()) {
    SCOPED_TRACE(p.device_id());
    EXPECT_GT(p.gpu_time_ns(), 0);
    EXPECT_GT(p.wall_time_ns(), 0);
    ranks.insert(p.rank_by_time());
    // Throughput and cost follow the wall time, which an instance bills.
    const double seconds = static_cast<double>(p.wall_time_ns()) / 1e9;
    EXPECT_NEAR(p.samples_per_second(), batch_size / seconds, 1e-6 * batch_size / seconds);
    if (p.has_price()) {
      EXPECT_GT(p.price_per_hour(), 0);
      const double cost = p.price_per_hour() / 3600.0 * seconds / batch_size * 1000.0;
      EXPECT_NEAR(p.cost_per_1000_samples(), cost, 1e-9 + 1e-6 * cost);
      EXPECT_GE(p.rank_by_cost(), 1u);
    } else {
      EXPECT_EQ(p.rank_by_cost(), 0u);
    }
    // Faster devices rank first.
    for (const auto& q : response.predictions()) {
      if (q.wall_time_ns() < p.wall_time_ns()) {
        EXPECT_LT(q.rank_by_time(), p.rank_by_time());
      }
    }
    int64_t method_sum = 0;
    for (const auto& total : p.method_totals()) method_sum += total.predicted_ns();
    EXPECT_EQ(method_sum, p.gpu_time_ns());
  }
  // Ranks are 1..N.
  EXPECT_EQ(ranks.size(), static_cast<size_t>(response.predictions_size()));
  if (!ranks.empty()) {
    EXPECT_EQ(*ranks.begin(), 1u);
    EXPECT_EQ(*ranks.rbegin(), static_cast<uint32_t>(response.predictions_size()));
  }
}

TEST_F(ServerIntegrationTest, ListDevicesAndCatalogs) {
  auto devices = client_->ListDevices();
  ASSERT_TRUE(devices.ok()) << devices.status();
  EXPECT_GE(devices->devices_size(), 8);
  std::set<std::string> ids;
  for (const auto& d : devices->devices()) {
    EXPECT_FALSE(d.test_only()) << d.id();
    ids.insert(d.id());
  }
  EXPECT_TRUE(ids.count("H100-SXM"));
  EXPECT_TRUE(ids.count("A100-SXM-80GB"));

  v1::ListDevicesRequest with_test_only;
  with_test_only.set_include_test_only(true);
  auto all_devices = client_->ListDevices(with_test_only);
  ASSERT_TRUE(all_devices.ok());
  EXPECT_GE(all_devices->devices_size(), devices->devices_size());

  auto catalogs = client_->ListCatalogs();
  ASSERT_TRUE(catalogs.ok()) << catalogs.status();
  ASSERT_GE(catalogs->catalogs_size(), 1);
  for (const auto& c : catalogs->catalogs()) {
    EXPECT_FALSE(c.name().empty());
    EXPECT_FALSE(c.currency().empty());
    EXPECT_GT(c.prices_size(), 0);
  }
}

TEST_F(ServerIntegrationTest, UploadIsContentAddressedAndIdempotent) {
  v1::UploadTraceRequest upload;
  *upload.mutable_trace() = *trace_;
  auto first = client_->UploadTrace(upload);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_TRUE(first->created());
  EXPECT_THAT(first->trace_id(), ::testing::StartsWith("sha256:"));
  EXPECT_THAT(first->trace_id(), SizeIs(7 + 64));
  auto second = client_->UploadTrace(upload);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_FALSE(second->created());
  EXPECT_EQ(second->trace_id(), first->trace_id());
}

TEST_F(ServerIntegrationTest, PredictByIdEqualsPredictInline) {
  v1::UploadTraceRequest upload;
  *upload.mutable_trace() = *trace_;
  auto uploaded = client_->UploadTrace(upload);
  ASSERT_TRUE(uploaded.ok()) << uploaded.status();

  PredictRequest by_id;
  by_id.set_trace_id(uploaded->trace_id());
  auto from_id = client_->Predict(by_id);
  ASSERT_TRUE(from_id.ok()) << from_id.status();
  auto inline_response = client_->Predict(InlineRequest());
  ASSERT_TRUE(inline_response.ok()) << inline_response.status();

  EXPECT_EQ(from_id->trace_id(), uploaded->trace_id());
  EXPECT_EQ(inline_response->trace_id(), uploaded->trace_id());
  EXPECT_TRUE(MessageDifferencer::Equals(*from_id, *inline_response));
}

TEST_F(ServerIntegrationTest, PredictAllDevicesCoversEveryListedGpu) {
  const std::vector<std::string> ids = ListedDeviceIds();
  auto response = client_->Predict(InlineRequest());
  ASSERT_TRUE(response.ok()) << response.status();
  CheckResponse(*response, trace_->batch_size());
  std::set<std::string> predicted;
  int origins = 0;
  for (const auto& p : response->predictions()) {
    predicted.insert(p.device_id());
    if (p.is_origin()) {
      ++origins;
      EXPECT_EQ(p.device_id(), "H100-SXM");
    }
    EXPECT_THAT(p.operations(), SizeIs(0));  // no breakdown asked for
  }
  EXPECT_EQ(predicted, std::set<std::string>(ids.begin(), ids.end()));
  EXPECT_EQ(origins, 1);
  // No catalog asked for: the server's default prices what it lists.
  EXPECT_EQ(response->catalog(), "aws");
  EXPECT_TRUE(std::any_of(response->predictions().begin(), response->predictions().end(),
                          [](const v1::DevicePrediction& p) { return p.has_price(); }));
  v1::PredictRequest unpriced = InlineRequest();
  unpriced.set_catalog("none");
  auto none = client_->Predict(unpriced);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_EQ(none->catalog(), "");
  for (const auto& p : none->predictions()) EXPECT_FALSE(p.has_price()) << p.device_id();
}

TEST_F(ServerIntegrationTest, PredictSubsetWithCatalogAndBreakdown) {
  auto catalogs = client_->ListCatalogs();
  ASSERT_TRUE(catalogs.ok());
  ASSERT_GE(catalogs->catalogs_size(), 1);
  const v1::PriceCatalog& catalog = catalogs->catalogs(0);
  ASSERT_GE(catalog.prices_size(), 1);
  const std::string priced = catalog.prices(0).device_id();

  PredictRequest request = InlineRequest();
  request.add_devices(priced);
  if (priced != "V100-SXM2") request.add_devices("V100-SXM2");
  request.set_catalog(catalog.name());
  request.set_include_breakdown(true);
  auto response = client_->Predict(request);
  ASSERT_TRUE(response.ok()) << response.status();
  CheckResponse(*response, trace_->batch_size());
  EXPECT_EQ(response->catalog(), catalog.name());
  EXPECT_EQ(response->currency(), catalog.currency());
  ASSERT_EQ(response->predictions_size(), request.devices_size());
  for (const auto& p : response->predictions()) {
    SCOPED_TRACE(p.device_id());
    if (p.device_id() == priced) {
      EXPECT_TRUE(p.has_price());
      EXPECT_DOUBLE_EQ(p.price_per_hour(), catalog.prices(0).on_demand_per_gpu_hour());
    }
    // The breakdown covers the iteration: its operations add up to it
    // (unattributed kernels are reported as operations of their own or
    // counted in the totals; either way the sum is checked below).
    ASSERT_GT(p.operations_size(), 0);
    int64_t sum = 0;
    std::set<uint32_t> indexes;
    for (const auto& op : p.operations()) {
      sum += op.predicted_forward_ns() + op.predicted_backward_ns();
      EXPECT_NE(op.method(), v1::PREDICTION_METHOD_UNSPECIFIED) << op.name();
      EXPECT_GE(op.predicted_forward_ns(), 0);
      EXPECT_GE(op.predicted_backward_ns(), 0);
      indexes.insert(op.index());
    }
    EXPECT_EQ(indexes.size(), static_cast<size_t>(p.operations_size()));
    EXPECT_LE(sum, p.gpu_time_ns());
  }

  // The same request without the breakdown: same times, no operations.
  request.set_include_breakdown(false);
  auto brief = client_->Predict(request);
  ASSERT_TRUE(brief.ok()) << brief.status();
  ASSERT_EQ(brief->predictions_size(), response->predictions_size());
  for (int i = 0; i < brief->predictions_size(); ++i) {
    EXPECT_EQ(brief->predictions(i).gpu_time_ns(), response->predictions(i).gpu_time_ns());
    EXPECT_EQ(brief->predictions(i).operations_size(), 0);
  }
}

TEST_F(ServerIntegrationTest, PredictWithInlineCatalogAndSpotPrices) {
  PredictRequest request = InlineRequest();
  v1::PriceCatalog* catalog = request.mutable_inline_catalog();
  catalog->set_currency("EUR");
  v1::GpuPrice* price = catalog->add_prices();
  price->set_device_id("A100-SXM-80GB");
  price->set_on_demand_per_gpu_hour(4.0);
  price->set_spot_per_gpu_hour(1.0);
  v1::GpuPrice* on_demand_only = catalog->add_prices();
  on_demand_only->set_device_id("H200");
  on_demand_only->set_on_demand_per_gpu_hour(5.0);
  request.add_devices("A100-SXM-80GB");
  request.add_devices("H100-SXM");
  request.add_devices("H200");
  request.set_price_kind(v1::PRICE_KIND_SPOT);
  auto response = client_->Predict(request);
  ASSERT_TRUE(response.ok()) << response.status();
  CheckResponse(*response, trace_->batch_size());
  EXPECT_EQ(response->currency(), "EUR");
  EXPECT_EQ(response->price_kind(), v1::PRICE_KIND_SPOT);
  for (const auto& p : response->predictions()) {
    if (p.device_id() == "A100-SXM-80GB") {
      EXPECT_TRUE(p.has_price());
      EXPECT_DOUBLE_EQ(p.price_per_hour(), 1.0);  // the spot price
      EXPECT_EQ(p.rank_by_cost(), 1u);
    } else {
      // H100-SXM: not in the inline catalog; H200: no spot price.
      EXPECT_FALSE(p.has_price()) << p.device_id();
    }
  }
  // The GPU with only an on-demand price is named, the one without any is not.
  EXPECT_THAT(response->warnings(),
              ::testing::Contains(HasSubstr("has no spot price for H200 (on-demand prices "
                                            "only), so they are unpriced")));
}

struct BadCase {
  std::string name;
  PredictRequest request;
  absl::StatusCode code;
  std::string message;
};

v1::Kernel* FirstKernel(v1::Trace* trace) {
  for (auto& op : *trace->mutable_operations()) {
    if (op.forward().kernels_size() > 0) return op.mutable_forward()->mutable_kernels(0);
  }
  return nullptr;
}

// Operators expect the build's identity and the process_* metrics every
// Prometheus client exports; prometheus-cpp has no process collector.
TEST_F(ServerIntegrationTest, MetricsCarryBuildInfoAndProcessMetrics) {
  auto scrape = testing::ScrapeMetrics(server_->metrics_port());
  ASSERT_TRUE(scrape.ok()) << scrape.status();
  EXPECT_THAT(*scrape, ::testing::ContainsRegex(
                           "habitat_build_info\\{revision=\"[0-9a-z]+\",version=\"[0-9.]+\"\\} 1"));
  auto value = [&](const std::string& name) {
    const std::regex line("\n" + name + " ([0-9.e+]+)");
    std::smatch match;
    return std::regex_search(*scrape, match, line) ? std::stod(match[1]) : -1.0;
  };
  EXPECT_GT(value("process_resident_memory_bytes"), 1e6);
  EXPECT_GT(value("process_virtual_memory_bytes"), value("process_resident_memory_bytes"));
  EXPECT_GE(value("process_cpu_seconds_total"), 0.0);
  EXPECT_GE(value("process_open_fds"), 3.0);
  EXPECT_GE(value("process_max_fds"), value("process_open_fds"));
  // This process started the server moments ago.
  const double now = absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch());
  EXPECT_NEAR(value("process_start_time_seconds"), now, 3600.0);
}

TEST_F(ServerIntegrationTest, BadRequestsGetClearErrorsAndTheServerKeepsAnswering) {
  auto before = testing::ScrapeMetrics(server_->metrics_port());
  ASSERT_TRUE(before.ok()) << before.status();
  ASSERT_NE(FirstKernel(trace_), nullptr);

  std::vector<BadCase> cases;
  auto add = [&](std::string name, absl::StatusCode code, std::string message, auto&& mutate) {
    BadCase c{std::move(name), InlineRequest(), code, std::move(message)};
    mutate(c.request);
    cases.push_back(std::move(c));
  };
  using C = absl::StatusCode;
  add("no trace", C::kInvalidArgument, "needs a trace", [](PredictRequest& r) { r.clear_trace(); });
  add("malformed trace id", C::kInvalidArgument, "sha256:<64 hex digits>",
      [](PredictRequest& r) { r.set_trace_id("sha256:xyz"); });
  add("unknown trace id", C::kNotFound, std::string(64, '0'),
      [](PredictRequest& r) { r.set_trace_id("sha256:" + std::string(64, '0')); });
  add("unknown device", C::kNotFound, "NO-SUCH-GPU",
      [](PredictRequest& r) { r.add_devices("NO-SUCH-GPU"); });
  add("duplicate device", C::kInvalidArgument, "listed more than once", [](PredictRequest& r) {
    r.add_devices("H200");
    r.add_devices("H200");
  });
  add("unknown catalog", C::kNotFound, "unknown price catalog",
      [](PredictRequest& r) { r.set_catalog("no-such-cloud"); });
  auto inline_catalog = [](double on_demand) {
    v1::PriceCatalog catalog;
    catalog.set_currency("USD");
    auto* price = catalog.add_prices();
    price->set_device_id("H200");
    price->set_on_demand_per_gpu_hour(on_demand);
    return catalog;
  };
  add("negative price", C::kInvalidArgument,
      "inline_catalog.prices[0].on_demand_per_gpu_hour must be finite and > 0",
      [&](PredictRequest& r) { *r.mutable_inline_catalog() = inline_catalog(-1.0); });
  add("NaN price", C::kInvalidArgument, "on_demand_per_gpu_hour must be finite",
      [&](PredictRequest& r) {
        *r.mutable_inline_catalog() = inline_catalog(std::numeric_limits<double>::quiet_NaN());
      });
  add("negative kernel duration", C::kInvalidArgument, "duration_ns must be >= 0",
      [](PredictRequest& r) { FirstKernel(r.mutable_trace())->set_duration_ns(-5); });
  add("zero grid", C::kInvalidArgument, ".grid must be >= 1",
      [](PredictRequest& r) { FirstKernel(r.mutable_trace())->mutable_grid()->set_x(0); });
  add("2048-thread block", C::kInvalidArgument, "2048 threads", [](PredictRequest& r) {
    auto* block = FirstKernel(r.mutable_trace())->mutable_block();
    block->set_x(2048);
    block->set_y(1);
    block->set_z(1);
  });
  add("empty trace", C::kInvalidArgument, "origin",
      [](PredictRequest& r) { *r.mutable_trace() = v1::Trace(); });
  add("trace without operations", C::kInvalidArgument, "operations is empty",
      [](PredictRequest& r) {
        r.mutable_trace()->clear_operations();
        r.mutable_trace()->clear_unattributed_kernels();
      });
  add("batch size 0", C::kInvalidArgument, "batch_size must be >= 1",
      [](PredictRequest& r) { r.mutable_trace()->set_batch_size(0); });
  add("unknown origin GPU", C::kNotFound, "Imaginary GPU 9000", [](PredictRequest& r) {
    r.mutable_trace()->mutable_origin()->set_device_id("");
    r.mutable_trace()->mutable_origin()->set_name("Imaginary GPU 9000");
  });
  add("control character in an op name", C::kInvalidArgument, "contains control character",
      [](PredictRequest& r) {
        r.mutable_trace()->mutable_operations(0)->set_name("aten::\x1b[2J");
      });
  add("huge shape", C::kInvalidArgument, "2^50", [](PredictRequest& r) {
    auto* tensor = r.mutable_trace()->mutable_operations(0)->add_arguments()->mutable_tensor();
    for (int i = 0; i < 4; ++i) tensor->add_shape(int64_t{1} << 20);
  });

  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    auto response = client_->Predict(c.request);
    ASSERT_FALSE(response.ok());
    EXPECT_EQ(response.status().code(), c.code) << response.status();
    EXPECT_THAT(response.status().message(), HasSubstr(c.message));
  }

  // Above the server's receive limit: refused by gRPC before the handler.
  PredictRequest huge = InlineRequest();
  (*huge.mutable_trace()->mutable_metadata())["padding"] =
      std::string(kServerMaxMessageBytes + 1024, 'x');
  auto too_big = client_->Predict(huge);
  ASSERT_FALSE(too_big.ok());
  EXPECT_EQ(too_big.status().code(), absl::StatusCode::kResourceExhausted) << too_big.status();

  // The server still answers, correctly.
  auto devices = client_->ListDevices();
  ASSERT_TRUE(devices.ok()) << devices.status();
  auto good = client_->Predict(InlineRequest());
  ASSERT_TRUE(good.ok()) << good.status();
  CheckResponse(*good, trace_->batch_size());

  // Each handled call was counted with its code (the oversized one never
  // reached a handler, so it is not).
  auto after = testing::ScrapeMetrics(server_->metrics_port());
  ASSERT_TRUE(after.ok()) << after.status();
  const auto old_counts = testing::CounterValues(*before, "habitat_requests_total");
  const auto new_counts = testing::CounterValues(*after, "habitat_requests_total");
  auto delta = [&](const std::string& code, const std::string& rpc) {
    const std::string key = absl::StrCat("code=", code, ",rpc=", rpc);
    const double now = new_counts.count(key) ? new_counts.at(key) : 0;
    const double then = old_counts.count(key) ? old_counts.at(key) : 0;
    return now - then;
  };
  int invalid = 0, not_found = 0;
  for (const auto& c : cases) {
    (c.code == absl::StatusCode::kInvalidArgument ? invalid : not_found) += 1;
  }
  EXPECT_EQ(delta("INVALID_ARGUMENT", "Predict"), invalid);
  EXPECT_EQ(delta("NOT_FOUND", "Predict"), not_found);
  EXPECT_EQ(delta("OK", "Predict"), 1);
  EXPECT_EQ(delta("OK", "ListDevices"), 1);
  EXPECT_EQ(delta("RESOURCE_EXHAUSTED", "Predict"), 0);
}

TEST_F(ServerIntegrationTest, UploadRejectsInvalidTraces) {
  v1::UploadTraceRequest request;
  auto missing = client_->UploadTrace(request);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kInvalidArgument);
  *request.mutable_trace() = *trace_;
  request.mutable_trace()->mutable_origin()->set_device_id("NOT-A-GPU");
  auto unknown = client_->UploadTrace(request);
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(unknown.status().message(), HasSubstr("NOT-A-GPU"));
}

// habitat_predicted_operations_total counts each freshly predicted operation
// once, under its method and its target device; answers from the cache add
// nothing.
TEST_F(ServerIntegrationTest, MetricsCountPredictionsByMethodAndDevice) {
  const std::map<int, std::string> method_labels = {
      {v1::PREDICTION_METHOD_WAVE_SCALING, "wave_scaling"},
      {v1::PREDICTION_METHOD_KERNEL_VARYING, "mlp"},
      {v1::PREDICTION_METHOD_UNSCALED, "unscaled"},
      {v1::PREDICTION_METHOD_MEASURED, "measured"}};
  PredictRequest request = InlineRequest();
  // The origin (measured), and two targets (scaled).
  for (const char* device : {"H100-SXM", "H200", "V100-SXM2"}) request.add_devices(device);
  request.set_include_breakdown(true);
  auto before = testing::ScrapeMetrics(server_->metrics_port());
  ASSERT_TRUE(before.ok()) << before.status();
  auto response = client_->Predict(request);
  ASSERT_TRUE(response.ok()) << response.status();
  ASSERT_EQ(response->predictions_size(), 3);
  std::map<std::string, double> expected;
  for (const auto& prediction : response->predictions()) {
    ASSERT_GT(prediction.operations_size(), 0) << prediction.device_id();
    for (const auto& op : prediction.operations()) {
      ASSERT_TRUE(method_labels.count(op.method())) << op.method();
      expected[absl::StrCat("device=", prediction.device_id(),
                            ",method=", method_labels.at(op.method()))] += 1;
    }
  }
  EXPECT_GT(expected.count("device=H100-SXM,method=measured"), 0u);
  EXPECT_GT(expected.count("device=H200,method=wave_scaling"), 0u);
  // Served from the cache: not counted again.
  ASSERT_TRUE(client_->Predict(request).ok());

  auto after = testing::ScrapeMetrics(server_->metrics_port());
  ASSERT_TRUE(after.ok()) << after.status();
  const auto old_counts = testing::CounterValues(*before, "habitat_predicted_operations_total");
  const auto new_counts = testing::CounterValues(*after, "habitat_predicted_operations_total");
  std::map<std::string, double> delta;
  for (const auto& [key, value] : new_counts) {
    const double then = old_counts.count(key) ? old_counts.at(key) : 0;
    if (value != then) delta[key] = value - then;
  }
  EXPECT_EQ(delta, expected) << *after;
  // Every GPU in the database has its series from start-up, at zero until used.
  EXPECT_EQ(new_counts.count("device=B200,method=wave_scaling"), 1u) << *after;
  EXPECT_EQ(new_counts.at("device=B200,method=wave_scaling"), 0);
}

TEST_F(ServerIntegrationTest, HealthCheckServesAndMetricsCountRequests) {
  auto health = testing::CheckHealth(address_, absl::Seconds(10));
  ASSERT_TRUE(health.ok()) << health.status();
  EXPECT_EQ(*health, 1);  // SERVING
  auto unknown = testing::CheckHealth(address_, absl::Seconds(10), "no.such.Service");
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kNotFound);
  // Clients that check the service they call by name (grpc-health-probe
  // -service=..., service-config health checking) get the same answer.
  auto named = testing::CheckHealth(address_, absl::Seconds(10), "habitat.v1.PredictionService");
  ASSERT_TRUE(named.ok()) << named.status();
  EXPECT_EQ(*named, 1);

  auto before = testing::ScrapeMetrics(server_->metrics_port());
  ASSERT_TRUE(before.ok()) << before.status();
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(client_->ListCatalogs().ok());
  auto after = testing::ScrapeMetrics(server_->metrics_port());
  ASSERT_TRUE(after.ok()) << after.status();
  const auto counts = testing::CounterValues(*after, "habitat_requests_total");
  const auto old_counts = testing::CounterValues(*before, "habitat_requests_total");
  const std::string key = "code=OK,rpc=ListCatalogs";
  ASSERT_TRUE(counts.count(key)) << *after;
  EXPECT_EQ(counts.at(key) - (old_counts.count(key) ? old_counts.at(key) : 0), 3);
  EXPECT_THAT(*after, HasSubstr("habitat_request_duration_seconds_bucket"));
  EXPECT_THAT(*after, HasSubstr("habitat_devices_loaded"));

  // After Shutdown the health service reports NOT_SERVING or the server is
  // gone; either way a new call does not succeed with SERVING.
  server_->Shutdown(absl::Seconds(1));
  server_->Wait();
  auto after_shutdown = testing::CheckHealth(address_, absl::Seconds(10));
  EXPECT_FALSE(after_shutdown.ok() && *after_shutdown == 1);
  auto named_after_shutdown =
      testing::CheckHealth(address_, absl::Seconds(10), "habitat.v1.PredictionService");
  EXPECT_FALSE(named_after_shutdown.ok() && *named_after_shutdown == 1);
  server_.reset();
}

// habitat_stored_traces counts what the store holds from start-up on, and
// follows a periodic retention sweep without waiting for an upload.
TEST(StoredTracesMetricTest, CountsAnExistingStoreAndFollowsRetention) {
  const testing::ScratchDir dir;
  const std::string db_path = dir.Sub("traces.db");
  const std::string spec = "sqlite:" + db_path;
  auto trace = testing::LoadFixtureTrace(testing::kFixtureTrace);
  ASSERT_TRUE(trace.ok()) << trace.status();
  std::vector<std::string> ids;
  {
    // Stored before the server starts, by two tenants.
    auto store = OpenTraceStore(spec);
    ASSERT_TRUE(store.ok()) << store.status();
    for (int i = 0; i < 3; ++i) {
      v1::Trace copy = *trace;
      (*copy.mutable_metadata())["copy"] = absl::StrCat(i);
      auto stored = (*store)->Put(i == 0 ? "alpha" : "", copy);
      ASSERT_TRUE(stored.ok()) << stored.status();
      ids.push_back(stored->id);
    }
  }

  ServerOptions options;
  options.address = "127.0.0.1:0";
  options.metrics_address = "127.0.0.1:0";
  options.backend.data_dir = HABITAT_DATA_DIR;
  options.store = spec;
  options.trace_retention_days = 2;
  options.trace_retention_interval = absl::Milliseconds(200);
  options.stored_traces_refresh = absl::Milliseconds(100);
  auto server = PredictionServer::Start(options);
  ASSERT_TRUE(server.ok()) << server.status();
  auto gauge = [&]() -> double {
    auto text = testing::ScrapeMetrics((*server)->metrics_port());
    if (!text.ok()) return -1;
    const size_t at = text->find("\nhabitat_stored_traces ");
    return at == std::string::npos ? -1 : std::stod(text->substr(at + 23));
  };
  EXPECT_EQ(gauge(), 3);

  // Age one trace past the retention period in the file, as time would;
  // the next sweep deletes it and the gauge follows with no upload.
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(db_path.c_str(), &db), SQLITE_OK);
  sqlite3_busy_timeout(db, 5000);
  const std::string age =
      absl::StrCat("UPDATE habitat_traces SET created_at = created_at - ",
                   absl::ToInt64Nanoseconds(absl::Hours(72)), " WHERE id = '", ids[1], "'");
  EXPECT_EQ(sqlite3_exec(db, age.c_str(), nullptr, nullptr, nullptr), SQLITE_OK)
      << sqlite3_errmsg(db);
  EXPECT_EQ(sqlite3_changes(db), 1);
  sqlite3_close(db);
  double value = gauge();
  for (int i = 0; i < 200 && value != 2; ++i) {
    absl::SleepFor(absl::Milliseconds(50));
    value = gauge();
  }
  EXPECT_EQ(value, 2);
  (*server)->Shutdown(absl::Seconds(1));
  (*server)->Wait();
  server->reset();
}

}  // namespace
}  // namespace habitat
