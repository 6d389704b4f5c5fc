// Malformed and hostile requests against a real in-process habitat-server on
// 127.0.0.1:0. Each case starts from a real H100 Kineto capture (imported
// with core/kineto), breaks one thing, and pins the status code and a part
// of the message the caller sees. Requests go through the real
// PredictionClient, or as raw bytes where no client would produce them.
//
// Each case is its own test (BadInput/BadInputTest.Case/<name>), and
// AllCasesAgainstOneServer runs them all on one server and then checks that
// it still answers.
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/prediction_client.h"
#include "core/trace/trace_id.h"
#include "gmock/gmock.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "server/prediction_server.h"
#include "testing/kineto_fixtures.h"
#include "tests/integration/raw_grpc.h"

namespace habitat {
namespace {

using ::testing::HasSubstr;
using v1::PredictRequest;
using C = absl::StatusCode;

constexpr int kMaxMessageBytes = 32 << 20;
// Below the defaults, so a message quoting them proves the configured
// limits reach validation.
constexpr int64_t kMaxOperations = 100000;
constexpr int64_t kMaxKernelsPerPass = 5000;
constexpr char kNotARequest[] = "the request is not a valid habitat.v1.PredictRequest";
constexpr char kPredictMethod[] = "/habitat.v1.PredictionService/Predict";

// The server, a client and the fixture every case mutates.
struct Env {
  std::unique_ptr<PredictionServer> server;
  std::unique_ptr<PredictionClient> client;
  std::shared_ptr<grpc::Channel> channel;
  const v1::Trace* trace = nullptr;

