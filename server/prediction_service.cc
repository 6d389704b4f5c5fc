#include "server/prediction_service.h"

#include <chrono>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/grpc/grpc_status.h"
#include "common/status_macros.h"

namespace habitat {
namespace {

// Error messages may quote request fields (ids, device names); a hostile
// request must not turn them into megabyte-sized trailers, which clients
// reject as oversized metadata.
constexpr size_t kMaxStatusMessageBytes = 1024;

std::string BoundedMessage(absl::string_view message) {
  if (message.size() <= kMaxStatusMessageBytes) return std::string(message);
  size_t cut = kMaxStatusMessageBytes;
  // Do not split a UTF-8 sequence: back up over continuation bytes.
  while (cut > 0 && (static_cast<unsigned char>(message[cut]) & 0xC0) == 0x80) --cut;
  return absl::StrCat(message.substr(0, cut), "... (", message.size() - cut, " more bytes)");
}

// The backend reports errors as statuses; this is the last line of defence
// so that nothing a request does can take the server down.
template <typename Fn>
auto Guarded(Fn&& fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("internal error: ", e.what()));
  } catch (...) {
    return absl::InternalError("internal error");
  }
}

template <typename Message>
absl::Status ParseRequest(const grpc::ByteBuffer& bytes, Message* message) {
  grpc::ByteBuffer copy(bytes);  // shares the slices; Deserialize consumes its input
  if (!grpc::SerializationTraits<Message>::Deserialize(&copy, message).ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the request is not a valid ", Message::descriptor()->full_name(),
                     " (truncated, not protobuf, or a string field that is not UTF-8)"));
  }
  return absl::OkStatus();
}

// A request with the memory it reserved; the message is destroyed first,
// so the reservation's release finds its memory already freed.
template <typename Message>
struct Parsed {
  std::unique_ptr<RequestMemory::Reservation> reservation;
  Message message;
};

// Reserves what parsing `bytes` takes before parsing them.
template <typename Message>
absl::Status ParseWithin(RequestMemory& memory, const grpc::ByteBuffer& bytes,
                         Parsed<Message>* parsed) {
  HABITAT_ASSIGN_OR_RETURN(parsed->reservation,
                           memory.ReserveToParse(*Message::descriptor(), bytes));
  return ParseRequest(bytes, &parsed->message);
}

template <typename Message>
absl::Status SerializeResponse(const Message& message, grpc::ByteBuffer* bytes) {
  bool own_buffer = false;
  grpc::Status status = grpc::SerializationTraits<Message>::Serialize(message, bytes, &own_buffer);
  if (!status.ok()) {
    return absl::InternalError(
        absl::StrCat("cannot serialise the response: ", status.error_message()));
  }
  return absl::OkStatus();
}

// `answer`'s bytes as the response, without copying them: the slice holds
// a reference to the cached string until gRPC has sent it.
void SetAnswer(std::shared_ptr<const std::string> answer, grpc::ByteBuffer* bytes) {
  auto* held = new std::shared_ptr<const std::string>(std::move(answer));
  grpc::Slice slice(
      const_cast<char*>((*held)->data()), (*held)->size(),
      [](void* p) { delete static_cast<std::shared_ptr<const std::string>*>(p); }, held);
  grpc::ByteBuffer buffer(&slice, 1);
  bytes->Swap(&buffer);
}

absl::Time ClientDeadline(const grpc::CallbackServerContext& context) {
  const auto deadline = context.deadline();
  if (deadline == std::chrono::system_clock::time_point::max()) return absl::InfiniteFuture();
  return absl::FromChrono(deadline);
}

// The status the client sees: once its deadline has passed, gRPC answers it
// DEADLINE_EXCEEDED whatever the handler sends, so that is what is counted.
absl::StatusCode CodeTheClientSees(const grpc::CallbackServerContext& context, absl::Time now,
                                   absl::StatusCode sent) {
  return now >= ClientDeadline(context) ? absl::StatusCode::kDeadlineExceeded : sent;
}

}  // namespace

