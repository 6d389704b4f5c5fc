// The ranges of ServerOptions, checked in one place before the server opens
// anything. habitat-server passes its flags through unchecked (server/main.cc
// refuses only values its options cannot hold), so the messages name the
// flags.
#pragma once

#include "absl/status/status.h"
#include "server/prediction_server.h"

namespace habitat {

// OK, or INVALID_ARGUMENT naming the first option out of range by its flag.
absl::Status CheckServerOptions(const ServerOptions& options);

}  // namespace habitat
