// Health/Watch behind the bearer token on the main port. A Watch stream
// never ends by itself and counts as activity, so a token-less client
// holding one per connection defeated --max_connection_idle_seconds and
// kept the connection slots until their age limit. Check stays open to
// everyone (probes carry no token); the plaintext health-only port keeps
// Watch open, bounded there by its per-peer connection limit.
#pragma once

#include <memory>

#include "grpcpp/support/server_interceptor.h"
#include "server/token_auth.h"

namespace habitat {

inline constexpr char kHealthWatchMethod[] = "/grpc.health.v1.Health/Watch";

// Cancels every Health/Watch call without a valid token, before the health
// service sees it (the client gets CANCELLED), so its connection falls idle
// and is closed by the idle limit. With authentication off it lets every
// call through. `authenticator` must outlive the server.
std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> MakeWatchTokenCheck(
    const Authenticator* authenticator);

}  // namespace habitat