  PredictRequest Inline() const {
    PredictRequest request;
    *request.mutable_trace() = *trace;
    request.add_devices("H200");
    return request;
  }
  absl::Status Predict(const PredictRequest& request) const {
    return client->Predict(request).status();
  }
  absl::Status Raw(const std::string& bytes, const char* method = kPredictMethod) const {
    auto result = testing::RawUnaryCall(channel, method, bytes);
    return absl::Status(static_cast<absl::StatusCode>(result.status.error_code()),
                        result.status.error_message());
  }
};

struct BadInputCase {
  std::string name;
  C code;
  // A part of the status message.
  std::string message;
  std::function<absl::Status(const Env&)> call;
};

v1::Kernel* FirstKernel(v1::Trace* trace) {
  for (auto& op : *trace->mutable_operations()) {
    if (op.forward().kernels_size() > 0) return op.mutable_forward()->mutable_kernels(0);
  }
  return nullptr;
}

// A Predict of the fixture with `mutate` applied.
std::function<absl::Status(const Env&)> Mutated(std::function<void(PredictRequest&)> mutate) {
  return [mutate](const Env& env) {
    PredictRequest request = env.Inline();
    mutate(request);
    return env.Predict(request);
  };
}

std::function<absl::Status(const Env&)> KernelMutated(std::function<void(v1::Kernel&)> mutate) {
  return Mutated([mutate](PredictRequest& r) { mutate(*FirstKernel(r.mutable_trace())); });
}

// An int64 field holding the bit pattern of a double, as a client that
// wrote a float time into an integer field would send.
int64_t DoubleBits(double value) {
  int64_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
}

v1::PriceCatalog CatalogWithPrice(const std::string& device, double on_demand) {
  v1::PriceCatalog catalog;
  catalog.set_name("hostile");
  catalog.set_currency("USD");
  auto* price = catalog.add_prices();
  price->set_device_id(device);
  price->set_on_demand_per_gpu_hour(on_demand);
  return catalog;
}

std::vector<BadInputCase> AllCases() {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<BadInputCase> cases = {
      // --- bytes on the wire ---
      // Bytes that do not parse as a PredictRequest.
      {"truncated_protobuf", C::kInvalidArgument, kNotARequest,
       [](const Env& env) {
         const std::string bytes = env.Inline().SerializeAsString();
         return env.Raw(bytes.substr(0, bytes.size() / 2));
       }},
      {"garbage_bytes", C::kInvalidArgument, kNotARequest,
       [](const Env& env) { return env.Raw(std::string(64, '\xff')); }},
      // The listing methods used to answer gRPC's bare UNIMPLEMENTED.
      {"garbage_bytes_to_list_devices", C::kInvalidArgument,
       "not a valid habitat.v1.ListDevicesRequest",
       [](const Env& env) {
         return env.Raw(std::string(64, '\xff'), "/habitat.v1.PredictionService/ListDevices");
       }},
      {"garbage_bytes_to_list_catalogs", C::kInvalidArgument,
       "not a valid habitat.v1.ListCatalogsRequest",
       [](const Env& env) {
         return env.Raw(std::string(64, '\xff'), "/habitat.v1.PredictionService/ListCatalogs");
       }},
      {"length_prefix_beyond_message", C::kInvalidArgument, kNotARequest,
       // Field 1 (trace), length-delimited, claiming 2^31 - 1 bytes.
       [](const Env& env) { return env.Raw(std::string("\x0a\xff\xff\xff\xff\x07", 6)); }},
      {"deeply_nested_unknown_groups", C::kInvalidArgument, kNotARequest,
       // 100k start-group tags of field 15: beyond protobuf's recursion limit.
       [](const Env& env) {
         std::string bytes;
         for (int i = 0; i < 100000; ++i) bytes.push_back('\x7b');
         return env.Raw(bytes);
       }},
      {"invalid_utf8_in_string_field_on_the_wire", C::kInvalidArgument, kNotARequest,
       // Field 2 (trace_id), 3 bytes that are not UTF-8.
       [](const Env& env) { return env.Raw(std::string("\x12\x03\xc3\x28\xff", 5)); }},
      // A wire type that does not match the field makes protobuf keep it as
      // an unknown field: the request parses, and has no trace.
      {"wrong_wire_type_for_trace", C::kInvalidArgument, "needs a trace",
       [](const Env& env) { return env.Raw(std::string("\x08\x01", 2)); }},
      {"empty_request_bytes", C::kInvalidArgument, "needs a trace",
       [](const Env& env) { return env.Raw(""); }},

      // --- times ---
      {"negative_kernel_duration", C::kInvalidArgument,
       "kernels[0].duration_ns must be >= 0 (got -5)",
       KernelMutated([](v1::Kernel& k) { k.set_duration_ns(-5); })},
      {"nan_bits_as_duration", C::kInvalidArgument, "above the limit of",
       KernelMutated([nan](v1::Kernel& k) { k.set_duration_ns(DoubleBits(nan)); })},
      {"positive_inf_bits_as_duration", C::kInvalidArgument, "above the limit of",
       KernelMutated([inf](v1::Kernel& k) { k.set_duration_ns(DoubleBits(inf)); })},
      {"negative_inf_bits_as_duration", C::kInvalidArgument, "must be >= 0",
       KernelMutated([inf](v1::Kernel& k) { k.set_duration_ns(DoubleBits(-inf)); })},
      {"negative_pass_time", C::kInvalidArgument, "forward.time_ns must be >= 0",
       Mutated([](PredictRequest& r) {
         r.mutable_trace()->mutable_operations(0)->mutable_forward()->set_time_ns(-1);
       })},
      {"negative_iteration_wall_time", C::kInvalidArgument, "iteration_wall_ns must be >= 0",
       Mutated([](PredictRequest& r) { r.mutable_trace()->set_iteration_wall_ns(-1); })},
      {"int64_min_start_time", C::kInvalidArgument, "start_ns must be >= 0",
       KernelMutated([](v1::Kernel& k) { k.set_start_ns(std::numeric_limits<int64_t>::min()); })},

      // --- kernel launch geometry ---
      {"zero_grid_dimension", C::kInvalidArgument, ".grid must be >= 1 in each dimension",
       KernelMutated([](v1::Kernel& k) { k.mutable_grid()->set_y(0); })},
      {"grid_z_above_cuda_limit", C::kInvalidArgument, "exceeds CUDA's grid limits",
       KernelMutated([](v1::Kernel& k) { k.mutable_grid()->set_z(70000); })},
      {"zero_block_dimension", C::kInvalidArgument, ".block must be >= 1",
       KernelMutated([](v1::Kernel& k) { k.mutable_block()->set_x(0); })},
      {"block_of_2048_threads", C::kInvalidArgument, "has 2048 threads; CUDA allows at most 1024",
       KernelMutated([](v1::Kernel& k) {
         k.mutable_block()->set_x(2048);
         k.mutable_block()->set_y(1);
         k.mutable_block()->set_z(1);
       })},
      {"block_dims_overflowing_uint32_product", C::kInvalidArgument, "CUDA allows at most 1024",
       KernelMutated([](v1::Kernel& k) {
         k.mutable_block()->set_x(65536);
         k.mutable_block()->set_y(65536);
         k.mutable_block()->set_z(1);
       })},
      {"300_registers_per_thread", C::kInvalidArgument,
       "registers_per_thread must be <= 255 (got 300)",
       KernelMutated([](v1::Kernel& k) { k.set_registers_per_thread(300); })},
      {"4_GiB_shared_memory", C::kInvalidArgument, "exceeds any GPU's limit",
       KernelMutated([](v1::Kernel& k) {
         k.set_static_shared_memory_bytes(0xffffffffu);
         k.set_dynamic_shared_memory_bytes(0xffffffffu);
       })},

      // --- shapes and sizes ---
      {"huge_tensor_shape", C::kInvalidArgument, "more than 2^50 elements",
       Mutated([](PredictRequest& r) {
         auto* t = r.mutable_trace()->mutable_operations(0)->add_arguments()->mutable_tensor();
         for (int i = 0; i < 4; ++i) t->add_shape(int64_t{1} << 40);
       })},
      {"negative_tensor_dimension", C::kInvalidArgument, "dimension 1 is negative (-3)",
       Mutated([](PredictRequest& r) {
         auto* t = r.mutable_trace()->mutable_operations(0)->add_arguments()->mutable_tensor();
         t->add_shape(8);
         t->add_shape(-3);
       })},
      {"tensor_rank_17", C::kInvalidArgument, "has rank 17", Mutated([](PredictRequest& r) {
         auto* t = r.mutable_trace()->mutable_operations(0)->add_arguments()->mutable_tensor();
         for (int i = 0; i < 17; ++i) t->add_shape(1);
       })},
      // 10^6 minimal operations are ~20 MB: under the 32 MiB message limit,
      // so validation refuses them by count (INVALID_ARGUMENT), not gRPC by size.
      {"one_million_operations", C::kInvalidArgument,
       absl::StrCat("the limit (max_operations) is ", kMaxOperations),
       Mutated([](PredictRequest& r) {
         v1::Operation op;
         op.set_name("aten::relu");
         op.mutable_forward()->set_time_ns(1);
         auto* ops = r.mutable_trace()->mutable_operations();
         ops->Reserve(1000000);
         while (ops->size() < 1000000) *ops->Add() = op;
       })},
      {"pass_above_max_kernels_per_pass", C::kInvalidArgument,
       absl::StrCat("the limit (max_kernels_per_pass) is ", kMaxKernelsPerPass),
       Mutated([](PredictRequest& r) {
         auto* pass = r.mutable_trace()->mutable_operations(0)->mutable_forward();
         const v1::Kernel kernel = *FirstKernel(r.mutable_trace());
         while (pass->kernels_size() <= kMaxKernelsPerPass) *pass->add_kernels() = kernel;
       })},
      {"name_of_100_KiB", C::kInvalidArgument, "bytes; the limit is",
       Mutated([](PredictRequest& r) {
         r.mutable_trace()->mutable_operations(0)->set_name(std::string(100 << 10, 'a'));
       })},
      {"oversize_message", C::kResourceExhausted, "larger than max", Mutated([](PredictRequest& r) {
         (*r.mutable_trace()->mutable_metadata())["padding"] =
             std::string(kMaxMessageBytes + 1024, 'x');
       })},

      // --- names ---
      {"control_character_in_op_name", C::kInvalidArgument,
       "operations[0].name contains control character 0x1b", Mutated([](PredictRequest& r) {
         r.mutable_trace()->mutable_operations(0)->set_name("aten::\x1b[2Jrelu");
       })},
      {"newline_in_kernel_name", C::kInvalidArgument, "contains control character 0xa",
       KernelMutated([](v1::Kernel& k) { k.set_name("volta_sgemm\nFAKE LOG LINE"); })},
      {"nul_in_model_name", C::kInvalidArgument, "model_name contains control character 0x0",
       Mutated([](PredictRequest& r) {
         r.mutable_trace()->set_model_name(std::string("resnet\0evil", 11));
       })},
      // Valid UTF-8 beyond ASCII is a legitimate name: accepted.
      {"unicode_names_are_accepted", C::kOk, "", Mutated([](PredictRequest& r) {
         r.mutable_trace()->set_model_name("\u043c\u043e\u0434\u0435\u043b\u044c-\u6a21\u578b");
         r.mutable_trace()->mutable_operations(0)->set_name("aten::stra\u00dfe_\U0001F680");
         FirstKernel(r.mutable_trace())->set_name("\u03bb_kernel");
       })},
      {"invalid_utf8_in_op_name", C::kInvalidArgument, kNotARequest,
       // The client serialises it (protobuf only logs); the server's parser
       // refuses a proto3 string that is not UTF-8, so the name check in
       // trace validation never sees it.
       Mutated([](PredictRequest& r) {
         r.mutable_trace()->mutable_operations(0)->set_name("aten::\xc3\x28");
       })},
      {"empty_op_name", C::kInvalidArgument, "operations[0].name must not be empty",
       Mutated([](PredictRequest& r) { r.mutable_trace()->mutable_operations(0)->set_name(""); })},

      // --- devices ---
      {"unknown_device", C::kNotFound, "unknown GPU id \"GTX 9999\"",
       Mutated([](PredictRequest& r) { r.add_devices("GTX 9999"); })},
      {"duplicate_device", C::kInvalidArgument, "'H200' is listed more than once",
       Mutated([](PredictRequest& r) { r.add_devices("H200"); })},
      {"empty_device_id", C::kNotFound, "unknown GPU id \"\"",
       Mutated([](PredictRequest& r) { r.add_devices(""); })},
      {"megabyte_device_id_message_is_bounded", C::kNotFound, "more bytes)",
       Mutated([](PredictRequest& r) { r.add_devices(std::string(1 << 20, 'G')); })},
      {"unknown_origin_gpu", C::kNotFound, "Imaginary GPU 9000", Mutated([](PredictRequest& r) {
         r.mutable_trace()->mutable_origin()->set_device_id("");
         r.mutable_trace()->mutable_origin()->set_name("Imaginary GPU 9000");
       })},

      // --- trace ids ---
      {"unknown_trace_id", C::kNotFound, "is not stored on this server",
       Mutated([](PredictRequest& r) { r.set_trace_id("sha256:" + std::string(64, '0')); })},
      {"malformed_trace_id", C::kInvalidArgument, "is not of the form sha256:<64 hex digits>",
       Mutated([](PredictRequest& r) { r.set_trace_id("sha256:xyz"); })},
      {"path_traversal_trace_id", C::kInvalidArgument,
       "is not of the form sha256:", Mutated([](PredictRequest& r) {
         r.set_trace_id("sha256:../../../../../../etc/passwd" + std::string(30, '0'));
       })},
      {"uppercase_hex_trace_id", C::kInvalidArgument, "is not of the form sha256:",
       Mutated([](PredictRequest& r) { r.set_trace_id("sha256:" + std::string(64, 'A')); })},

      // --- catalogs and prices ---
      {"inline_catalog_negative_price", C::kInvalidArgument,
       "inline_catalog.prices[0].on_demand_per_gpu_hour must be finite and > 0 (got -1)",
       Mutated(
           [](PredictRequest& r) { *r.mutable_inline_catalog() = CatalogWithPrice("H200", -1); })},
      {"inline_catalog_nan_price", C::kInvalidArgument, "must be finite and > 0 (got nan)",
       Mutated([nan](PredictRequest& r) {
         *r.mutable_inline_catalog() = CatalogWithPrice("H200", nan);
       })},
      {"inline_catalog_infinite_price", C::kInvalidArgument, "must be finite and > 0 (got inf)",
       Mutated([inf](PredictRequest& r) {
         *r.mutable_inline_catalog() = CatalogWithPrice("H200", inf);
       })},
      {"inline_catalog_negative_spot_price", C::kInvalidArgument,
       "spot_per_gpu_hour must be finite and >= 0", Mutated([](PredictRequest& r) {
         v1::PriceCatalog catalog = CatalogWithPrice("H200", 2.0);
         catalog.mutable_prices(0)->set_spot_per_gpu_hour(-0.5);
         *r.mutable_inline_catalog() = catalog;
       })},
      {"inline_catalog_unknown_device", C::kInvalidArgument,
       "device_id \"GTX 9999\" is not a known GPU id", Mutated([](PredictRequest& r) {
         *r.mutable_inline_catalog() = CatalogWithPrice("GTX 9999", 1.0);
       })},
      {"inline_catalog_without_prices", C::kInvalidArgument, "prices must list at least one GPU",
       Mutated([](PredictRequest& r) { r.mutable_inline_catalog()->set_currency("USD"); })},
      {"unknown_catalog_name", C::kNotFound, "unknown price catalog \"no-such-cloud\"",
       Mutated([](PredictRequest& r) { r.set_catalog("no-such-cloud"); })},
      {"unknown_price_kind_enum", C::kInvalidArgument, "price_kind 42 is not a known PriceKind",
       Mutated([](PredictRequest& r) { r.set_price_kind(static_cast<v1::PriceKind>(42)); })},

      // --- whole-trace problems ---
      {"missing_trace", C::kInvalidArgument, "the request needs a trace",
       Mutated([](PredictRequest& r) { r.clear_trace(); })},
      {"empty_trace", C::kInvalidArgument, "origin must name the GPU",
       Mutated([](PredictRequest& r) { *r.mutable_trace() = v1::Trace(); })},
      {"trace_without_operations", C::kInvalidArgument, "operations is empty",
       Mutated([](PredictRequest& r) {
         r.mutable_trace()->clear_operations();
         r.mutable_trace()->clear_unattributed_kernels();
       })},
      {"batch_size_0", C::kInvalidArgument, "batch_size must be >= 1",
       Mutated([](PredictRequest& r) { r.mutable_trace()->set_batch_size(0); })},
      {"format_version_99", C::kInvalidArgument,
       "format_version is 99; this server understands version 1",
       Mutated([](PredictRequest& r) { r.mutable_trace()->set_format_version(99); })},

      // --- UploadTrace ---
      {"upload_without_trace", C::kInvalidArgument, "UploadTrace needs `trace`",
       [](const Env& env) { return env.client->UploadTrace(v1::UploadTraceRequest()).status(); }},
      {"upload_of_invalid_trace", C::kInvalidArgument, "duration_ns must be >= 0",
       [](const Env& env) {
         v1::UploadTraceRequest request;
         *request.mutable_trace() = *env.trace;
         FirstKernel(request.mutable_trace())->set_duration_ns(-1);
         return env.client->UploadTrace(request).status();
       }},
  };
  return cases;
}

Env* StartEnv(const v1::Trace* trace) {
  ServerOptions options;
  options.address = "127.0.0.1:0";
  options.metrics_address = "";
  options.backend.data_dir = HABITAT_DATA_DIR;
  options.backend.trace_limits.max_operations = kMaxOperations;
  options.backend.trace_limits.max_kernels_per_pass = kMaxKernelsPerPass;
  options.max_receive_message_bytes = kMaxMessageBytes;
  // A million operations parse into more than the default request memory
  // (request_memory_test covers that refusal); here the trace limits are
  // what must answer.
  options.request_memory_bytes = int64_t{1} << 30;
  auto server = PredictionServer::Start(options);
  EXPECT_TRUE(server.ok()) << server.status();
  if (!server.ok()) return nullptr;
  auto env = std::make_unique<Env>();
  env->server = std::move(*server);
  const std::string address = absl::StrCat("127.0.0.1:", env->server->port());
  ClientOptions client_options;
  client_options.max_attempts = 1;
  client_options.deadline = absl::Seconds(60);
  auto client = PredictionClient::Connect(address, client_options);
  EXPECT_TRUE(client.ok()) << client.status();
  if (!client.ok()) return nullptr;
  env->client = std::move(*client);
  env->channel = grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
  env->trace = trace;
  return env.release();
}

class BadInputTest : public ::testing::TestWithParam<BadInputCase> {
 protected:
  static void SetUpTestSuite() {
    auto trace = testing::LoadFixtureTrace(testing::kFixtureTrace);
    ASSERT_TRUE(trace.ok()) << trace.status();
    trace_ = new v1::Trace(std::move(*trace));
    ASSERT_NE(FirstKernel(trace_), nullptr);
  }
  static void TearDownTestSuite() {
    delete trace_;
    trace_ = nullptr;
  }
  void SetUp() override {
    ASSERT_NE(trace_, nullptr);
    env_.reset(StartEnv(trace_));
    ASSERT_NE(env_, nullptr);
  }
  void TearDown() override {
    if (env_ == nullptr) return;
    env_->client.reset();
    env_->channel.reset();
    env_->server->Shutdown(absl::Seconds(1));
    env_->server->Wait();
  }

