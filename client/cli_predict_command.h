// `habitat predict`: its options, the request they make, and how the
// response is printed (table, JSON or CSV) and plotted.
#pragma once

#include <string>
#include <vector>

#include "client/cli_command_context.h"

namespace habitat {

// Runs `habitat predict words...`; the exit code.
int RunPredictCommand(const std::vector<std::string>& words, const CommandContext& ctx);

}  // namespace habitat
