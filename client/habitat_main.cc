// habitat: the command-line client. See client/cli_commands.h.
#include <iostream>
#include <string>
#include <vector>

#include "client/cli_commands.h"
#include "common/resource_dirs.h"

#ifndef HABITAT_VERSION
#define HABITAT_VERSION "unknown"
#endif

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  habitat::CliEnvironment env;
  // The source tree's data/ and models/ when run from the build tree, else
  // the installed ones beside the program (common/resource_dirs.h).
  env.default_data_dir = habitat::DefaultResourceDir(
      HABITAT_BUILD_OUTPUT_DIR, HABITAT_SOURCE_DATA_DIR, HABITAT_INSTALLED_DATA_DIR);
  env.default_models_dir = habitat::DefaultResourceDir(
      HABITAT_BUILD_OUTPUT_DIR, HABITAT_SOURCE_MODELS_DIR, HABITAT_INSTALLED_MODELS_DIR);
  env.version = HABITAT_VERSION;
  const int code = habitat::RunHabitatCli(args, env, std::cout, std::cerr);
  std::cout.flush();
  return code;
}
