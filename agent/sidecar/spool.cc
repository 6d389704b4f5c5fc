#include "agent/sidecar/spool.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "common/file_io.h"
#include "common/status_macros.h"
#include "core/trace/trace_id.h"
#include "google/protobuf/util/json_util.h"

namespace habitat::agent {
namespace {

constexpr char kLockFile[] = ".habitat-agent.lock";

void LogToStderr(const std::string& line) {
  const std::string time =
      absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::Now(), absl::UTCTimeZone());
  std::fprintf(stderr, "%s habitat-agent: %s\n", time.c_str(), line.c_str());
}

std::string Seconds(absl::Duration d) {
  return absl::FormatDuration(absl::Trunc(d, absl::Milliseconds(1)));
}

// Temporary files of an interrupted receipt write (spool_files.cc names
// them NAME.done.<pid>.tmp): nothing refers to them.
void RemoveStaleTemporaries(const std::string& dir) {
  DIR* handle = ::opendir(dir.c_str());
  if (handle == nullptr) return;
  while (const dirent* entry = ::readdir(handle)) {
    const absl::string_view name = entry->d_name;
    if (absl::StrContains(name, absl::StrCat(kReceiptSuffix, ".")) &&
        absl::EndsWith(name, ".tmp")) {
      ::unlinkat(::dirfd(handle), entry->d_name, 0);
    }
  }
  ::closedir(handle);
}

}  // namespace

absl::StatusOr<std::unique_ptr<SpoolUploader>> SpoolUploader::Create(SpoolOptions options,
                                                                     ClientFactory connect) {
  if (!connect) return absl::InvalidArgumentError("SpoolUploader needs a client factory");
  if (options.spool_dir.empty()) return absl::InvalidArgumentError("--spool_dir is empty");
  if (options.poll_interval <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("poll interval must be positive");
  }
  if (options.backoff.initial <= absl::ZeroDuration() ||
      options.backoff.max < options.backoff.initial) {
    return absl::InvalidArgumentError(absl::StrCat("backoff needs 0 < initial <= max; got initial ",
                                                   Seconds(options.backoff.initial), ", max ",
                                                   Seconds(options.backoff.max)));
  }
  const std::string& dir = options.spool_dir;
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return absl::UnavailableError(
        absl::StrCat("cannot create spool directory '", dir, "': ", std::strerror(errno)));
  }
  struct stat info;
  if (::stat(dir.c_str(), &info) != 0 || !S_ISDIR(info.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat("spool '", dir, "' is not a directory"));
  }
  const std::string rejected = absl::StrCat(dir, "/", kRejectedDir);
  if (::mkdir(rejected.c_str(), 0755) != 0 && errno != EEXIST) {
    return absl::UnavailableError(
        absl::StrCat("cannot create '", rejected, "': ", std::strerror(errno)));
  }
  // Two uploaders on one spool would race on renames and receipts.
  const std::string lock_path = absl::StrCat(dir, "/", kLockFile);
  const int lock_fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock_fd < 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot open '", lock_path, "': ", std::strerror(errno)));
  }
  if (::flock(lock_fd, LOCK_EX | LOCK_NB) != 0) {
    ::close(lock_fd);
    return absl::FailedPreconditionError(absl::StrCat("another habitat-agent is shipping spool '",
                                                      dir, "' (", lock_path, " is locked)"));
  }
  auto client = connect();
  if (!client.ok()) {
    ::close(lock_fd);
    return client.status();
  }
  RemoveStaleTemporaries(dir);
  if (!options.log) options.log = LogToStderr;
  return std::unique_ptr<SpoolUploader>(
      new SpoolUploader(std::move(options), std::move(connect), std::move(*client), lock_fd));
}

SpoolUploader::SpoolUploader(SpoolOptions options, ClientFactory connect,
                             std::unique_ptr<PredictionClient> client, int lock_fd)
    : options_(std::move(options)),
      connect_(std::move(connect)),
      client_(std::move(client)),
      lock_fd_(lock_fd) {}

SpoolUploader::~SpoolUploader() { ::close(lock_fd_); }

void SpoolUploader::Log(const std::string& line) { options_.log(line); }

bool SpoolUploader::stopping() const {
  absl::MutexLock lock(&mutex_);
  return stop_;
}

