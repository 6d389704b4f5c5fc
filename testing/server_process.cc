#include "testing/server_process.h"

#include <sys/resource.h>

#include <cstdlib>
#include <regex>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

#ifndef HABITAT_SERVER_BINARY
#error "HABITAT_SERVER_BINARY must be defined"
#endif
#ifndef HABITAT_DATA_DIR
#error "HABITAT_DATA_DIR must be defined"
#endif

namespace habitat::testing {
namespace {

std::vector<std::string> ServerArgs(const ServerSpec& spec) {
  const char* binary = std::getenv("HABITAT_HOSTILE_SERVER");
  std::vector<std::string> args = {binary != nullptr ? binary : HABITAT_SERVER_BINARY};
  if (spec.defaults) {
    args.insert(args.end(), {"--address=127.0.0.1:0", "--health_address=127.0.0.1:0",
                             "--metrics_address=", "--store=memory", "--models_dir=none",
                             absl::StrCat("--data_dir=", HABITAT_DATA_DIR)});
  }
  args.insert(args.end(), spec.flags.begin(), spec.flags.end());
  return args;
}

ChildOptions Limits(const ServerSpec& spec) {
  ChildOptions options;
  if (spec.nofile > 0) options.limits = {{RLIMIT_NOFILE, static_cast<rlim_t>(spec.nofile)}};
  return options;
}

}  // namespace

ServerProcess::ServerProcess(const ServerSpec& spec)
    : child_(ServerArgs(spec), /*stdout_path=*/"", dir_.Sub("server.err"), Limits(spec)) {}

bool ServerProcess::WaitServing(absl::Duration timeout) {
  const std::regex serving(R"(serving on port (\d+) .*health-only port (\d+))");
  const absl::Time end = absl::Now() + timeout;
  while (absl::Now() < end) {
    std::smatch match;
    const std::string err = Stderr();
    if (std::regex_search(err, match, serving)) {
      port_ = std::stoi(match[1].str());
      health_port_ = std::stoi(match[2].str());
      return true;
    }
    if (!Alive()) return false;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return false;
}

std::string ServerProcess::address() const { return absl::StrCat("127.0.0.1:", port_); }
std::string ServerProcess::health_address() const {
  return absl::StrCat("127.0.0.1:", health_port_);
}

int ServerProcess::metrics_port() const {
  std::smatch match;
  static const std::regex port("metrics on port ([0-9]+)");
  const std::string log = Stderr();
  return std::regex_search(log, match, port) ? std::stoi(match[1]) : 0;
}

long ServerProcess::PeakRssKib() const {
  const std::string status = ReadWholeFile(absl::StrCat("/proc/", pid(), "/status"));
  std::smatch match;
  static const std::regex hwm(R"(VmHWM:\s+(\d+) kB)");
  if (!std::regex_search(status, match, hwm)) return -1;
  return std::stol(match[1].str());
}

bool ServerProcess::WaitForStderr(const std::string& needle, absl::Duration timeout) const {
  const absl::Time end = absl::Now() + timeout;
  do {
    if (absl::StrContains(Stderr(), needle)) return true;
    absl::SleepFor(absl::Milliseconds(50));
  } while (absl::Now() < end);
  return false;
}

}  // namespace habitat::testing
