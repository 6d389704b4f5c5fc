// Health/Watch streams held open on the main port: a Watch never ends by
// itself and counts as activity for --max_connection_idle_seconds, so a
// client without a token that held one per connection kept every slot of
// the port (4,200 connections kept every client out). On the main port a
// Watch needs the token; Check stays open to probes, and the plaintext
// health-only port keeps Watch for probes that use it.
#include <unistd.h>

#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/async_stream.h"
#include "grpcpp/support/channel_arguments.h"
#include "gtest/gtest.h"
#include "testing/health_check.h"
#include "testing/server_process.h"
#include "tests/hostile/hostile_support.h"

namespace habitat::hostile {
namespace {

using ::habitat::testing::CheckHealth;
using ::habitat::testing::ServerProcess;
using ::habitat::testing::ServerSpec;

constexpr char kToken[] = "Watch-token-0123456789abcdef";
constexpr int kMaxConnections = 4;

// One Health/Watch call ("" service) on a connection of its own.
class HealthWatch {
 public:
  HealthWatch(const std::string& address, const std::string& token) {
    grpc::ChannelArguments args;
    args.SetInt("grpc.use_local_subchannel_pool", 1);
    channel_ = grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
    stub_ = grpc::health::v1::Health::NewStub(channel_);
    if (!token.empty()) context_.AddMetadata("authorization", absl::StrCat("Bearer ", token));
    context_.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(60)));
    // The empty service name: the whole server. The request goes out with
    // the start of the call.
    call_ = stub_->PrepareAsyncWatch(&context_, grpc::health::v1::HealthCheckRequest(), &cq_);
    // One operation at a time: gRPC refuses overlapping ones.
    call_->StartCall(Tag(kStart));
    pending_ = 1;
    if (!Await(kStart)) return;
    call_->Read(&response_, Tag(kRead));
    pending_ = 1;
  }
  ~HealthWatch() {
    context_.TryCancel();
    Poll(absl::Seconds(5), /*until_message=*/false);
    cq_.Shutdown();
    void* tag = nullptr;
    bool ok = false;
    while (cq_.Next(&tag, &ok)) {
    }
  }

  // Waits until the server sent a status or ended the call.
  void WaitFirst(absl::Duration timeout) { Poll(timeout, /*until_message=*/true); }
  // Whether the call has ended within `timeout`.
  bool Ended(absl::Duration timeout) {
    Poll(timeout, /*until_message=*/false);
    return finished_;
  }
  int messages() const { return messages_; }
  // The serving status the last message carried.
  grpc::health::v1::HealthCheckResponse::ServingStatus last_status() const {
    return response_.status();
  }
  const grpc::Status& status() const { return status_; }

 private:
  enum Op { kStart = 1, kRead, kFinish };
  static void* Tag(Op op) { return reinterpret_cast<void*>(static_cast<intptr_t>(op)); }

  // Waits (at most 5 s) for the one pending operation, `op`.
  bool Await(Op op) {
    void* tag = nullptr;
    bool ok = false;
    if (cq_.AsyncNext(&tag, &ok, absl::ToChronoTime(absl::Now() + absl::Seconds(5))) !=
        grpc::CompletionQueue::GOT_EVENT) {
      return false;
    }
    pending_ = 0;
    return tag == Tag(op) && ok;
  }

  void Poll(absl::Duration timeout, bool until_message) {
    const absl::Time end = absl::Now() + timeout;
    while (pending_ > 0 && !finished_ && !(until_message && messages_ > 0)) {
      void* tag = nullptr;
      bool ok = false;
      if (cq_.AsyncNext(&tag, &ok, absl::ToChronoTime(end)) != grpc::CompletionQueue::GOT_EVENT) {
        return;
      }
      --pending_;
      if (tag == Tag(kRead) && ok) {
        ++messages_;
        call_->Read(&response_, Tag(kRead));
        ++pending_;
      } else if (tag == Tag(kRead)) {
        call_->Finish(&status_, Tag(kFinish));
        ++pending_;
      } else if (tag == Tag(kFinish)) {
        finished_ = true;
      }
    }
  }

  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<grpc::health::v1::Health::Stub> stub_;
  grpc::ClientContext context_;
  grpc::CompletionQueue cq_;
  std::unique_ptr<grpc::ClientAsyncReaderInterface<grpc::health::v1::HealthCheckResponse>> call_;
  grpc::health::v1::HealthCheckResponse response_;
  grpc::Status status_;
  int pending_ = 0;
  int messages_ = 0;
  bool finished_ = false;
};

class HealthWatchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    token_file_ = absl::StrCat(::testing::TempDir(), "/watch-tokens-", getpid());
    std::ofstream(token_file_) << "tenant-a " << kToken << "\n";
    // Every slot of the port can be held by one peer; idle connections go
    // after a second. No self-probes, whose connections would take slots.
    server_ = std::make_unique<ServerProcess>(
        ServerSpec{{"--token_file=" + token_file_, "--max_connections_per_peer=0",
                    absl::StrCat("--max_connections=", kMaxConnections),
                    "--max_connection_idle_seconds=1", "--self_probe_seconds=0"}});
    ASSERT_TRUE(server_->WaitServing()) << server_->Stderr();
  }
  void TearDown() override { unlink(token_file_.c_str()); }

  std::string token_file_;
  std::unique_ptr<ServerProcess> server_;
};

TEST_F(HealthWatchTest, TokenLessWatchStreamsDoNotHoldTheMainPort) {
  std::vector<std::unique_ptr<HealthWatch>> watches;
  for (int i = 0; i < kMaxConnections; ++i) {
    watches.push_back(std::make_unique<HealthWatch>(server_->address(), ""));
  }
  for (auto& watch : watches) {
    watch->WaitFirst(absl::Seconds(5));
    EXPECT_TRUE(watch->Ended(absl::Seconds(2)))
        << "a Watch without a token is still open on the main port";
    EXPECT_EQ(watch->messages(), 0) << "a Watch without a token was answered";
  }
  // Their connections fall idle and are closed (the idle limit is 1 s,
  // with gRPC's jitter), so a new client gets in while the watchers stay.
  std::string last;
  EXPECT_TRUE(WaitForHealth(server_->address(), 1, absl::Seconds(8), &last))
      << "main port held by token-less Watch streams: " << last;
  EXPECT_TRUE(server_->Alive());
}

TEST_F(HealthWatchTest, ProbesAndTenantsKeepWatchAndCheck) {
  // Check needs no token on either port; kubelet and grpc_health_probe use it.
  EXPECT_EQ(CheckHealth(server_->address(), absl::Seconds(5)).value_or(-1), 1);
  EXPECT_EQ(CheckHealth(server_->health_address(), absl::Seconds(5)).value_or(-1), 1);
  // Watch without a token on the health-only port, with one on the main port.
  HealthWatch probe(server_->health_address(), "");
  HealthWatch tenant(server_->address(), kToken);
  for (HealthWatch* watch : {&probe, &tenant}) {
    watch->WaitFirst(absl::Seconds(5));
    EXPECT_EQ(watch->messages(), 1) << watch->status().error_message();
    EXPECT_EQ(watch->last_status(), grpc::health::v1::HealthCheckResponse::SERVING);
    EXPECT_FALSE(watch->Ended(absl::Milliseconds(200)));
  }
}

}  // namespace
}  // namespace habitat::hostile