void SpoolUploader::Stop() {
  absl::MutexLock lock(&mutex_);
  stop_ = true;
}

SpoolStats SpoolUploader::stats() const {
  absl::MutexLock lock(&mutex_);
  return stats_;
}

int SpoolUploader::pending() const {
  absl::MutexLock lock(&mutex_);
  return pending_;
}

void SpoolUploader::Run() {
  Log(absl::StrCat("shipping traces from '", options_.spool_dir, "' to ", options_.server_label));
  while (!stopping()) {
    absl::Duration wait = options_.poll_interval;
    const absl::Status status = ProcessOnce();
    if (!status.ok()) {
      // The spool itself is unreadable (volume unmounted?): keep trying.
      if (status.ToString() != last_spool_error_) Log(std::string(status.message()));
      last_spool_error_ = status.ToString();
    } else {
      last_spool_error_.clear();
    }
    wait = std::max(wait, server_next_attempt_ - absl::Now());
    absl::MutexLock lock(&mutex_);
    mutex_.AwaitWithTimeout(absl::Condition(&stop_), wait);
  }
  Log("stopped");
}

absl::Status SpoolUploader::ProcessOnce() {
  if (absl::Now() < server_next_attempt_) return absl::OkStatus();
  HABITAT_ASSIGN_OR_RETURN(std::vector<SpoolEntry> entries, ListSpool(options_.spool_dir));
  // Forget files that went away (uploaded, or removed by someone else).
  std::map<std::string, FileState> live;
  for (const auto& entry : entries) {
    auto it = files_.find(entry.name);
    live[entry.name] = it == files_.end() ? FileState() : std::move(it->second);
  }
  files_ = std::move(live);
  int waiting = static_cast<int>(entries.size());
  {
    absl::MutexLock lock(&mutex_);
    pending_ = waiting;
  }
  for (const auto& entry : entries) {
    if (stopping()) break;
    FileState& state = files_[entry.name];
    if (absl::Now() < state.next_attempt) continue;
    absl::Status server_error;
    const Outcome outcome = ProcessFile(entry, state, server_error);
    if (outcome == Outcome::kServerDown) {
      ServerDown(server_error, waiting);
      return absl::OkStatus();
    }
    if (outcome == Outcome::kDone) {
      files_.erase(entry.name);
      --waiting;
      absl::MutexLock lock(&mutex_);
      pending_ = waiting;
    }
  }
  return absl::OkStatus();
}

void SpoolUploader::ServerDown(const absl::Status& error, int waiting) {
  ++server_failures_;
  client_.reset();
  UpdateStats([](SpoolStats& s) { ++s.transient_failures; });
  const absl::Duration delay = BackoffDelay(options_.backoff, server_failures_, random_);
  server_next_attempt_ = absl::Now() + delay;
  // First failure, then every tenth: an outage is reported, not narrated.
  if (server_failures_ == 1 || server_failures_ % 10 == 0) {
    Log(absl::StrCat("server ", options_.server_label, " is not answering (", error.message(),
                     "); ", waiting, " trace(s) waiting; attempt ", server_failures_, ", next in ",
                     Seconds(delay)));
  }
}