class PredictionServiceImpl::Slot {
 public:
  Slot(std::atomic<int>* in_flight, int limit, ServerMetrics* metrics)
      : in_flight_(in_flight), metrics_(metrics) {
    const int now = in_flight_->fetch_add(1, std::memory_order_relaxed) + 1;
    admitted_ = limit <= 0 || now <= limit;
    metrics_->AddInFlight(1);
  }
  ~Slot() {
    in_flight_->fetch_sub(1, std::memory_order_relaxed);
    metrics_->AddInFlight(-1);
  }
  Slot(const Slot&) = delete;
  Slot& operator=(const Slot&) = delete;

  bool admitted() const { return admitted_; }

 private:
  std::atomic<int>* in_flight_;
  ServerMetrics* metrics_;
  bool admitted_ = false;
};

absl::StatusOr<RequestContext> PredictionServiceImpl::Admit(grpc::CallbackServerContext* context,
                                                            absl::Time started, const Slot& slot) {
  if (!slot.admitted()) {
    return absl::ResourceExhaustedError(
        absl::StrCat("server busy: ", limits_.max_concurrent_rpcs,
                     " concurrent RPCs (limit --max_concurrent_rpcs); retry with backoff"));
  }
  RequestContext request_context;
  if (authenticator_ != nullptr) {
    auto tenant = authenticator_->Authenticate(context->client_metadata());
    if (!tenant.ok()) return tenant.status();
    request_context.tenant = std::move(*tenant);
  }
  request_context.deadline = ClientDeadline(*context);
  request_context.deadline_source = "the client's deadline";
  request_context.cancelled = [context, this] {
    return context->IsCancelled() || absl::GetCurrentTimeNanos() >= stop_work_at_ns_.load();
  };
  if (limits_.max_request_time > absl::ZeroDuration() &&
      started + limits_.max_request_time < request_context.deadline) {
    request_context.deadline = started + limits_.max_request_time;
    request_context.deadline_source =
        absl::StrCat("the server's per-request limit of ",
                     absl::FormatDuration(limits_.max_request_time), " (--max_request_seconds)");
  }
  return request_context;
}

grpc::ServerUnaryReactor* PredictionServiceImpl::Finish(grpc::CallbackServerContext* context,
                                                        grpc::ServerUnaryReactor* reactor, Rpc rpc,
                                                        absl::Time started,
                                                        const absl::Status& status) {
  const absl::Time now = absl::Now();
  metrics_->RecordRequest(rpc, CodeTheClientSees(*context, now, status.code()),
                          absl::ToDoubleSeconds(now - started));
  reactor->Finish(ToGrpcStatus(
      status.ok() ? status : absl::Status(status.code(), BoundedMessage(status.message()))));
  return reactor;
}

grpc::ServerUnaryReactor* PredictionServiceImpl::AdmitAndQueue(
    grpc::CallbackServerContext* context, Rpc rpc, AnswerHere answer_here,
    absl::AnyInvocable<absl::Status(const RequestContext&) &&> compute) {
  const absl::Time started = absl::Now();
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  auto slot = std::make_unique<Slot>(&in_flight_, limits_.max_concurrent_rpcs, metrics_);
  auto admitted = Admit(context, started, *slot);
  if (!admitted.ok()) return Finish(context, reactor, rpc, started, admitted.status());
  std::optional<absl::Status> answered =
      Guarded([&]() -> std::optional<absl::Status> { return answer_here(*admitted); });
  if (answered.has_value()) {
    slot.reset();
    return Finish(context, reactor, rpc, started, *answered);
  }
  metrics_->AddQueued(1);
  std::string tenant = admitted->tenant;
  work_->Submit(std::move(tenant), [this, context, reactor, rpc, started, slot = std::move(slot),
                                    request_context = *std::move(admitted),
                                    compute = std::move(compute)]() mutable {
    metrics_->AddQueued(-1);
    const absl::Status status =
        Guarded([&]() -> absl::Status { return std::move(compute)(request_context); });
    // Free the slot before answering: a client that calls again as soon as
    // it has its answer must not find it still taken.
    slot.reset();
    Finish(context, reactor, rpc, started, status);
  });
  return reactor;
}

