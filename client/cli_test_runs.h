// Runs the `habitat` CLI in-process for its tests, on the real data
// directory, and names the committed traces they use.
#pragma once

#include <sstream>
#include <string>
#include <vector>

#include "client/cli_commands.h"

namespace habitat {
namespace testing_cli {

struct CliRun {
  int code;
  std::string out;
  std::string err;
};

inline CliRun Habitat(std::vector<std::string> args) {
  CliEnvironment env;
  env.default_data_dir = HABITAT_DATA_DIR;
  env.version = "test";
  std::ostringstream out, err;
  const int code = RunHabitatCli(args, env, out, err);
  return {code, out.str(), err.str()};
}

// The same with the trained kernel-varying predictor, as the installed CLI
// runs by default.
inline CliRun HabitatWithModels(std::vector<std::string> args) {
  CliEnvironment env;
  env.default_data_dir = HABITAT_DATA_DIR;
  env.default_models_dir = HABITAT_MODELS_DIR;
  env.version = "test";
  std::ostringstream out, err;
  const int code = RunHabitatCli(args, env, out, err);
  return {code, out.str(), err.str()};
}

// An agent trace without memory data (ResNet-50, batch 32, fp32, H100).
inline std::string AgentTrace() {
  return std::string(HABITAT_TESTDATA_DIR) + "/agent_suite/h100/resnet50_b32_fp32.trace.gz";
}

// An agent trace that recorded its memory (ResNet-50, batch 16, fp32, H100).
inline std::string AgentTraceWithMemory() {
  return std::string(HABITAT_TESTDATA_DIR) + "/agent_suite/h100_memory/resnet50_b16_fp32.trace.gz";
}

// An agent trace that recorded its model's modules (GPT-2 355M, batch 4,
// fp32, H200).
inline std::string AgentTraceWithModules() {
  return std::string(HABITAT_TESTDATA_DIR) +
         "/agent_suite/h200_fsdp/gpt2_355m_b4_fp32_modules.trace.gz";
}

}  // namespace testing_cli
}  // namespace habitat
