#include "common/child_process.h"

#include <fcntl.h>
#include <grp.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace habitat {
namespace {

// In the child: points `target` (1 or 2) at the file or descriptor asked
// for. False on failure.
bool Redirect(int target, const std::string& path, int fd, bool append) {
  if (!path.empty()) {
    const int flags = O_WRONLY | O_CREAT | O_CLOEXEC | (append ? O_APPEND : O_TRUNC);
    fd = ::open(path.c_str(), flags, 0644);
    if (fd < 0) return false;
  }
  return fd < 0 || ::dup2(fd, target) == target;
}

[[noreturn]] void RunChild(std::vector<char*>& argv, const ChildOptions& options) {
  for (const auto& [resource, limit] : options.limits) {
    const rlimit value{limit, limit};
    if (::setrlimit(resource, &value) != 0) ::_exit(kChildSetupFailed);
  }
  const bool one_file = !options.stdout_path.empty() && options.stdout_path == options.stderr_path;
  if (!Redirect(STDOUT_FILENO, options.stdout_path, options.stdout_fd, options.append)) {
    ::_exit(kChildSetupFailed);
  }
  if (one_file ? ::dup2(STDOUT_FILENO, STDERR_FILENO) != STDERR_FILENO
               : !Redirect(STDERR_FILENO, options.stderr_path, options.stderr_fd, options.append)) {
    ::_exit(kChildSetupFailed);
  }
  if (options.user.has_value() &&
      (::setgroups(0, nullptr) != 0 || ::setgid(options.user->second) != 0 ||
       ::setuid(options.user->first) != 0)) {
    ::_exit(kChildSetupFailed);
  }
  // After setuid, which clears it.
  if (options.death_signal != 0) ::prctl(PR_SET_PDEATHSIG, options.death_signal);
  if (!options.cwd.empty() && ::chdir(options.cwd.c_str()) != 0) ::_exit(kChildSetupFailed);
  ::execv(argv[0], argv.data());
  // Said on the child's stderr (wherever it points), where callers that
  // wait for the program's output will show it.
  constexpr char kCannotRun[] = "cannot run ";
  [[maybe_unused]] ssize_t ignored = ::write(STDERR_FILENO, kCannotRun, sizeof(kCannotRun) - 1);
  ignored = ::write(STDERR_FILENO, argv[0], std::strlen(argv[0]));
  ignored = ::write(STDERR_FILENO, "\n", 1);
  ::_exit(kChildExecFailed);
}

}  // namespace

absl::StatusOr<pid_t> StartChild(const std::vector<std::string>& args,
                                 const ChildOptions& options) {
  if (args.empty()) return absl::InternalError("StartChild: no program given");
  // Built before fork: the child may only make async-signal-safe calls.
  std::vector<char*> argv;
  for (const std::string& arg : args) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) {
    return absl::InternalError(
        absl::StrCat("cannot start ", args[0], ": fork: ", std::strerror(errno)));
  }
  if (pid == 0) RunChild(argv, options);
  return pid;
}

absl::StatusOr<int> WaitChild(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) {
      return absl::InternalError(absl::StrCat("waitpid ", pid, ": ", std::strerror(errno)));
    }
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  // Without WUNTRACED, waitpid reports only exits and deaths by a signal.
  return absl::InternalError(absl::StrCat("child ", pid, " killed by signal ", WTERMSIG(status)));
}

}  // namespace habitat
