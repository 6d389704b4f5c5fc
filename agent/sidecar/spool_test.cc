// The spool uploader against a real in-process PredictionServer, with real
// H100 fixture traces written into a temporary spool the way the tracker
// writes them.
#include "agent/sidecar/spool.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <random>
#include <set>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "agent/sidecar/spool_test_support.h"
#include "common/file_io.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/prediction_server.h"
#include "testing/files.h"
#include "testing/ports.h"

#ifndef HABITAT_DATA_DIR
#error "HABITAT_DATA_DIR must be defined"
#endif

namespace habitat::agent {
namespace {

using ::habitat::agent::testing::DistinctTraces;
using ::habitat::agent::testing::IdOf;
using ::habitat::agent::testing::WriteSpoolBytes;
using ::habitat::agent::testing::WriteSpoolTrace;
using ::habitat::testing::FilesWithSuffix;
using ::habitat::testing::ScratchDir;
using ::habitat::testing::UnusedPort;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAreArray;

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::unique_ptr<PredictionServer> StartServer(int port, const std::string& trace_dir) {
  ServerOptions options;
  options.address = absl::StrCat("127.0.0.1:", port);
  options.backend.data_dir = HABITAT_DATA_DIR;
  options.store = "dir:" + trace_dir;
  auto server = PredictionServer::Start(options);
  EXPECT_TRUE(server.ok()) << server.status();
  return server.ok() ? std::move(*server) : nullptr;
}

// "<hex>.trace" names a DirectoryTraceStore gives these traces.
std::vector<std::string> StoreNames(const std::vector<v1::Trace>& traces) {
  std::vector<std::string> names;
  for (const auto& trace : traces) names.push_back(IdOf(trace).substr(7) + ".trace");
  return names;
}

// Collects the uploader's log lines.
class LogSink {
 public:
  std::function<void(const std::string&)> Callback() {
    return [this](const std::string& line) {
      absl::MutexLock lock(&mutex_);
      lines_.push_back(line);
    };
  }
  int Count(absl::string_view needle) {
    absl::MutexLock lock(&mutex_);
    int n = 0;
    for (const auto& line : lines_) n += absl::StrContains(line, needle) ? 1 : 0;
    return n;
  }
  std::string All() {
    absl::MutexLock lock(&mutex_);
    return absl::StrJoin(lines_, "\n");
  }

 private:
  absl::Mutex mutex_;
  std::vector<std::string> lines_;
};

class SpoolTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto traces = DistinctTraces(/*fixtures=*/5, /*count=*/20);
    ASSERT_TRUE(traces.ok()) << traces.status();
    traces_ = new std::vector<v1::Trace>(std::move(*traces));
  }
  static void TearDownTestSuite() { delete traces_; }
  const v1::Trace& trace(int i) { return (*traces_)[static_cast<size_t>(i)]; }

  void SetUp() override {
    spool_ = tmp_.Sub("spool");
    store_ = tmp_.Sub("store");
    ASSERT_EQ(::mkdir(spool_.c_str(), 0755), 0);
    port_ = UnusedPort();
    address_ = absl::StrCat("127.0.0.1:", port_);
    auto client = Connect()();
    ASSERT_TRUE(client.ok());
    client_ = std::move(*client);
  }

  ClientFactory Connect() {
    return [address = address_] {
      ClientOptions client_options;
      client_options.max_attempts = 1;
      client_options.deadline = absl::Seconds(20);
      return PredictionClient::Connect(address, client_options);
    };
  }

  SpoolOptions Options() {
    SpoolOptions options;
    options.spool_dir = spool_;
    options.server_label = address_;
    options.poll_interval = absl::Milliseconds(20);
    options.backoff = {absl::Milliseconds(50), absl::Milliseconds(400)};
    options.settle_time = absl::ZeroDuration();
    options.log = log_.Callback();
    return options;
  }

  std::unique_ptr<SpoolUploader> MakeUploader(SpoolOptions options) {
    auto uploader = SpoolUploader::Create(std::move(options), Connect());
    EXPECT_TRUE(uploader.ok()) << uploader.status();
    return uploader.ok() ? std::move(*uploader) : nullptr;
  }

