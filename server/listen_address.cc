#include "server/listen_address.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace habitat {

std::string MetricsListenAddress(absl::string_view metrics, absl::string_view address) {
  if (!absl::StartsWith(metrics, ":")) return std::string(metrics);
  // A Unix socket or an address without a port has no host to share: the
  // safe choice is loopback.
  const size_t colon = address.rfind(':');
  if (absl::StartsWith(address, "unix:") || colon == absl::string_view::npos || colon == 0) {
    return absl::StrCat("127.0.0.1", metrics);
  }
  return absl::StrCat(address.substr(0, colon), metrics);
}

}  // namespace habitat
