// A server's /metrics from the outside: plain HTTP GETs on loopback and
// the counters of a Prometheus exposition.
#pragma once

#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace habitat::testing {

// GET `path` over HTTP/1.0 from 127.0.0.1:port: the whole response (status
// line, headers, body) as far as it came within `timeout`; "" when nothing
// came back.
std::string HttpGet(int port, const std::string& path, absl::Duration timeout);

// GET /metrics from 127.0.0.1:port (within 5 s): the body; an error when
// nothing came back or the answer is not 200.
absl::StatusOr<std::string> ScrapeMetrics(int port);

// Values of one counter family by label set, e.g.
// {"code=INVALID_ARGUMENT,rpc=Predict": 3}; labels sorted by name.
std::map<std::string, double> CounterValues(const std::string& exposition,
                                            const std::string& family);

}  // namespace habitat::testing