  // Passes until no *.trace is left or `timeout` passes; true if drained.
  bool Drain(SpoolUploader& uploader, absl::Duration timeout) {
    const absl::Time end = absl::Now() + timeout;
    while (absl::Now() < end) {
      EXPECT_TRUE(uploader.ProcessOnce().ok());
      if (FilesWithSuffix(spool_, ".trace").empty()) return true;
      absl::SleepFor(absl::Milliseconds(20));
    }
    return false;
  }

  static std::vector<v1::Trace>* traces_;
  ScratchDir tmp_;
  std::string spool_, store_, address_;
  int port_ = 0;
  std::unique_ptr<PredictionClient> client_;
  LogSink log_;
};
std::vector<v1::Trace>* SpoolTest::traces_ = nullptr;

TEST_F(SpoolTest, UploadsDeletesAndLeavesDurableReceipts) {
  auto server = StartServer(port_, store_);
  ASSERT_NE(server, nullptr);
  auto uploader = MakeUploader(Options());
  ASSERT_NE(uploader, nullptr);
  for (int i = 0; i < 4; ++i) {
    WriteSpoolTrace(spool_, absl::StrCat("t", i, ".trace"), trace(i), /*gzip=*/i % 2 == 1);
  }
  ASSERT_TRUE(uploader->ProcessOnce().ok());

  EXPECT_THAT(FilesWithSuffix(spool_, ".trace"), IsEmpty());
  EXPECT_THAT(FilesWithSuffix(spool_, ".tmp"), IsEmpty());
  std::vector<v1::Trace> sent(traces_->begin(), traces_->begin() + 4);
  EXPECT_THAT(FilesWithSuffix(store_, ".trace"), UnorderedElementsAreArray(StoreNames(sent)));
  for (int i = 0; i < 4; ++i) {
    auto receipt = ParseReceipt(Slurp(absl::StrCat(spool_, "/t", i, ".trace.done")));
    ASSERT_TRUE(receipt.ok()) << receipt.status();
    EXPECT_EQ(receipt->trace_id, IdOf(trace(i)));
    EXPECT_TRUE(receipt->created);
    EXPECT_EQ(receipt->server, address_);
  }
  SpoolStats stats = uploader->stats();
  EXPECT_EQ(stats.uploaded, 4);
  EXPECT_EQ(stats.already_stored, 0);
  EXPECT_EQ(stats.transient_failures, 0);
  EXPECT_EQ(uploader->pending(), 0);

  // The same content again under another name: acknowledged as already
  // stored, deleted, and still one copy on the server.
  WriteSpoolTrace(spool_, "again.trace", trace(2), /*gzip=*/false);
  ASSERT_TRUE(uploader->ProcessOnce().ok());
  EXPECT_THAT(FilesWithSuffix(spool_, ".trace"), IsEmpty());
  stats = uploader->stats();
  EXPECT_EQ(stats.uploaded, 5);
  EXPECT_EQ(stats.already_stored, 1);
  EXPECT_EQ(FilesWithSuffix(store_, ".trace").size(), 4u);
  EXPECT_THAT(Slurp(spool_ + "/again.trace.done"), HasSubstr("created=false"));
}

TEST_F(SpoolTest, ShipsTheTrackersOwnCaptureAsWritten) {
  // Written by the agent's tracker on an H100 (tests/testdata/agent/h100),
  // with its own wire-format writer, and copied into the spool unchanged.
  auto server = StartServer(port_, store_);
  ASSERT_NE(server, nullptr);
  auto uploader = MakeUploader(Options());
  ASSERT_NE(uploader, nullptr);
  for (const char* name : {"resnet50_b16_fp32", "smallcnn_b8_fp32"}) {
    const std::string bytes =
        Slurp(absl::StrCat(HABITAT_TESTDATA_DIR, "/agent/h100/", name, ".trace.gz"));
    ASSERT_FALSE(bytes.empty()) << name;
    WriteSpoolBytes(spool_, absl::StrCat(name, ".trace"), bytes);
  }
  ASSERT_TRUE(uploader->ProcessOnce().ok());
  EXPECT_THAT(FilesWithSuffix(spool_, ".trace"), IsEmpty()) << log_.All();
  EXPECT_EQ(uploader->stats().uploaded, 2);
  EXPECT_EQ(FilesWithSuffix(store_, ".trace").size(), 2u);
  auto inflated =
      Gunzip(Slurp(absl::StrCat(HABITAT_TESTDATA_DIR, "/agent/h100/resnet50_b16_fp32.trace.gz")));
  ASSERT_TRUE(inflated.ok());
  v1::Trace trace;
  ASSERT_TRUE(trace.ParseFromString(*inflated));
  auto receipt = ParseReceipt(Slurp(spool_ + "/resnet50_b16_fp32.trace.done"));
  ASSERT_TRUE(receipt.ok());
  EXPECT_EQ(receipt->trace_id, IdOf(trace));
}

