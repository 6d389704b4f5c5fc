// Shared by the sidecar tests: real fixture traces written into a spool the
// way the tracker writes them, temporary directories, free ports.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "habitat/v1/trace.pb.h"

namespace habitat::agent::testing {

// The H100 Kineto fixtures (tests/testdata/kineto/h100, captured on a real
// H100) imported with the batch size and precision their names carry; the
// first `count` in name order (at most 20).
absl::StatusOr<std::vector<habitat::v1::Trace>> LoadFixtureTraces(int count);

// `count` distinct traces made from the fixtures: copy k of fixture i is the
// real trace with metadata["spool_test_copy"] = k, so each has its own
// content id while every timing stays a measured one.
absl::StatusOr<std::vector<habitat::v1::Trace>> DistinctTraces(int fixtures, int count);

// NAME.trace.tmp, then rename to NAME.trace: the writer side of the protocol.
// gzip: compress the serialised trace.
void WriteSpoolTrace(const std::string& dir, const std::string& name,
                     const habitat::v1::Trace& trace, bool gzip);
// Raw bytes under `name` through the same tmp-and-rename.
void WriteSpoolBytes(const std::string& dir, const std::string& name, const std::string& bytes);

// A fresh directory under TEST_TMPDIR or /tmp; removed (recursively) on
// destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string Sub(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// File names in `dir` ending in `suffix`, sorted; empty if `dir` is missing.
std::vector<std::string> FilesWithSuffix(const std::string& dir, const std::string& suffix);

// A loopback port nothing listens on (bound, read, closed).
int UnusedPort();

// ComputeTraceId, or a test failure.
std::string IdOf(const habitat::v1::Trace& trace);

// A child process (fork + execv) with stdout and stderr in files. Killed
// with SIGKILL on destruction if still running.
class ChildProcess {
 public:
  ChildProcess(const std::vector<std::string>& args, const std::string& stdout_path,
               const std::string& stderr_path);
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  bool Signal(int signal) const;
  // The wait status, or -1 if it did not exit within `timeout`.
  int Wait(absl::Duration timeout);
  // Polls the stderr file until it contains `needle`; its contents.
  std::string WaitForStderr(const std::string& needle, absl::Duration timeout) const;
  std::string Stdout() const;
  std::string Stderr() const;

 private:
  pid_t pid_ = -1;
  bool reaped_ = false;
  std::string stdout_path_, stderr_path_;
};

std::string ReadWholeFile(const std::string& path);

}  // namespace habitat::agent::testing
