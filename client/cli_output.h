// Renders service responses for scripts (JSON of the proto, CSV with a
// fixed header) and the device and catalog lists for people; the
// prediction's table is cli_prediction_table.h's.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/cli_prediction_table.h"
#include "habitat/v1/prediction_service.pb.h"

namespace habitat {

enum class OutputFormat { kTable, kJson, kCsv };

// "table", "json" or "csv"; INVALID_ARGUMENT otherwise.
absl::StatusOr<OutputFormat> ParseOutputFormat(const std::string& text);

// The CSV header line (without newline); fixed so scripts can rely on it.
const char* PredictionCsvHeader();
std::string FormatPredictionCsv(const habitat::v1::PredictResponse& response);

// JSON of any response: proto field names, zero values printed, indented;
// 64-bit integers as numbers, unlike the proto JSON mapping's strings.
absl::StatusOr<std::string> FormatJson(const google::protobuf::Message& message);

std::string FormatDevicesTable(const habitat::v1::ListDevicesResponse& response);
std::string FormatDevicesCsv(const habitat::v1::ListDevicesResponse& response);
std::string FormatCatalogsTable(const habitat::v1::ListCatalogsResponse& response);
std::string FormatCatalogsCsv(const habitat::v1::ListCatalogsResponse& response);

// Share of a device's predicted time carried over from the origin without
// scaling (PREDICTION_METHOD_UNSCALED), in percent; 0 for an empty prediction.
double UnscaledPercent(const habitat::v1::DevicePrediction& prediction);

// "spot" or "on-demand", as the tables and CSV name a price kind.
const char* PriceKindName(habitat::v1::PriceKind kind);

// Replaces control characters and non-printable bytes by '?', so names taken
// from a trace cannot move the terminal's cursor or change its colours.
std::string Printable(const std::string& text);

}  // namespace habitat