TEST_F(SpoolTest, BadFilesAreMovedAsideWithAReasonAndTheRestUploads) {
  auto server = StartServer(port_, store_);
  ASSERT_NE(server, nullptr);
  std::string good;
  ASSERT_TRUE(trace(0).SerializeToString(&good));
  auto good_gz = Gzip(good);
  ASSERT_TRUE(good_gz.ok());
  // A real torch.profiler export renamed to .trace (gzipped and plain).
  auto kineto_gz = Slurp(absl::StrCat(HABITAT_TESTDATA_DIR, "/kineto/h100/dcgan_b64_fp32.json.gz"));
  auto kineto = Gunzip(kineto_gz);
  ASSERT_TRUE(kineto.ok());
  std::mt19937 random(42);
  std::string noise(4096, '\0');
  for (char& c : noise) c = static_cast<char>(random());
  v1::Trace unknown_gpu = trace(1);
  unknown_gpu.mutable_origin()->set_device_id("GPU-that-does-not-exist");
  v1::Trace negative = trace(2);
  negative.mutable_operations(0)->mutable_forward()->set_time_ns(-5);

  WriteSpoolTrace(spool_, "good0.trace", trace(0), false);
  WriteSpoolBytes(spool_, "truncated.trace", good.substr(0, good.size() / 2));
  WriteSpoolBytes(spool_, "truncated_gz.trace", good_gz->substr(0, good_gz->size() - 100));
  WriteSpoolBytes(spool_, "noise.trace", noise);
  WriteSpoolBytes(spool_, "kineto.trace", *kineto);
  WriteSpoolBytes(spool_, "kineto_gz.trace", kineto_gz);
  WriteSpoolBytes(spool_, "empty.trace", "");
  WriteSpoolTrace(spool_, "unknown_gpu.trace", unknown_gpu, false);
  WriteSpoolTrace(spool_, "negative.trace", negative, true);
  WriteSpoolTrace(spool_, "good3.trace", trace(3), true);

  auto uploader = MakeUploader(Options());
  ASSERT_NE(uploader, nullptr);
  ASSERT_TRUE(uploader->ProcessOnce().ok());
  ASSERT_TRUE(uploader->ProcessOnce().ok());

  EXPECT_THAT(FilesWithSuffix(spool_, ".trace"), IsEmpty());
  EXPECT_THAT(FilesWithSuffix(spool_, ".done"),
              ElementsAre("good0.trace.done", "good3.trace.done"));
  EXPECT_THAT(FilesWithSuffix(store_, ".trace"),
              UnorderedElementsAreArray(StoreNames({trace(0), trace(3)})));
  const std::string rejected = spool_ + "/rejected";
  EXPECT_THAT(
      FilesWithSuffix(rejected, ".trace"),
      ElementsAre("empty.trace", "kineto.trace", "kineto_gz.trace", "negative.trace", "noise.trace",
                  "truncated.trace", "truncated_gz.trace", "unknown_gpu.trace"));
  EXPECT_EQ(FilesWithSuffix(rejected, ".reason").size(), 8u);
  // The rejected bytes are the original ones: nothing is lost.
  EXPECT_TRUE(Slurp(rejected + "/kineto_gz.trace") == kineto_gz);

  auto reason = [&](const std::string& name) { return Slurp(rejected + "/" + name + ".reason"); };
  EXPECT_THAT(reason("truncated.trace"), HasSubstr("does not parse as a habitat.v1.Trace"));
  EXPECT_THAT(reason("truncated_gz.trace"), HasSubstr("gzip data that does not inflate"));
  EXPECT_THAT(reason("kineto.trace"), HasSubstr("is JSON"));
  EXPECT_THAT(reason("kineto_gz.trace"), HasSubstr("import-kineto"));
  EXPECT_THAT(reason("empty.trace"), HasSubstr("is empty"));
  EXPECT_THAT(reason("unknown_gpu.trace"), HasSubstr("NOT_FOUND"));
  EXPECT_THAT(reason("unknown_gpu.trace"), HasSubstr("GPU-that-does-not-exist"));
  EXPECT_THAT(reason("negative.trace"), HasSubstr("INVALID_ARGUMENT"));
  EXPECT_THAT(reason("negative.trace"), HasSubstr("operations[0].forward.time_ns"));
  // Random bytes fail either here or on the server; rejected both ways.
  EXPECT_THAT(reason("noise.trace"), HasSubstr("noise.trace"));

  // Each reason was logged once, although the spool was scanned twice.
  for (const char* name : {"truncated.trace", "noise.trace", "kineto.trace", "empty.trace",
                           "unknown_gpu.trace", "negative.trace"}) {
    EXPECT_EQ(log_.Count(absl::StrCat("rejected ", name)), 1) << name << "\n" << log_.All();
  }
  const SpoolStats stats = uploader->stats();
  EXPECT_EQ(stats.rejected, 8);
  EXPECT_EQ(stats.uploaded, 2);
}

