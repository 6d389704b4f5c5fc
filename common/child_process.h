// Starting a program as a child process (fork + execv) for the tests and
// tools that run the project's binaries, PostgreSQL and the CLI: one place
// for the redirections, limits and user switch they need, with only
// async-signal-safe calls between fork and exec.
#pragma once

#include <sys/resource.h>
#include <sys/types.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace habitat {

struct ChildOptions {
  // Where the child's stdout and stderr go: a file (created, truncated
  // unless `append`), else a descriptor of the parent (e.g. a pipe's write
  // end, opened O_CLOEXEC so that the program keeps only the redirected
  // copy), else the parent's own. The same path for both: one file.
  std::string stdout_path;
  std::string stderr_path;
  int stdout_fd = -1;
  int stderr_fd = -1;
  bool append = false;
  // Working directory; empty: the parent's.
  std::string cwd;
  // setrlimit(resource, {limit, limit}) in the child, e.g. RLIMIT_AS.
  std::vector<std::pair<int, rlim_t>> limits;
  // Runs as this user and group (the parent must be root).
  std::optional<std::pair<uid_t, gid_t>> user;
  // Sent to the child when the parent dies (PR_SET_PDEATHSIG); 0: none.
  int death_signal = 0;
};

// Exit codes of a child that failed before its program ran.
inline constexpr int kChildSetupFailed = 126;
inline constexpr int kChildExecFailed = 127;

// Starts args[0] with `args`; INTERNAL when fork fails or args is empty.
absl::StatusOr<pid_t> StartChild(const std::vector<std::string>& args,
                                 const ChildOptions& options = {});

// Blocks until child `pid` ends and reaps it (waitpid, retried on EINTR):
// its exit code; INTERNAL when waitpid fails or a signal ended the child.
absl::StatusOr<int> WaitChild(pid_t pid);

}  // namespace habitat
