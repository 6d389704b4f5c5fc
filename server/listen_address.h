#ifndef HABITAT_SERVER_LISTEN_ADDRESS_H_
#define HABITAT_SERVER_LISTEN_ADDRESS_H_

#include <string>

#include "absl/strings/string_view.h"

namespace habitat {

// The /metrics listen address for `metrics` (--metrics_address) beside the
// gRPC `address`: a bare ":PORT" takes the host of `address`, so a server
// bound to loopback does not publish every tenant's activity on all
// interfaces; anything else is used as given ("" disables /metrics).
std::string MetricsListenAddress(absl::string_view metrics, absl::string_view address);

}  // namespace habitat

#endif  // HABITAT_SERVER_LISTEN_ADDRESS_H_
