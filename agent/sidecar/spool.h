// The sidecar's spool uploader: ships every complete trace in a spool
// directory to the prediction server with UploadTrace, and deletes it only
// after the server acknowledged it (see spool_files.h for the protocol).
//
// Guarantees:
//  - a trace is deleted only after the server returned its id, and after the
//    receipt NAME.trace.done holding that id is durable;
//  - no trace is stored twice: ids are content addresses, so an upload
//    repeated after a lost acknowledgement returns created=false, which
//    counts as success;
//  - crash between receipt and delete: on the next pass the file's own id
//    is computed; if it equals the receipt's, the file is deleted without a
//    new upload (a different file that reuses the name is uploaded);
//  - files that can never be uploaded (not a trace, truncated, rejected by
//    the server as invalid) go to rejected/ with a .reason file; the rest of
//    the spool carries on;
//  - when the server is unreachable or overloaded, files stay and are
//    retried with exponential backoff and jitter.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/random/random.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "agent/sidecar/spool_files.h"
#include "client/prediction_client.h"
#include "habitat/v1/trace.pb.h"

namespace habitat::agent {

struct BackoffPolicy {
  absl::Duration initial = absl::Milliseconds(250);
  absl::Duration max = absl::Seconds(30);
};

// The wait after `failures` (>= 1) consecutive failures: initial * 2^(n-1),
// capped at max, then a uniformly random point in [d/2, d] so that many
// sidecars that lost the same server do not come back in lockstep.
absl::Duration BackoffDelay(const BackoffPolicy& policy, int failures, absl::BitGen& random);

// How the sidecar treats an UploadTrace error.
enum class ErrorClass {
  // The server cannot take this file now or ever (INVALID_ARGUMENT,
  // NOT_FOUND, OUT_OF_RANGE): reject it.
  kPermanent,
  // The server is not there (UNAVAILABLE, DEADLINE_EXCEEDED): stop the
  // pass and back off as a whole.
  kServerDown,
  // Anything else (RESOURCE_EXHAUSTED, INTERNAL, UNAUTHENTICATED, ...):
  // keep the file, back off for this file only. Unknown codes land here
  // because keeping a file is always safe and deleting it is not.
  kRetryFile,
};
ErrorClass ClassifyUploadError(const absl::Status& status);

inline constexpr size_t kDefaultMaxUploadBytes = 64 << 20;

// Parses the bytes of a spool file (gzip inflated transparently) as a
// habitat.v1.Trace. INVALID_ARGUMENT naming `path` and saying what the file
// looks like instead (empty, JSON, truncated or foreign bytes, or content
// over `max_bytes`: inflation stops there).
absl::StatusOr<habitat::v1::Trace> ParseSpoolTrace(const std::string& path,
                                                   const std::string& bytes,
                                                   size_t max_bytes = kDefaultMaxUploadBytes);

// Makes a client (a fresh gRPC channel) to the server.
using ClientFactory = std::function<absl::StatusOr<std::unique_ptr<PredictionClient>>()>;

struct SpoolOptions {
  std::string spool_dir;
  // Shown in receipts and logs.
  std::string server_label;
  // How often the directory is scanned when nothing is waiting.
  absl::Duration poll_interval = absl::Milliseconds(500);
  BackoffPolicy backoff;
  // A file that does not parse is rejected only when it has not been
  // modified for this long: a writer that copies straight into the spool
  // instead of renaming is given time to finish.
  absl::Duration settle_time = absl::Seconds(10);
  // Largest serialised trace that can be sent (the client's
  // max_message_bytes); larger ones could never be uploaded and are
  // rejected instead of retried forever.
  size_t max_upload_bytes = kDefaultMaxUploadBytes;
  // After each upload, ask for predictions and write NAME.prediction.json.
  bool predict = false;
  // Device ids to predict for; empty: every device the server lists.
  std::vector<std::string> predict_devices;
  // Where log lines go; default: stderr with a timestamp.
  std::function<void(const std::string&)> log;
};

struct SpoolStats {
  // Acknowledged uploads, created=true and created=false.
  int uploaded = 0;
  int already_stored = 0;
  // Files deleted on the strength of a receipt, without a new upload.
  int recovered = 0;
  int rejected = 0;
  // Failed attempts that kept the file (server down or retryable error).
  int transient_failures = 0;
  int predictions = 0;
  int prediction_failures = 0;
};

class SpoolUploader {
 public:
  // Takes an exclusive lock on the spool (FAILED_PRECONDITION if another
  // uploader holds it). `connect` is called once here (its error is
  // returned) and again after each outage: a fresh channel connects at
  // once, where the old one would wait out gRPC's own reconnect backoff
  // (1 s growing to 120 s), which would override the sidecar's.
  static absl::StatusOr<std::unique_ptr<SpoolUploader>> Create(SpoolOptions options,
                                                               ClientFactory connect);
  ~SpoolUploader();

