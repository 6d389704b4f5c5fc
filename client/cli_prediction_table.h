// The prediction as a table for people: the GPUs in rank order, within
// kTableWidth columns (cli_text.h), and its legend, the one owner of what
// the columns and marks mean (the Python client's habitat_client/_table.py
// ports it byte for byte, checked by client_server_test; README and docs
// show its output rather than restating it).
#pragma once

#include <string>
#include <vector>

#include "habitat/v1/prediction_service.pb.h"

namespace habitat {

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

// Keeps each prediction's `top` operations with the longest predicted time
// (the table's --breakdown order), for output formats that list them all.
void KeepTopOperations(int top, habitat::v1::PredictResponse* response);

}  // namespace habitat