grpc::ServerUnaryReactor* PredictionServiceImpl::Predict(grpc::CallbackServerContext* context,
                                                         const grpc::ByteBuffer* request,
                                                         grpc::ByteBuffer* response) {
  auto parsed = std::make_shared<Parsed<v1::PredictRequest>>();
  // A request answered before is answered here, on gRPC's thread, where the
  // store answers locally: a lookup costs less than the hop to a work
  // thread and back (docs/benchmarks.md, "Warm path"). The call still took
  // a slot, so admission sheds as before.
  auto answer_here = [this, request, response,
                      parsed](const RequestContext& admitted) -> std::optional<absl::Status> {
    // Garbage is refused here too; the queued work then has the request.
    absl::Status parse = ParseWithin(memory_, *request, parsed.get());
    if (!parse.ok()) return parse;
    CachedAnswer answer = backend_->LookUpAnswer(parsed->message, admitted);
    if (answer.bytes == nullptr) return std::nullopt;
    metrics_->RecordCache(answer.predictions, 0, backend_->cache().bytes());
    SetAnswer(std::move(answer.bytes), response);
    return absl::OkStatus();
  };
  return AdmitAndQueue(
      context, Rpc::kPredict, answer_here,
      [this, response, parsed](const RequestContext& admitted) {
        PredictionStats stats;
        absl::Status status = [&]() -> absl::Status {
          HABITAT_ASSIGN_OR_RETURN(CachedAnswer answer,
                                   backend_->PredictSerialized(parsed->message, admitted, &stats));
          SetAnswer(std::move(answer.bytes), response);
          return absl::OkStatus();
        }();
        metrics_->RecordCache(stats.cache_hits, stats.cache_misses, backend_->cache().bytes());
        for (const auto& device : stats.operations_by_device) {
          metrics_->RecordPredictions(device.device_id, device.by_method);
        }
        return status;
      });
}

grpc::ServerUnaryReactor* PredictionServiceImpl::UploadTrace(grpc::CallbackServerContext* context,
                                                             const grpc::ByteBuffer* request,
                                                             grpc::ByteBuffer* response) {
  return AdmitAndQueue(
      context, Rpc::kUploadTrace, [](const RequestContext&) { return std::nullopt; },
      [this, request, response](const RequestContext& admitted) {
        Parsed<v1::UploadTraceRequest> parsed;
        HABITAT_RETURN_IF_ERROR(ParseWithin(memory_, *request, &parsed));
        HABITAT_ASSIGN_OR_RETURN(v1::UploadTraceResponse result,
                                 backend_->UploadTrace(parsed.message, admitted));
        HABITAT_RETURN_IF_ERROR(SerializeResponse(result, response));
        if (result.created()) {
          metrics_->SetStoredTraces(static_cast<double>(backend_->stored_traces()));
        }
        return absl::OkStatus();
      });
}

grpc::ServerUnaryReactor* PredictionServiceImpl::ListDevices(grpc::CallbackServerContext* context,
                                                             const grpc::ByteBuffer* request,
                                                             grpc::ByteBuffer* response) {
  const absl::Time started = absl::Now();
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  Slot slot(&in_flight_, limits_.max_concurrent_rpcs, metrics_);
  auto admitted = Admit(context, started, slot);
  if (!admitted.ok()) {
    return Finish(context, reactor, Rpc::kListDevices, started, admitted.status());
  }
  const absl::Status status = Guarded([&]() -> absl::Status {
    v1::ListDevicesRequest parsed;
    HABITAT_RETURN_IF_ERROR(ParseRequest(*request, &parsed));
    return SerializeResponse(backend_->ListDevices(parsed), response);
  });
  return Finish(context, reactor, Rpc::kListDevices, started, status);
}

grpc::ServerUnaryReactor* PredictionServiceImpl::ListCatalogs(grpc::CallbackServerContext* context,
                                                              const grpc::ByteBuffer* request,
                                                              grpc::ByteBuffer* response) {
  const absl::Time started = absl::Now();
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  Slot slot(&in_flight_, limits_.max_concurrent_rpcs, metrics_);
  auto admitted = Admit(context, started, slot);
  if (!admitted.ok()) {
    return Finish(context, reactor, Rpc::kListCatalogs, started, admitted.status());
  }
  const absl::Status status = Guarded([&]() -> absl::Status {
    v1::ListCatalogsRequest parsed;
    HABITAT_RETURN_IF_ERROR(ParseRequest(*request, &parsed));
    return SerializeResponse(backend_->ListCatalogs(), response);
  });
  return Finish(context, reactor, Rpc::kListCatalogs, started, status);
}

}  // namespace habitat