TEST_F(SpoolTest, ATraceLargerThanAnUploadCanBeIsRejectedNotRetried) {
  auto server = StartServer(port_, store_);
  ASSERT_NE(server, nullptr);
  SpoolOptions options = Options();
  options.max_upload_bytes = trace(0).ByteSizeLong() - 1;
  auto uploader = MakeUploader(options);
  ASSERT_NE(uploader, nullptr);
  WriteSpoolTrace(spool_, "big.trace", trace(0), true);
  ASSERT_TRUE(uploader->ProcessOnce().ok());
  EXPECT_THAT(FilesWithSuffix(spool_ + "/rejected", ".trace"), ElementsAre("big.trace"));
  EXPECT_THAT(Slurp(spool_ + "/rejected/big.trace.reason"), HasSubstr("largest upload"));
  EXPECT_THAT(FilesWithSuffix(store_, ".trace"), IsEmpty());

  // A (sparse) 200 MiB file is refused by its size, before it is read.
  uploader.reset();
  uploader = MakeUploader(Options());
  ASSERT_NE(uploader, nullptr);
  WriteSpoolBytes(spool_, "huge.trace", "x");
  ASSERT_EQ(::truncate((spool_ + "/huge.trace").c_str(), 200 << 20), 0);
  ASSERT_TRUE(uploader->ProcessOnce().ok());
  EXPECT_THAT(Slurp(spool_ + "/rejected/huge.trace.reason"),
              HasSubstr("is 209715200 bytes, more than the largest upload (67108864 bytes)"));
}