  // The server still answers a valid Predict and ListDevices correctly.
  void ExpectServerHealthy() {
    auto devices = env_->client->ListDevices();
    ASSERT_TRUE(devices.ok()) << devices.status();
    EXPECT_GE(devices->devices_size(), 20);
    auto good = env_->client->Predict(env_->Inline());
    ASSERT_TRUE(good.ok()) << good.status();
    ASSERT_EQ(good->predictions_size(), 1);
    EXPECT_EQ(good->predictions(0).device_id(), "H200");
    EXPECT_GT(good->predictions(0).gpu_time_ns(), 0);
  }

  static void ExpectCase(const BadInputCase& c, const absl::Status& status) {
    EXPECT_EQ(status.code(), c.code) << c.name << ": " << status;
    EXPECT_THAT(std::string(status.message()), HasSubstr(c.message)) << c.name;
    // Bounded however much of the request an error quotes.
    EXPECT_LE(status.message().size(), 1100u) << c.name;
  }

  static v1::Trace* trace_;
  std::unique_ptr<Env> env_;
};

v1::Trace* BadInputTest::trace_ = nullptr;

TEST_P(BadInputTest, Case) {
  ExpectCase(GetParam(), GetParam().call(*env_));
  ExpectServerHealthy();
}

INSTANTIATE_TEST_SUITE_P(BadInput, BadInputTest, ::testing::ValuesIn(AllCases()),
                         [](const ::testing::TestParamInfo<BadInputCase>& info) {
                           return info.param.name;
                         });

TEST_F(BadInputTest, AllCasesAgainstOneServer) {
  const auto cases = AllCases();
  ASSERT_GE(cases.size(), 25u);
  for (const auto& c : cases) ExpectCase(c, c.call(*env_));
  ExpectServerHealthy();
  // The refused upload stored nothing: its content id is unknown.
  v1::Trace refused = *trace_;
  FirstKernel(&refused)->set_duration_ns(-1);
  auto id = ComputeTraceId(refused);
  ASSERT_TRUE(id.ok()) << id.status();
  PredictRequest by_id;
  by_id.set_trace_id(*id);
  EXPECT_EQ(env_->client->Predict(by_id).status().code(), C::kNotFound);
}

TEST_F(BadInputTest, DuplicateUploadIsOneTraceAndStaysPredictable) {
  v1::UploadTraceRequest upload;
  *upload.mutable_trace() = *trace_;
  auto first = env_->client->UploadTrace(upload);
  auto second = env_->client->UploadTrace(upload);
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_TRUE(first->created());
  EXPECT_FALSE(second->created());
  EXPECT_EQ(first->trace_id(), second->trace_id());
  PredictRequest by_id;
  by_id.set_trace_id(first->trace_id());
  by_id.add_devices("H200");
  auto predicted = env_->client->Predict(by_id);
  ASSERT_TRUE(predicted.ok()) << predicted.status();
  EXPECT_EQ(predicted->trace_id(), first->trace_id());
}

}  // namespace
}  // namespace habitat
