#include "agent/sidecar/spool_test_support.h"

#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/child_process.h"
#include "common/file_io.h"
#include "common/status_macros.h"
#include "core/kineto/kineto_import.h"
#include "core/trace/trace_id.h"
#include "gtest/gtest.h"

#ifndef HABITAT_TESTDATA_DIR
#error "HABITAT_TESTDATA_DIR must be defined"
#endif

namespace habitat::agent::testing {
namespace {

// <model>_b<batch>_<precision>.json.gz; the model name may hold '_'.
absl::StatusOr<v1::Trace> ImportFixture(const std::string& dir, const std::string& file) {
  std::string stem = file.substr(0, file.size() - std::string(".json.gz").size());
  const size_t precision_at = stem.rfind('_');
  const size_t batch_at = stem.rfind("_b", precision_at - 1);
  KinetoImportOptions options;
  options.model_name = stem.substr(0, batch_at);
  if (!absl::SimpleAtoi(stem.substr(batch_at + 2, precision_at - batch_at - 2),
                        &options.batch_size)) {
    return absl::InvalidArgumentError(absl::StrCat(file, ": no batch size in the name"));
  }
  const std::string precision = stem.substr(precision_at + 1);
  // The capture's "bf16" runs are autocast.
  options.precision = precision == "bf16" ? v1::PRECISION_AMP_BF16 : v1::PRECISION_FP32;
  HABITAT_ASSIGN_OR_RETURN(std::string json, ReadFile(absl::StrCat(dir, "/", file)));
  return ImportKinetoTrace(json, options);
}

}  // namespace

absl::StatusOr<std::vector<v1::Trace>> LoadFixtureTraces(int count) {
  const std::string dir = absl::StrCat(HABITAT_TESTDATA_DIR, "/kineto/h100");
  std::vector<std::string> files = FilesWithSuffix(dir, ".json.gz");
  if (static_cast<int>(files.size()) < count) {
    return absl::NotFoundError(absl::StrCat("only ", files.size(), " fixtures in ", dir));
  }
  std::vector<v1::Trace> traces;
  for (int i = 0; i < count; ++i) {
    HABITAT_ASSIGN_OR_RETURN(v1::Trace trace, ImportFixture(dir, files[i]));
    traces.push_back(std::move(trace));
  }
  return traces;
}

absl::StatusOr<std::vector<v1::Trace>> DistinctTraces(int fixtures, int count) {
  HABITAT_ASSIGN_OR_RETURN(std::vector<v1::Trace> base, LoadFixtureTraces(fixtures));
  std::vector<v1::Trace> traces;
  for (int k = 0; static_cast<int>(traces.size()) < count; ++k) {
    for (const auto& trace : base) {
      if (static_cast<int>(traces.size()) == count) break;
      traces.push_back(trace);
      (*traces.back().mutable_metadata())["spool_test_copy"] = absl::StrCat(k);
    }
  }
  return traces;
}

void WriteSpoolBytes(const std::string& dir, const std::string& name, const std::string& bytes) {
  const std::string tmp = absl::StrCat(dir, "/", name, ".tmp");
  {
    std::ofstream out(tmp, std::ios::binary);
    out << bytes;
    ASSERT_TRUE(out.good()) << tmp;
  }
  ASSERT_EQ(std::rename(tmp.c_str(), absl::StrCat(dir, "/", name).c_str()), 0) << name;
}

void WriteSpoolTrace(const std::string& dir, const std::string& name, const v1::Trace& trace,
                     bool gzip) {
  std::string bytes;
  ASSERT_TRUE(trace.SerializeToString(&bytes));
  if (gzip) {
    auto compressed = Gzip(bytes);
    ASSERT_TRUE(compressed.ok()) << compressed.status();
    bytes = std::move(*compressed);
  }
  WriteSpoolBytes(dir, name, bytes);
}

TempDir::TempDir() {
  const char* root = std::getenv("TEST_TMPDIR");
  std::string pattern = absl::StrCat(root != nullptr ? root : "/tmp", "/habitat-spool-XXXXXX");
  if (::mkdtemp(pattern.data()) == nullptr) {
    ADD_FAILURE() << "mkdtemp " << pattern;
  }
  path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

std::vector<std::string> FilesWithSuffix(const std::string& dir, const std::string& suffix) {
  std::vector<std::string> names;
  if (DIR* handle = ::opendir(dir.c_str())) {
    while (const dirent* entry = ::readdir(handle)) {
      if (absl::EndsWith(entry->d_name, suffix)) names.push_back(entry->d_name);
    }
    ::closedir(handle);
  }
  std::sort(names.begin(), names.end());
  return names;
}

int UnusedPort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

std::string IdOf(const v1::Trace& trace) {
  auto id = ComputeTraceId(trace);
  EXPECT_TRUE(id.ok()) << id.status();
  return id.ok() ? *id : "";
}

ChildProcess::ChildProcess(const std::vector<std::string>& args, const std::string& stdout_path,
                           const std::string& stderr_path)
    : stdout_path_(stdout_path), stderr_path_(stderr_path) {
  ChildOptions options;
  options.stdout_path = stdout_path;
  options.stderr_path = stderr_path;
  absl::StatusOr<pid_t> pid = StartChild(args, options);
  EXPECT_TRUE(pid.ok()) << pid.status();
  pid_ = pid.value_or(-1);
}

ChildProcess::~ChildProcess() {
  if (pid_ > 0 && !reaped_) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
}

bool ChildProcess::Signal(int signal) const { return pid_ > 0 && ::kill(pid_, signal) == 0; }

int ChildProcess::Wait(absl::Duration timeout) {
  const absl::Time end = absl::Now() + timeout;
  while (pid_ > 0 && !reaped_) {
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      reaped_ = true;
      return status;
    }
    if (absl::Now() >= end) return -1;
    absl::SleepFor(absl::Milliseconds(5));
  }
  return -1;
}

std::string ChildProcess::WaitForStderr(const std::string& needle, absl::Duration timeout) const {
  const absl::Time end = absl::Now() + timeout;
  std::string text = Stderr();
  while (!absl::StrContains(text, needle) && absl::Now() < end) {
    absl::SleepFor(absl::Milliseconds(5));
    text = Stderr();
  }
  return text;
}

std::string ChildProcess::Stdout() const { return ReadWholeFile(stdout_path_); }
std::string ChildProcess::Stderr() const { return ReadWholeFile(stderr_path_); }

std::string ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace habitat::agent::testing
