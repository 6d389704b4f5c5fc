// Renders service responses for people (tables that fit in 100 columns) and
// for scripts (JSON of the proto, CSV with a fixed header).
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "habitat/v1/prediction_service.pb.h"

namespace habitat {

enum class OutputFormat { kTable, kJson, kCsv };

// "table", "json" or "csv"; INVALID_ARGUMENT otherwise.
absl::StatusOr<OutputFormat> ParseOutputFormat(const std::string& text);

// What the table header shows that the response does not carry.
struct PredictionHeader {
  // Empty: "?" (e.g. a prediction by trace id).
  std::string model_name;
  std::string precision;
  // Describes an inline catalog (e.g. "file prices.textproto"); empty when
  // the response names a server-side catalog or there are no prices.
  std::string inline_catalog_label;
};

struct TableOptions {
  bool breakdown = false;
  // Operations listed per GPU with `breakdown`.
  int top_operations = 10;
};

// The table of a prediction, its legend, its data-parallel steps and
// breakdown, in at most kTableWidth columns (cli_text.h) where the GPU ids
// are the database's; the warnings are FormatPredictionWarnings'
// (cli_warnings.h).
std::string FormatPredictionTable(const habitat::v1::PredictResponse& response,
                                  const PredictionHeader& header, const TableOptions& options);

// The predictions in the table's order: by rank (a fit's by cost, the
// question it answers), unranked ones (0: unpriced, or out of memory) last;
// ties by device id so output is stable whatever order the server sent.
std::vector<const habitat::v1::DevicePrediction*> TableOrder(
    const habitat::v1::PredictResponse& response);
// The CSV header line (without newline); fixed so scripts can rely on it.
const char* PredictionCsvHeader();
std::string FormatPredictionCsv(const habitat::v1::PredictResponse& response);

// Keeps each prediction's `top` operations with the longest predicted time
// (the table's --breakdown order), for output formats that list them all.
void KeepTopOperations(int top, habitat::v1::PredictResponse* response);

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

// Replaces control characters and non-printable bytes by '?', so names taken
// from a trace cannot move the terminal's cursor or change its colours.
std::string Printable(const std::string& text);

}  // namespace habitat
