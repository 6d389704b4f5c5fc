#include "tools/load_test/server_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <regex>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/child_process.h"

namespace habitat {
namespace load_test {

absl::StatusOr<MemorySample> ReadMemory(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/status"));
  if (!in) return absl::NotFoundError(absl::StrCat("no /proc/", pid, "/status"));
  MemorySample sample;
  std::string line;
  bool found = false;
  while (std::getline(in, line)) {
    // Lines look like "VmRSS:\t  123456 kB".
    int64_t* field = nullptr;
    if (line.rfind("VmRSS:", 0) == 0) field = &sample.rss_kib;
    if (line.rfind("VmHWM:", 0) == 0) field = &sample.peak_rss_kib;
    if (field == nullptr) continue;
    std::istringstream value(line.substr(6));
    value >> *field;
    found = true;
  }
  if (!found) return absl::NotFoundError(absl::StrCat("/proc/", pid, "/status has no VmRSS"));
  return sample;
}

absl::StatusOr<double> ReadCpuSeconds(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  std::string stat;
  if (!in || !std::getline(in, stat)) {
    return absl::NotFoundError(absl::StrCat("no /proc/", pid, "/stat"));
  }
  // Fields after the parenthesised command name (which may hold spaces):
  // state is field 3, utime 14 and stime 15 (proc(5)).
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return absl::InternalError("unexpected /proc/PID/stat");
  std::istringstream fields(stat.substr(close + 2));
  std::string field;
  int64_t utime = 0, stime = 0;
  for (int index = 3; index <= 15 && fields >> field; ++index) {
    if (index == 14 && !absl::SimpleAtoi(field, &utime)) return absl::InternalError("utime");
    if (index == 15 && !absl::SimpleAtoi(field, &stime)) return absl::InternalError("stime");
  }
  return static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

double OwnCpuSeconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  auto seconds = [](const timeval& t) { return t.tv_sec + t.tv_usec / 1e6; };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

absl::StatusOr<std::unique_ptr<ServerProcess>> ServerProcess::Start(
    const std::string& binary, const std::vector<std::string>& extra_args, absl::Duration timeout) {
  std::vector<std::string> args = {binary, "--address=127.0.0.1:0", "--metrics_address="};
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    return absl::InternalError(absl::StrCat("pipe: ", std::strerror(errno)));
  }
  ChildOptions options;
  options.stderr_fd = fds[1];
  const absl::StatusOr<pid_t> started = StartChild(args, options);
  close(fds[1]);
  if (!started.ok()) {
    close(fds[0]);
    return started.status();
  }
  const pid_t pid = *started;
  std::unique_ptr<ServerProcess> server(new ServerProcess(pid, fds[0]));
  const std::regex serving("serving on port ([0-9]+)");
  const absl::Time end = absl::Now() + timeout;
  std::smatch match;
  while (!std::regex_search(server->early_output_, match, serving)) {
    if (absl::Now() > end) {
      return absl::DeadlineExceededError(absl::StrCat(binary, " did not report its port within ",
                                                      absl::FormatDuration(timeout),
                                                      "; it printed: ", server->early_output_));
    }
    pollfd p{server->stderr_fd_, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    char buffer[4096];
    const ssize_t n = read(server->stderr_fd_, buffer, sizeof(buffer));
    if (n <= 0) {
      return absl::UnavailableError(
          absl::StrCat(binary, " exited before serving; it printed: ", server->early_output_));
    }
    server->early_output_.append(buffer, static_cast<size_t>(n));
  }
  if (!absl::SimpleAtoi(match[1].str(), &server->port_) || server->port_ <= 0) {
    return absl::InternalError(absl::StrCat("bad port in: ", server->early_output_));
  }
  std::fprintf(stderr, "[server] %s", server->early_output_.c_str());
  server->forwarder_ = std::thread([s = server.get()] { s->Forward(); });
  return server;
}

void ServerProcess::Forward() {
  char buffer[4096];
  ssize_t n;
  while ((n = read(stderr_fd_, buffer, sizeof(buffer))) > 0) {
    std::fprintf(stderr, "[server] %.*s", static_cast<int>(n), buffer);
  }
}

absl::Status ServerProcess::Stop(absl::Duration timeout) {
  if (exited_) return absl::OkStatus();
  kill(pid_, SIGTERM);
  const absl::Time end = absl::Now() + timeout;
  int status = 0;
  while (waitpid(pid_, &status, WNOHANG) != pid_) {
    if (absl::Now() > end) {
      return absl::DeadlineExceededError(
          absl::StrCat("habitat-server (pid ", pid_, ") did not exit within ",
                       absl::FormatDuration(timeout), " of SIGTERM"));
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  exited_ = true;
  if (forwarder_.joinable()) forwarder_.join();
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return absl::InternalError(absl::StrCat("habitat-server exited with wait status ", status));
  }
  return absl::OkStatus();
}

ServerProcess::~ServerProcess() {
  if (!exited_) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  if (forwarder_.joinable()) forwarder_.join();
  close(stderr_fd_);
}

}  // namespace load_test
}  // namespace habitat