TEST_F(SpoolTest, AFreshFileThatDoesNotParseIsGivenTimeToSettle) {
  auto server = StartServer(port_, store_);
  ASSERT_NE(server, nullptr);
  std::string good;
  ASSERT_TRUE(trace(0).SerializeToString(&good));
  SpoolOptions options = Options();
  options.settle_time = absl::Hours(1);
  auto uploader = MakeUploader(options);
  ASSERT_NE(uploader, nullptr);
  // A writer copying straight into the spool, half way through.
  WriteSpoolBytes(spool_, "copying.trace", good.substr(0, good.size() / 2));
  ASSERT_TRUE(uploader->ProcessOnce().ok());
  ASSERT_TRUE(uploader->ProcessOnce().ok());
  EXPECT_THAT(FilesWithSuffix(spool_, ".trace"), ElementsAre("copying.trace"));
  EXPECT_EQ(uploader->stats().rejected, 0);
  EXPECT_EQ(log_.Count("does not parse yet"), 1) << log_.All();
  // The copy finishes (same inode, written in place): uploaded.
  {
    std::ofstream out(spool_ + "/copying.trace", std::ios::binary | std::ios::trunc);
    out << good;
  }
  ASSERT_TRUE(uploader->ProcessOnce().ok());
  EXPECT_THAT(FilesWithSuffix(spool_, ".trace"), IsEmpty());
  EXPECT_EQ(uploader->stats().uploaded, 1);

  // One that stays broken is rejected once it has not changed for the
  // settle time (here: its mtime is moved back two hours).
  WriteSpoolBytes(spool_, "stale.trace", good.substr(0, good.size() / 3));
  const timespec old = absl::ToTimespec(absl::Now() - absl::Hours(2));
  const timespec times[2] = {old, old};
  ASSERT_EQ(::utimensat(AT_FDCWD, (spool_ + "/stale.trace").c_str(), times, 0), 0);
  ASSERT_TRUE(uploader->ProcessOnce().ok());
  EXPECT_THAT(FilesWithSuffix(spool_ + "/rejected", ".trace"), ElementsAre("stale.trace"));
}

TEST_F(SpoolTest, ServerDownAtStartKeepsFilesThenUploadsWhenItComesUp) {
  auto uploader = MakeUploader(Options());
  ASSERT_NE(uploader, nullptr);
  for (int i = 0; i < 3; ++i)
    WriteSpoolTrace(spool_, absl::StrCat("t", i, ".trace"), trace(i), true);
  for (int pass = 0; pass < 5; ++pass) {
    ASSERT_TRUE(uploader->ProcessOnce().ok());
    absl::SleepFor(absl::Milliseconds(60));
  }
  EXPECT_EQ(FilesWithSuffix(spool_, ".trace").size(), 3u);
  EXPECT_THAT(FilesWithSuffix(spool_ + "/rejected", ".trace"), IsEmpty());
  EXPECT_GE(uploader->stats().transient_failures, 1);
  EXPECT_EQ(uploader->stats().uploaded, 0);
  // One line for the outage, not one per attempt.
  EXPECT_EQ(log_.Count("is not answering"), 1) << log_.All();
  EXPECT_EQ(uploader->pending(), 3);

  auto server = StartServer(port_, store_);
  ASSERT_NE(server, nullptr);
  const absl::Time started = absl::Now();
  ASSERT_TRUE(Drain(*uploader, absl::Seconds(30))) << log_.All();
  std::cerr << "drained " << absl::FormatDuration(absl::Now() - started)
            << " after the server started\n";
  EXPECT_THAT(FilesWithSuffix(store_, ".trace"),
              UnorderedElementsAreArray(StoreNames({trace(0), trace(1), trace(2)})));
  EXPECT_EQ(uploader->stats().uploaded, 3);
  EXPECT_EQ(log_.Count("answers again"), 1) << log_.All();
}