SpoolUploader::Outcome SpoolUploader::ProcessFile(const SpoolEntry& entry, FileState& state,
                                                  absl::Status& server_error) {
  const std::string& name = entry.name;
  const std::string path = absl::StrCat(options_.spool_dir, "/", name);
  // Not even read: gzip never shrinks a trace this much below its content.
  if (static_cast<size_t>(entry.size) > options_.max_upload_bytes + (1 << 20)) {
    return Reject(name, state,
                  absl::StrCat("'", path, "' is ", entry.size, " bytes, more than the largest ",
                               "upload (", options_.max_upload_bytes, " bytes)"));
  }
  auto file = ReadSpoolFile(path);
  if (!file.ok()) {
    if (absl::IsNotFound(file.status())) return Outcome::kDone;
    return RetryFile(name, state, file.status());
  }
  auto trace = ParseSpoolTrace(path, file->bytes, options_.max_upload_bytes);
  if (!trace.ok()) {
    const absl::Time settled = entry.modified + options_.settle_time;
    if (absl::Now() < settled) {
      // Perhaps a writer still copying straight into the spool: looked at
      // again on the next pass (its mtime moves while it is written).
      const std::string note = absl::StrCat(name, " does not parse yet; waiting until it has ",
                                            "not changed for ", Seconds(options_.settle_time));
      if (state.last_logged != note) Log(note);
      state.last_logged = note;
      return Outcome::kRetryLater;
    }
    return Reject(name, state, std::string(trace.status().message()));
  }
  auto local_id = ComputeTraceId(*trace);
  if (!local_id.ok()) {
    return Reject(name, state, absl::StrCat("'", path, "': ", local_id.status().message()));
  }
  if (RecoverFromReceipt(name, *file, *local_id)) return Outcome::kDone;
  if (const size_t size = trace->ByteSizeLong(); size > options_.max_upload_bytes) {
    return Reject(name, state,
                  absl::StrCat("'", path, "' is ", size,
                               " bytes as a message; the largest "
                               "upload is ",
                               options_.max_upload_bytes, " bytes"));
  }

  return Upload(name, path, *file, *std::move(trace), *local_id, state, server_error);
}

SpoolUploader::Outcome SpoolUploader::Upload(const std::string& name, const std::string& path,
                                             const FileContents& file, habitat::v1::Trace trace,
                                             const std::string& local_id, FileState& state,
                                             absl::Status& server_error) {
  habitat::v1::UploadTraceRequest request;
  *request.mutable_trace() = std::move(trace);
  if (client_ == nullptr) {
    auto client = connect_();
    if (!client.ok()) return RetryFile(name, state, client.status());
    client_ = std::move(*client);
  }
  auto ack = client_->UploadTrace(request);
  if (!ack.ok() && ClassifyUploadError(ack.status()) == ErrorClass::kServerDown) {
    server_error = ack.status();
    return Outcome::kServerDown;
  }
  if (server_failures_ > 0) {
    Log(absl::StrCat("server ", options_.server_label, " answers again after ", server_failures_,
                     " failed attempt(s)"));
    server_failures_ = 0;
  }
  if (!ack.ok()) {
    if (ClassifyUploadError(ack.status()) == ErrorClass::kPermanent) {
      return Reject(name, state,
                    absl::StrCat("the server rejected '", path,
                                 "': ", absl::StatusCodeToString(ack.status().code()), ": ",
                                 ack.status().message()));
    }
    // A refused token may have been rotated: the next attempt reconnects,
    // and the connect factory reads the token (and TLS files) afresh.
    if (absl::IsUnauthenticated(ack.status())) client_.reset();
    return RetryFile(name, state, ack.status());
  }
  if (ack->trace_id() != local_id) {
    // Still safe (the receipt keeps the server's id; a recovery then
    // re-uploads instead of trusting it), but worth knowing.
    Log(absl::StrCat("note: server id ", ack->trace_id(), " for ", name,
                     " differs from the local content id ", local_id));
  }
  if (absl::Status status = Acknowledge(name, file, *ack); !status.ok()) {
    return RetryFile(name, state, status);
  }
  UpdateStats([&](SpoolStats& s) {
    ++s.uploaded;
    if (!ack->created()) ++s.already_stored;
  });
  Log(absl::StrCat("uploaded ", name, " as ", ack->trace_id(),
                   ack->created() ? "" : " (already stored)"));
  if (options_.predict) Predict(name, ack->trace_id());
  return Outcome::kDone;
}

bool SpoolUploader::RecoverFromReceipt(const std::string& name, const FileContents& file,
                                       const std::string& trace_id) {
  const std::string receipt_name = absl::StrCat(name, kReceiptSuffix);
  auto text = ReadSpoolFile(absl::StrCat(options_.spool_dir, "/", receipt_name));
  if (!text.ok()) return false;
  auto receipt = ParseReceipt(text->bytes);
  // A receipt for other content means the name was reused: upload.
  if (!receipt.ok() || receipt->trace_id != trace_id) return false;
  if (!IsSameFile(absl::StrCat(options_.spool_dir, "/", name), file)) return false;
  if (!RemoveDurably(options_.spool_dir, name).ok()) return false;
  UpdateStats([](SpoolStats& s) { ++s.recovered; });
  Log(absl::StrCat("deleted ", name, ": already uploaded as ", trace_id, " (receipt ", receipt_name,
                   ")"));
  return true;
}

