#include "tools/load_test/load_generator.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>
#include <utility>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "grpcpp/grpcpp.h"
#include "habitat/v1/prediction_service.grpc.pb.h"

namespace habitat {
namespace load_test {
namespace {

using Clock = std::chrono::steady_clock;

const char* CodeName(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::CANCELLED:
      return "CANCELLED";
    case grpc::StatusCode::UNKNOWN:
      return "UNKNOWN";
    case grpc::StatusCode::INVALID_ARGUMENT:
      return "INVALID_ARGUMENT";
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return "DEADLINE_EXCEEDED";
    case grpc::StatusCode::NOT_FOUND:
      return "NOT_FOUND";
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return "RESOURCE_EXHAUSTED";
    case grpc::StatusCode::FAILED_PRECONDITION:
      return "FAILED_PRECONDITION";
    case grpc::StatusCode::UNIMPLEMENTED:
      return "UNIMPLEMENTED";
    case grpc::StatusCode::INTERNAL:
      return "INTERNAL";
    case grpc::StatusCode::UNAVAILABLE:
      return "UNAVAILABLE";
    case grpc::StatusCode::UNAUTHENTICATED:
      return "UNAUTHENTICATED";
    case grpc::StatusCode::PERMISSION_DENIED:
      return "PERMISSION_DENIED";
    default:
      return "OTHER";
  }
}

// Everything the callers share; the counters are guarded by `mutex`.
struct Shared {
  const LoadOptions* options;
  const habitat::v1::PredictRequest* request;
  Clock::time_point measure_start;
  Clock::time_point measure_end;
  absl::Mutex mutex;
  int running ABSL_GUARDED_BY(mutex) = 0;
  int64_t calls ABSL_GUARDED_BY(mutex) = 0;
  std::map<std::string, int64_t> errors ABSL_GUARDED_BY(mutex);
};

// One closed-loop caller. Its callbacks never overlap (one call in flight),
// so its latencies need no lock.
class Caller {
 public:
  Caller(Shared* shared, habitat::v1::PredictionService::Stub* stub)
      : shared_(shared), stub_(stub) {}

  void Issue() {
    // Two call slots: the slot of the call that just finished is still in
    // use by gRPC while its callback runs, so the next call takes the other
    // one, whose previous call completed a full round earlier.
    current_ ^= 1;
    Call& call = slots_[current_].emplace();
    call.context.set_deadline(std::chrono::system_clock::now() +
                              absl::ToChronoMilliseconds(shared_->options->deadline));
    call.start = Clock::now();
    stub_->async()->Predict(&call.context, shared_->request, &call.response,
                            [this, &call](grpc::Status status) { Done(call, status); });
  }

  std::vector<int64_t>& latencies() { return latencies_; }

 private:
  struct Call {
    grpc::ClientContext context;
    habitat::v1::PredictResponse response;
    Clock::time_point start;
  };

  void Done(Call& call, const grpc::Status& status) {
    const Clock::time_point end = Clock::now();
    const char* error = nullptr;
    if (!status.ok()) {
      error = CodeName(status.error_code());
    } else if (shared_->options->expected_predictions > 0 &&
               call.response.predictions_size() != shared_->options->expected_predictions) {
      error = "WRONG_ANSWER";
    }
    if (error == nullptr && call.start >= shared_->measure_start && end <= shared_->measure_end) {
      latencies_.push_back(
          std::chrono::duration_cast<std::chrono::nanoseconds>(end - call.start).count());
    }
    {
      absl::MutexLock lock(&shared_->mutex);
      ++shared_->calls;
      if (error != nullptr) ++shared_->errors[error];
      if (end >= shared_->measure_end) {
        --shared_->running;
        return;
      }
    }
    Issue();
  }

  Shared* shared_;
  habitat::v1::PredictionService::Stub* stub_;
  std::optional<Call> slots_[2];
  int current_ = 0;
  std::vector<int64_t> latencies_;
};

}  // namespace

int64_t LoadResult::error_count() const {
  int64_t total = 0;
  for (const auto& [code, n] : errors) total += n;
  return total;
}

int64_t LoadResult::Percentile(double q) const {
  if (latencies_ns.empty()) return 0;
  const size_t index = std::min(latencies_ns.size() - 1,
                                static_cast<size_t>(q * static_cast<double>(latencies_ns.size())));
  return latencies_ns[index];
}

LoadResult RunLoadWithHooks(const LoadOptions& options, const habitat::v1::PredictRequest& request,
                            LoadHooks* hooks) {
  std::vector<std::unique_ptr<habitat::v1::PredictionService::Stub>> stubs;
  for (int i = 0; i < std::max(1, options.channels); ++i) {
    grpc::ChannelArguments args;
    // Separate TCP connections: channels with equal arguments would share
    // one subchannel (and one connection) from gRPC's global pool.
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    args.SetInt("habitat.load_test.channel", i);
    stubs.push_back(habitat::v1::PredictionService::NewStub(
        grpc::CreateCustomChannel(options.address, grpc::InsecureChannelCredentials(), args)));
  }
  Shared shared;
  shared.options = &options;
  shared.request = &request;
  const Clock::time_point start = Clock::now();
  shared.measure_start = start + absl::ToChronoNanoseconds(options.warmup);
  shared.measure_end = shared.measure_start + absl::ToChronoNanoseconds(options.duration);

  std::vector<std::unique_ptr<Caller>> callers;
  for (int i = 0; i < options.concurrency; ++i) {
    callers.push_back(std::make_unique<Caller>(&shared, stubs[i % stubs.size()].get()));
  }
  {
    absl::MutexLock lock(&shared.mutex);
    shared.running = options.concurrency;
  }
  for (auto& caller : callers) caller->Issue();

  bool measuring = false;
  while (true) {
    {
      absl::MutexLock lock(&shared.mutex);
      if (shared.mutex.AwaitWithTimeout(
              absl::Condition(
                  +[](int* running) { return *running == 0; }, &shared.running),
              absl::Milliseconds(100))) {
        break;
      }
    }
    if (!measuring && Clock::now() >= shared.measure_start) {
      measuring = true;
      hooks->MeasureStart();
    }
    hooks->Tick();
  }
  if (!measuring) hooks->MeasureStart();

  LoadResult result;
  {
    absl::MutexLock lock(&shared.mutex);
    result.calls = shared.calls;
    result.errors = shared.errors;
  }
  for (auto& caller : callers) {
    auto& l = caller->latencies();
    result.latencies_ns.insert(result.latencies_ns.end(), l.begin(), l.end());
  }
  std::sort(result.latencies_ns.begin(), result.latencies_ns.end());
  result.measured = static_cast<int64_t>(result.latencies_ns.size());
  result.seconds = absl::ToDoubleSeconds(options.duration);
  return result;
}

}  // namespace load_test
}  // namespace habitat
