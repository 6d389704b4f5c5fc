// The gRPC frontend of PredictionBackend: one small handler per RPC on the
// callback API. Each call is admitted (concurrency limit, bearer token,
// deadline cap) before the backend sees it; the handlers record metrics and
// convert statuses; all prediction logic is in the backend.
//
// Every method takes raw bytes and parses them here: gRPC 1.51's
// callback server answers an unparsable request with UNIMPLEMENTED and no
// message, which sends callers looking for a missing method. Parsing here
// gives INVALID_ARGUMENT saying the bytes are not a valid request.
#pragma once

#include <atomic>
#include <cstdint>
#include <limits>
#include <optional>

#include "absl/functional/any_invocable.h"
#include "absl/functional/function_ref.h"
#include "absl/time/time.h"
#include "core/backend/prediction_backend.h"
#include "habitat/v1/prediction_service.grpc.pb.h"
#include "server/request_memory.h"
#include "server/server_metrics.h"
#include "server/token_auth.h"
#include "server/work_queue.h"

namespace habitat {

struct ServiceLimits {
  // RPCs being handled at once; more get RESOURCE_EXHAUSTED. 0: no limit.
  int max_concurrent_rpcs = 0;
  // Cap on one request's handling time, on top of the client's deadline.
  // Zero: only the client's deadline applies.
  absl::Duration max_request_time = absl::ZeroDuration();
  // Memory the Predict and UploadTrace requests in flight may take once
  // parsed, all together (RequestMemory); 0: no limit.
  int64_t request_memory_bytes = 0;
  // Requests estimated at this much or more return freed memory to the
  // system when done.
  int64_t trim_above_bytes = int64_t{16} << 20;
};

using PredictionServiceBase = habitat::v1::PredictionService::WithRawCallbackMethod_Predict<
    habitat::v1::PredictionService::WithRawCallbackMethod_UploadTrace<
        habitat::v1::PredictionService::WithRawCallbackMethod_ListDevices<
            habitat::v1::PredictionService::WithRawCallbackMethod_ListCatalogs<
                habitat::v1::PredictionService::Service>>>>;

class PredictionServiceImpl final : public PredictionServiceBase {
 public:
  // All must outlive the service. Predict and UploadTrace compute on `work`.
  PredictionServiceImpl(PredictionBackend* backend, ServerMetrics* metrics,
                        const Authenticator* authenticator, WorkQueue* work, ServiceLimits limits)
      : backend_(backend),
        metrics_(metrics),
        authenticator_(authenticator),
        work_(work),
        limits_(limits) {}

  // Bytes of a PredictRequest in, of a PredictResponse out.
  grpc::ServerUnaryReactor* Predict(grpc::CallbackServerContext* context,
                                    const grpc::ByteBuffer* request,
                                    grpc::ByteBuffer* response) override;
  // Bytes of an UploadTraceRequest in, of an UploadTraceResponse out.
  grpc::ServerUnaryReactor* UploadTrace(grpc::CallbackServerContext* context,
                                        const grpc::ByteBuffer* request,
                                        grpc::ByteBuffer* response) override;
  // Raw too, so that garbage gets INVALID_ARGUMENT with a message (they are
  // cheap: answered on gRPC's thread, not queued).
  grpc::ServerUnaryReactor* ListDevices(grpc::CallbackServerContext* context,
                                        const grpc::ByteBuffer* request,
                                        grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* ListCatalogs(grpc::CallbackServerContext* context,
                                         const grpc::ByteBuffer* request,
                                         grpc::ByteBuffer* response) override;

  // Calls still working at `when` stop with CANCELLED: the end of the
  // shutdown grace. gRPC cancels them then too, but a handler computing on
  // its thread only notices when it looks.
  void StopWorkAt(absl::Time when) { stop_work_at_ns_ = absl::ToUnixNanos(when); }

 private:
  // Holds one of the max_concurrent_rpcs slots while a handler runs.
  class Slot;

  // The request context of an admitted call, or the status to refuse it with.
  absl::StatusOr<RequestContext> Admit(grpc::CallbackServerContext* context, absl::Time started,
                                       const Slot& slot);
  // Records the call and finishes `reactor` (the context's DefaultReactor,
  // taken once per call).
  grpc::ServerUnaryReactor* Finish(grpc::CallbackServerContext* context,
                                   grpc::ServerUnaryReactor* reactor, Rpc rpc, absl::Time started,
                                   const absl::Status& status);
  // The call's status when it can be answered at once, without computing
  // (a cached answer); nullopt to queue it.
  using AnswerHere = absl::FunctionRef<std::optional<absl::Status>(const RequestContext&)>;
  // Admits the call here, on gRPC's thread, and answers it with
  // `answer_here` when that can; else runs `compute` (the
  // call's status) on the work queue, holding its slot until it finishes.
  grpc::ServerUnaryReactor* AdmitAndQueue(
      grpc::CallbackServerContext* context, Rpc rpc, AnswerHere answer_here,
      absl::AnyInvocable<absl::Status(const RequestContext&) &&> compute);

  PredictionBackend* backend_;
  ServerMetrics* metrics_;
  const Authenticator* authenticator_;
  WorkQueue* work_;
  const ServiceLimits limits_;
  RequestMemory memory_{limits_.request_memory_bytes, limits_.trim_above_bytes};
  std::atomic<int> in_flight_{0};
  std::atomic<int64_t> stop_work_at_ns_{std::numeric_limits<int64_t>::max()};
};

}  // namespace habitat
