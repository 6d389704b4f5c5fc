// The `habitat` command line: subcommands predict, devices, catalogs,
// upload and import-kineto. Kept apart from main() so tests can run it.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace habitat {

// Exit codes: 0 success, 1 the command failed (bad file, server error),
// 2 the command line was wrong.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;

struct CliEnvironment {
  // Used when --data-dir is not given.
  std::string default_data_dir;
  // Empty: in-process predictions run without the kernel-varying predictor.
  std::string default_models_dir;
  std::string version;
};

// Runs `habitat args...` (args exclude the program name). Results go to
// `out`; messages for people (errors, notes) to `err`.
int RunHabitatCli(const std::vector<std::string>& args, const CliEnvironment& env,
                  std::ostream& out, std::ostream& err);

}  // namespace habitat