  // One pass: every file that is due, oldest first, until the server turns
  // out to be down or Stop() is called. An error only when the spool itself
  // cannot be listed. ProcessOnce and Run are for one thread; Stop, stats
  // and pending may be called from any.
  absl::Status ProcessOnce();
  // Passes until Stop(); an upload in progress is finished first.
  void Run();
  // Thread-safe; wakes Run() from its wait.
  void Stop();

  SpoolStats stats() const;
  // Files in the spool that are waiting (for tests and the status line).
  int pending() const;

 private:
  struct FileState {
    int failures = 0;
    absl::Time next_attempt = absl::InfinitePast();
    // The last error logged for this file, so repeats are not logged.
    std::string last_logged;
  };
  enum class Outcome { kDone, kRetryLater, kServerDown };

  SpoolUploader(SpoolOptions options, ClientFactory connect,
                std::unique_ptr<PredictionClient> client, int lock_fd);

  Outcome ProcessFile(const SpoolEntry& entry, FileState& state, absl::Status& server_error);
  // ProcessFile's second half: sends a parsed trace of content id `local_id`
  // and acknowledges the server's answer.
  Outcome Upload(const std::string& name, const std::string& path, const FileContents& file,
                 habitat::v1::Trace trace, const std::string& local_id, FileState& state,
                 absl::Status& server_error);
  Outcome Reject(const std::string& name, FileState& state, const std::string& reason);
  Outcome RetryFile(const std::string& name, FileState& state, const absl::Status& error);
  // Receipt, then delete: the order that makes a crash in between harmless.
  absl::Status Acknowledge(const std::string& name, const FileContents& file,
                           const habitat::v1::UploadTraceResponse& ack);
  // Deletes a file whose receipt matches its content id; false if no
  // matching receipt exists.
  bool RecoverFromReceipt(const std::string& name, const FileContents& file,
                          const std::string& trace_id);
  void Predict(const std::string& name, const std::string& trace_id);
  void ServerDown(const absl::Status& error, int waiting);
  bool stopping() const;
  void Log(const std::string& line);
  template <typename F>
  void UpdateStats(F&& update) {
    absl::MutexLock lock(&mutex_);
    update(stats_);
  }

  const SpoolOptions options_;
  const ClientFactory connect_;
  // Null after an outage until the next attempt reconnects.
  std::unique_ptr<PredictionClient> client_;
  const int lock_fd_;
  absl::BitGen random_;

  std::map<std::string, FileState> files_;
  int server_failures_ = 0;
  absl::Time server_next_attempt_ = absl::InfinitePast();
  std::string last_spool_error_;

  mutable absl::Mutex mutex_;
  bool stop_ ABSL_GUARDED_BY(mutex_) = false;
  SpoolStats stats_ ABSL_GUARDED_BY(mutex_);
  int pending_ ABSL_GUARDED_BY(mutex_) = 0;
};

}  // namespace habitat::agent
