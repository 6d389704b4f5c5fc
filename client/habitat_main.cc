// habitat: the command-line client. See client/cli_commands.h.
#include <iostream>
#include <string>
#include <vector>

#include "client/cli_commands.h"

#ifndef HABITAT_DEFAULT_DATA_DIR
#define HABITAT_DEFAULT_DATA_DIR "data"
#endif
#ifndef HABITAT_DEFAULT_MODELS_DIR
#define HABITAT_DEFAULT_MODELS_DIR "models"
#endif
#ifndef HABITAT_VERSION
#define HABITAT_VERSION "unknown"
#endif

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  habitat::CliEnvironment env;
  env.default_data_dir = HABITAT_DEFAULT_DATA_DIR;
  env.default_models_dir = HABITAT_DEFAULT_MODELS_DIR;
  env.version = HABITAT_VERSION;
  const int code = habitat::RunHabitatCli(args, env, std::cout, std::cerr);
  std::cout.flush();
  return code;
}