TEST_F(SpoolTest, ServerStoppedMidRunAndRestartedStoresEveryTraceExactlyOnce) {
  constexpr int kTraces = 20;
  absl::Mutex mutex;
  std::unique_ptr<PredictionServer> server = StartServer(port_, store_);
  ASSERT_NE(server, nullptr);
  bool stopped = false;
  int uploads_seen = 0;
  SpoolOptions options = Options();
  // After the 6th acknowledged upload, the server shuts down between two
  // uploads of the running sidecar.
  options.log = [&, sink = log_.Callback()](const std::string& line) {
    sink(line);
    if (!absl::StartsWith(line, "uploaded ")) return;
    absl::MutexLock lock(&mutex);
    if (++uploads_seen == 6) {
      server->Shutdown(absl::ZeroDuration());
      stopped = true;
    }
  };
  for (int i = 0; i < kTraces; ++i) {
    WriteSpoolTrace(spool_, absl::StrCat("t", 100 + i, ".trace"), trace(i), i % 3 == 0);
  }
  auto uploader = MakeUploader(options);
  ASSERT_NE(uploader, nullptr);
  std::thread runner([&] { uploader->Run(); });

  {
    absl::MutexLock lock(&mutex);
    ASSERT_TRUE(mutex.AwaitWithTimeout(absl::Condition(&stopped), absl::Seconds(60)));
  }
  const absl::Time outage = absl::Now();
  while (log_.Count("is not answering") == 0 && absl::Now() < outage + absl::Seconds(20)) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_EQ(log_.Count("is not answering"), 1) << log_.All();
  absl::SleepFor(absl::Milliseconds(300));
  const size_t waiting = FilesWithSuffix(spool_, ".trace").size();
  EXPECT_EQ(waiting, static_cast<size_t>(kTraces - 6));
  {
    absl::MutexLock lock(&mutex);
    server.reset();
    server = StartServer(port_, store_);
    ASSERT_NE(server, nullptr);
  }
  const absl::Time restarted = absl::Now();
  while (!FilesWithSuffix(spool_, ".trace").empty() &&
         absl::Now() < restarted + absl::Seconds(30)) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  std::cerr << "drained " << waiting << " traces in "
            << absl::FormatDuration(absl::Now() - restarted) << " after the restart\n";
  uploader->Stop();
  runner.join();

  EXPECT_THAT(FilesWithSuffix(spool_, ".trace"), IsEmpty()) << log_.All();
  std::vector<v1::Trace> all(traces_->begin(), traces_->begin() + kTraces);
  EXPECT_THAT(FilesWithSuffix(store_, ".trace"), UnorderedElementsAreArray(StoreNames(all)));
  EXPECT_EQ(FilesWithSuffix(spool_, ".done").size(), static_cast<size_t>(kTraces));
  EXPECT_EQ(uploader->stats().uploaded, kTraces);
  EXPECT_EQ(uploader->stats().rejected, 0);
  EXPECT_EQ(log_.Count("stopped"), 1);
}

TEST_F(SpoolTest, CrashBetweenReceiptAndDeleteIsRecoveredWithoutAnUpload) {
  std::string bytes;
  ASSERT_TRUE(trace(0).SerializeToString(&bytes));
  {
    auto server = StartServer(port_, store_);
    ASSERT_NE(server, nullptr);
    auto uploader = MakeUploader(Options());
    ASSERT_NE(uploader, nullptr);
    WriteSpoolBytes(spool_, "a.trace", bytes);
    ASSERT_TRUE(uploader->ProcessOnce().ok());
    ASSERT_EQ(uploader->stats().uploaded, 1);
  }
  // The state a crash after the receipt and before the unlink leaves: the
  // trace and its receipt. The server is gone, so only the receipt can
  // justify the delete.
  WriteSpoolBytes(spool_, "a.trace", bytes);
  auto restarted = MakeUploader(Options());
  ASSERT_NE(restarted, nullptr);
  ASSERT_TRUE(restarted->ProcessOnce().ok());
  EXPECT_THAT(FilesWithSuffix(spool_, ".trace"), IsEmpty());
  EXPECT_EQ(restarted->stats().recovered, 1);
  EXPECT_EQ(restarted->stats().transient_failures, 0);
  EXPECT_EQ(restarted->stats().uploaded, 0);

  // A new trace that reuses the name is not covered by the old receipt:
  // it waits for the server and is uploaded.
  WriteSpoolTrace(spool_, "a.trace", trace(1), false);
  ASSERT_TRUE(restarted->ProcessOnce().ok());
  EXPECT_THAT(FilesWithSuffix(spool_, ".trace"), ElementsAre("a.trace"));
  EXPECT_EQ(restarted->stats().recovered, 1);
  EXPECT_EQ(restarted->stats().transient_failures, 1);
  auto server = StartServer(port_, store_);
  ASSERT_NE(server, nullptr);
  ASSERT_TRUE(Drain(*restarted, absl::Seconds(30))) << log_.All();
  auto receipt = ParseReceipt(Slurp(spool_ + "/a.trace.done"));
  ASSERT_TRUE(receipt.ok());
  EXPECT_EQ(receipt->trace_id, IdOf(trace(1)));
  EXPECT_THAT(FilesWithSuffix(store_, ".trace"),
              UnorderedElementsAreArray(StoreNames({trace(0), trace(1)})));
}

