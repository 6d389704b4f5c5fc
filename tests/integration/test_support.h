// Helpers shared by the integration tests: the real-GPU fixture trace, a
// plain-HTTP scrape of /metrics, and the gRPC health check.
#pragma once

#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "habitat/v1/trace.pb.h"

namespace habitat::testing {

// The Kineto fixture the server tests predict from (captured on an H100 by
// eval/capture/capture_fixtures.py), relative to the testdata dir.
inline constexpr char kFixtureTrace[] = "kineto/h100/resnet50_b16_fp32.json.gz";

// Imports tests/testdata/<relative> with the batch size and precision its
// name carries (<model>_b<batch>_<precision>.json.gz).
absl::StatusOr<habitat::v1::Trace> LoadFixtureTrace(const std::string& relative);

// GET /metrics from 127.0.0.1:port over a plain socket; the body.
absl::StatusOr<std::string> ScrapeMetrics(int port);

// Values of one counter family by label set, e.g.
// {"code=INVALID_ARGUMENT,rpc=Predict": 3}; labels sorted by name.
std::map<std::string, double> CounterValues(const std::string& exposition,
                                            const std::string& family);

// grpc.health.v1.Health/Check for `service` ("" = the whole server).
// Returns the ServingStatus number: 1 SERVING, 2 NOT_SERVING.
absl::StatusOr<int> HealthCheck(const std::string& address, const std::string& service);

}  // namespace habitat::testing