absl::Status SpoolUploader::Acknowledge(const std::string& name, const FileContents& file,
                                        const habitat::v1::UploadTraceResponse& ack) {
  Receipt receipt;
  receipt.trace_id = ack.trace_id();
  receipt.created = ack.created();
  receipt.uploaded_at = absl::Now();
  receipt.server = options_.server_label;
  HABITAT_RETURN_IF_ERROR(WriteFileAtomically(
      absl::StrCat(options_.spool_dir, "/", name, kReceiptSuffix), FormatReceipt(receipt)));
  const std::string path = absl::StrCat(options_.spool_dir, "/", name);
  if (!IsSameFile(path, file)) {
    // A writer renamed a new trace onto this name while we uploaded; it is
    // picked up (and uploaded, its id differs from the receipt's) next pass.
    return absl::OkStatus();
  }
  return RemoveDurably(options_.spool_dir, name);
}

SpoolUploader::Outcome SpoolUploader::Reject(const std::string& name, FileState& state,
                                             const std::string& reason) {
  const std::string text = absl::StrCat(
      "file: ", name, "\n",
      "rejected_at: ", absl::FormatTime(absl::RFC3339_full, absl::Now(), absl::UTCTimeZone()), "\n",
      "reason: ", reason, "\n",
      "Nothing was uploaded. After fixing the cause, move the file back into the spool.\n");
  auto moved = MoveToRejected(options_.spool_dir, name, text);
  if (!moved.ok()) return RetryFile(name, state, moved.status());
  UpdateStats([](SpoolStats& s) { ++s.rejected; });
  Log(absl::StrCat("rejected ", name, " -> ", *moved, ": ", reason));
  return Outcome::kDone;
}

SpoolUploader::Outcome SpoolUploader::RetryFile(const std::string& name, FileState& state,
                                                const absl::Status& error) {
  ++state.failures;
  UpdateStats([](SpoolStats& s) { ++s.transient_failures; });
  const absl::Duration delay = BackoffDelay(options_.backoff, state.failures, random_);
  state.next_attempt = absl::Now() + delay;
  const std::string message = error.ToString();
  if (state.last_logged != message) {
    Log(absl::StrCat("keeping ", name, " for a retry in ", Seconds(delay), ": ", message));
    state.last_logged = message;
  }
  return Outcome::kRetryLater;
}

void SpoolUploader::Predict(const std::string& name, const std::string& trace_id) {
  habitat::v1::PredictRequest request;
  request.set_trace_id(trace_id);
  for (const auto& device : options_.predict_devices) request.add_devices(device);
  auto response = client_->Predict(request);
  if (!response.ok()) {
    // The trace is stored; predictions can be asked for by id later.
    UpdateStats([](SpoolStats& s) { ++s.prediction_failures; });
    Log(absl::StrCat("prediction for ", name, " (", trace_id,
                     ") failed: ", response.status().ToString()));
    return;
  }
  std::string json;
  google::protobuf::util::JsonPrintOptions print;
  print.add_whitespace = true;
  print.preserve_proto_field_names = true;
  std::vector<std::string> summary;
  for (const auto& prediction : response->predictions()) {
    summary.push_back(absl::StrFormat("%s %.2f ms", prediction.device_id(),
                                      static_cast<double>(prediction.gpu_time_ns()) / 1e6));
  }
  const std::string out_name =
      absl::StrCat(absl::StripSuffix(name, kTraceSuffix), ".prediction.json");
  absl::Status status =
      google::protobuf::util::MessageToJsonString(*response, &json, print).ok()
          ? WriteFileAtomically(absl::StrCat(options_.spool_dir, "/", out_name), json)
          : absl::InternalError("cannot print the prediction as JSON");
  if (!status.ok()) {
    UpdateStats([](SpoolStats& s) { ++s.prediction_failures; });
    Log(absl::StrCat("cannot write ", out_name, ": ", status.message()));
    return;
  }
  UpdateStats([](SpoolStats& s) { ++s.predictions; });
  Log(absl::StrCat("predicted ", name, " -> ", out_name, ": ", absl::StrJoin(summary, ", ")));
}

}  // namespace habitat::agent
