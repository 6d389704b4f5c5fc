// Compressed-request bombs against the habitat-server binary: a small gzip
// message that inflates to far more than --max_message_mb. gRPC 1.51 checks
// the size limit on the compressed bytes and then inflates the message in
// full, before any handler (and so any token check) runs; the server must
// refuse such a request without inflating it, on every gRPC port, and go on
// serving.
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "grpc/byte_buffer.h"
#include "grpc/grpc.h"
#include "grpc/grpc_security.h"
#include "grpc/support/alloc.h"
#include "grpc/support/time.h"
#include "gtest/gtest.h"
#include "testing/health_check.h"
#include "testing/server_process.h"
#include "tests/hostile/hostile_support.h"
#include "zlib.h"

namespace habitat::hostile {
namespace {

using ::habitat::testing::CheckHealth;
using ::habitat::testing::ServerProcess;
using ::habitat::testing::ServerSpec;

// What the bomb inflates to, and the server's message limit: 256 times it.
constexpr size_t kInflatedBytes = size_t{256} << 20;
constexpr int kMaxMessageMb = 1;
// Peak RSS the server may gain from one bomb: a fraction of the inflated
// size, well above what the refused call itself costs.
constexpr long kAllowedGrowthKib = 64 << 10;
// Tokens on, though no call presents one: the bombs must be refused before
// any token check.
constexpr char kToken[] = "7f3c9a1e5b2d4f60a8c1e3b5d7f90246";

// gzip of `size` zero bytes (~1/1000 of it).
std::string GzipOfZeros(size_t size) {
  z_stream stream{};
  EXPECT_EQ(deflateInit2(&stream, Z_BEST_COMPRESSION, Z_DEFLATED, 15 + 16, 9, Z_DEFAULT_STRATEGY),
            Z_OK);
  const std::string zeros(1 << 20, '\0');
  std::string out;
  char buffer[1 << 16];
  size_t fed = 0;
  int rc = Z_OK;
  while (rc != Z_STREAM_END) {
    if (stream.avail_in == 0 && fed < size) {
      const size_t chunk = std::min(zeros.size(), size - fed);
      stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(zeros.data()));
      stream.avail_in = static_cast<uInt>(chunk);
      fed += chunk;
    }
    stream.next_out = reinterpret_cast<Bytef*>(buffer);
    stream.avail_out = sizeof(buffer);
    rc = deflate(&stream, fed == size ? Z_FINISH : Z_NO_FLUSH);
    EXPECT_NE(rc, Z_STREAM_ERROR);
    out.append(buffer, sizeof(buffer) - stream.avail_out);
  }
  deflateEnd(&stream);
  return out;
}

struct CallResult {
  grpc_status_code code = GRPC_STATUS_UNKNOWN;
  std::string details;
};

// One unary call whose request message is `gzip` as is, flagged compressed
// with grpc-encoding: gzip. Through gRPC's C core: the C++ API compresses
// messages itself and cannot send bytes that are already compressed (the
// bomb would have to be built inflated, in this process, first).
CallResult SendPrecompressed(const std::string& target, const std::string& method,
                             const std::string& gzip, absl::Duration deadline) {
  grpc_init();
  grpc_channel_credentials* credentials = grpc_insecure_credentials_create();
  grpc_channel* channel = grpc_channel_create(target.c_str(), credentials, nullptr);
  grpc_channel_credentials_release(credentials);
  grpc_completion_queue* cq = grpc_completion_queue_create_for_next(nullptr);
  const gpr_timespec call_deadline =
      gpr_time_add(gpr_now(GPR_CLOCK_REALTIME),
                   gpr_time_from_millis(absl::ToInt64Milliseconds(deadline), GPR_TIMESPAN));
  grpc_slice method_slice = grpc_slice_from_copied_string(method.c_str());
  grpc_call* call = grpc_channel_create_call(channel, nullptr, GRPC_PROPAGATE_DEFAULTS, cq,
                                             method_slice, nullptr, call_deadline, nullptr);
  grpc_slice_unref(method_slice);

  grpc_metadata encoding{};
  encoding.key = grpc_slice_from_static_string("grpc-internal-encoding-request");
  encoding.value = grpc_slice_from_static_string("gzip");
  grpc_slice payload = grpc_slice_from_copied_buffer(gzip.data(), gzip.size());
  grpc_byte_buffer* request =
      grpc_raw_compressed_byte_buffer_create(&payload, 1, GRPC_COMPRESS_GZIP);
  grpc_slice_unref(payload);
  grpc_metadata_array initial_metadata, trailing_metadata;
  grpc_metadata_array_init(&initial_metadata);
  grpc_metadata_array_init(&trailing_metadata);
  grpc_byte_buffer* response = nullptr;
  grpc_status_code status = GRPC_STATUS_UNKNOWN;
  grpc_slice details = grpc_empty_slice();

  grpc_op ops[6];
  std::memset(ops, 0, sizeof(ops));
  ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
  ops[0].data.send_initial_metadata.count = 1;
  ops[0].data.send_initial_metadata.metadata = &encoding;
  ops[1].op = GRPC_OP_SEND_MESSAGE;
  ops[1].data.send_message.send_message = request;
  ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
  ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
  ops[3].data.recv_initial_metadata.recv_initial_metadata = &initial_metadata;
  ops[4].op = GRPC_OP_RECV_MESSAGE;
  ops[4].data.recv_message.recv_message = &response;
  ops[5].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
  ops[5].data.recv_status_on_client.trailing_metadata = &trailing_metadata;
  ops[5].data.recv_status_on_client.status = &status;
  ops[5].data.recv_status_on_client.status_details = &details;

  CallResult result;
  void* const tag = reinterpret_cast<void*>(1);
  if (grpc_call_start_batch(call, ops, 6, tag, nullptr) != GRPC_CALL_OK) {
    result.details = "grpc_call_start_batch failed";
  } else {
    const grpc_event event = grpc_completion_queue_next(
        cq, gpr_time_add(call_deadline, gpr_time_from_seconds(5, GPR_TIMESPAN)), nullptr);
    if (event.type == GRPC_OP_COMPLETE) {
      result.code = status;
      char* text = grpc_slice_to_c_string(details);
      result.details = text;
      gpr_free(text);
    } else {
      grpc_call_cancel(call, nullptr);
      grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_REALTIME), nullptr);
      result.details = "the call did not complete";
    }
  }
  grpc_call_unref(call);
  grpc_completion_queue_shutdown(cq);
  while (grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_REALTIME), nullptr).type !=
         GRPC_QUEUE_SHUTDOWN) {
  }
  grpc_completion_queue_destroy(cq);
  grpc_channel_destroy(channel);
  grpc_byte_buffer_destroy(request);
  if (response != nullptr) grpc_byte_buffer_destroy(response);
  grpc_metadata_array_destroy(&initial_metadata);
  grpc_metadata_array_destroy(&trailing_metadata);
  grpc_slice_unref(details);
  grpc_shutdown();
  return result;
}

class CompressionBombTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { bomb_ = new std::string(GzipOfZeros(kInflatedBytes)); }
  static void TearDownTestSuite() {
    delete bomb_;
    bomb_ = nullptr;
  }

  void SetUp() override {
    ASSERT_LT(bomb_->size(), static_cast<size_t>(kMaxMessageMb) << 20)
        << "the bomb must pass the size check on its compressed bytes";
    // Tokens on: the bomb comes before authentication.
    token_file_ = absl::StrCat(::testing::TempDir(), "/hostile-tokens-", getpid());
    std::ofstream(token_file_) << "tenant-a " << kToken << "\n";
    server_ = std::make_unique<ServerProcess>(ServerSpec{
        {absl::StrCat("--max_message_mb=", kMaxMessageMb), "--token_file=" + token_file_}});
    ASSERT_TRUE(server_->WaitServing()) << server_->Stderr();
    ASSERT_EQ(CheckHealth(server_->address(), absl::Seconds(5)).value_or(-1), 1);
  }
  void TearDown() override { unlink(token_file_.c_str()); }

  // Sends the bomb to `method` on `address`; checks it was refused, that the
  // server's peak RSS stayed within bounds, and that it still serves.
  void ExpectRefused(const std::string& address, const std::string& method) {
    const long before = server_->PeakRssKib();
    ASSERT_GT(before, 0);
    const CallResult result = SendPrecompressed(address, method, *bomb_, absl::Seconds(30));
    const long after = server_->PeakRssKib();
    std::printf(
        "%s: %zu bytes of gzip (%zu inflated) -> status %d '%s'; server peak RSS %ld -> "
        "%ld KiB\n",
        method.c_str(), bomb_->size(), kInflatedBytes, static_cast<int>(result.code),
        result.details.c_str(), before, after);
    EXPECT_EQ(result.code, GRPC_STATUS_UNIMPLEMENTED) << result.details;
    EXPECT_THAT(result.details, ::testing::HasSubstr("gzip"));
    EXPECT_LT(after - before, kAllowedGrowthKib)
        << "the server's peak RSS grew by " << (after - before) << " KiB";
    ASSERT_TRUE(server_->Alive()) << server_->Stderr();
    EXPECT_EQ(CheckHealth(server_->address(), absl::Seconds(5)).value_or(-1), 1);
  }

  static std::string* bomb_;
  std::string token_file_;
  std::unique_ptr<ServerProcess> server_;
};

std::string* CompressionBombTest::bomb_ = nullptr;

TEST_F(CompressionBombTest, PredictOnTheMainPort) {
  ExpectRefused(server_->address(), "/habitat.v1.PredictionService/Predict");
}

TEST_F(CompressionBombTest, UploadTraceOnTheMainPort) {
  ExpectRefused(server_->address(), "/habitat.v1.PredictionService/UploadTrace");
}

TEST_F(CompressionBombTest, HealthCheckOnTheHealthOnlyPort) {
  ExpectRefused(server_->health_address(), "/grpc.health.v1.Health/Check");
}

}  // namespace
}  // namespace habitat::hostile
