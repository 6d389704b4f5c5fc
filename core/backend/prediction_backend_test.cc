#include "core/backend/prediction_backend.h"

#include <cmath>
#include <functional>

#include "core/predict/test_fixtures.h"
#include "gtest/gtest.h"

namespace habitat {
namespace {

class BackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    BackendOptions options;
    options.data_dir = HABITAT_DATA_DIR;
    auto backend = PredictionBackend::Create(options);
    ASSERT_TRUE(backend.ok()) << backend.status();
    backend_ = std::move(*backend);
    auto trace = testing::LoadKinetoFixture("h100", "transformer_b32_bf16", 32);
    ASSERT_TRUE(trace.ok()) << trace.status();
    trace_ = std::move(*trace);
  }

  std::unique_ptr<PredictionBackend> backend_;
  v1::Trace trace_;
};

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
      {"no trace", absl::StatusCode::kInvalidArgument, "trace_id",
       [](v1::PredictRequest*) {}},
      {"malformed id", absl::StatusCode::kInvalidArgument, "sha256:",
       [](v1::PredictRequest* r) { r->set_trace_id("abc"); }},
      {"unknown id", absl::StatusCode::kNotFound, "UploadTrace",
       [](v1::PredictRequest* r) { r->set_trace_id("sha256:" + std::string(64, 'b')); }},
      {"unknown catalog", absl::StatusCode::kNotFound, "nope",
       [this](v1::PredictRequest* r) { *r->mutable_trace() = trace_; r->set_catalog("nope"); }},
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
       [this](v1::PredictRequest* r) { *r->mutable_trace() = trace_; r->add_devices("GTX 9999"); }},
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

TEST_F(BackendTest, ListsDevicesAndCatalogs) {
  auto devices = backend_->ListDevices(v1::ListDevicesRequest());
  EXPECT_GE(devices.devices_size(), 20);
  auto catalogs = backend_->ListCatalogs();
  EXPECT_GE(catalogs.catalogs_size(), 4);
}

}  // namespace
}  // namespace habitat