TEST_F(SpoolTest, PredictionsAreWrittenBesideTheReceipt) {
  auto server = StartServer(port_, store_);
  ASSERT_NE(server, nullptr);
  SpoolOptions options = Options();
  options.predict = true;
  options.predict_devices = {"H100-SXM", "A100-SXM-80GB"};
  auto devices = client_->ListDevices();
  ASSERT_TRUE(devices.ok()) << devices.status();
  std::set<std::string> known;
  for (const auto& d : devices->devices()) known.insert(d.id());
  for (const auto& id : options.predict_devices) ASSERT_TRUE(known.count(id)) << id;
  auto uploader = MakeUploader(options);
  ASSERT_NE(uploader, nullptr);
  WriteSpoolTrace(spool_, "resnet.trace", trace(0), true);
  ASSERT_TRUE(uploader->ProcessOnce().ok());
  const std::string json = Slurp(spool_ + "/resnet.prediction.json");
  EXPECT_THAT(json, HasSubstr("\"device_id\": \"H100-SXM\""));
  EXPECT_THAT(json, HasSubstr("\"device_id\": \"A100-SXM-80GB\""));
  EXPECT_THAT(json, HasSubstr(IdOf(trace(0))));
  EXPECT_EQ(uploader->stats().predictions, 1);
  EXPECT_EQ(log_.Count("predicted resnet.trace"), 1);

  // An unknown device fails the prediction, not the upload.
  SpoolOptions bad = Options();
  bad.predict = true;
  bad.predict_devices = {"no-such-gpu"};
  uploader.reset();
  uploader = MakeUploader(bad);
  ASSERT_NE(uploader, nullptr);
  WriteSpoolTrace(spool_, "other.trace", trace(1), false);
  ASSERT_TRUE(uploader->ProcessOnce().ok());
  EXPECT_THAT(FilesWithSuffix(spool_, ".trace"), IsEmpty());
  EXPECT_EQ(uploader->stats().uploaded, 1);
  EXPECT_EQ(uploader->stats().prediction_failures, 1);
  EXPECT_EQ(log_.Count("no-such-gpu"), 1) << log_.All();
}

TEST_F(SpoolTest, OneUploaderPerSpoolAndStopEndsRunPromptly) {
  SpoolOptions options = Options();
  options.poll_interval = absl::Seconds(30);
  auto first = MakeUploader(options);
  ASSERT_NE(first, nullptr);
  auto second = SpoolUploader::Create(Options(), Connect());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(second.status().message(), HasSubstr(spool_));

  std::thread runner([&] { first->Run(); });
  absl::SleepFor(absl::Milliseconds(100));
  const absl::Time stop = absl::Now();
  first->Stop();
  runner.join();
  EXPECT_LT(absl::Now() - stop, absl::Seconds(2));
  // The lock goes with the uploader.
  first.reset();
  EXPECT_TRUE(SpoolUploader::Create(Options(), Connect()).ok());
}

TEST_F(SpoolTest, CreateRejectsBadOptions) {
  SpoolOptions options = Options();
  options.spool_dir = "";
  EXPECT_EQ(SpoolUploader::Create(options, Connect()).status().code(),
            absl::StatusCode::kInvalidArgument);
  options = Options();
  options.backoff = {absl::Seconds(2), absl::Seconds(1)};
  EXPECT_THAT(SpoolUploader::Create(options, Connect()).status().message(), HasSubstr("backoff"));
  options = Options();
  EXPECT_EQ(SpoolUploader::Create(options, nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
  // A client that cannot be made (here: an empty address) fails Create.
  EXPECT_EQ(
      SpoolUploader::Create(options, [] { return PredictionClient::Connect(""); }).status().code(),
      absl::StatusCode::kInvalidArgument);
  WriteSpoolBytes(tmp_.path(), "file", "x");
  options.spool_dir = tmp_.Sub("file");
  EXPECT_THAT(SpoolUploader::Create(options, Connect()).status().message(),
              HasSubstr("not a directory"));
}

}  // namespace
}  // namespace habitat::agent
