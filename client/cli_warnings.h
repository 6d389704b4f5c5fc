// A prediction's warnings for people, as `habitat predict` prints them on
// stderr under its table: one line per kind of warning (the response's
// structured_warnings) naming the GPUs it concerns and saying in one
// sentence what it means, and with `explain` each warning's full text, with
// its numbers and GPUs, under its kind.
#pragma once

#include <string>

#include "habitat/v1/prediction_service.pb.h"

namespace habitat {

// Empty when the response has no warnings. `hint` (e.g. how to see more)
// goes in parentheses after the first line's "warnings". A response from a
// server without structured_warnings has its warnings grouped by text,
// each a line of its own.
std::string FormatPredictionWarnings(const habitat::v1::PredictResponse& response, bool explain,
                                     const std::string& hint = "");

}  // namespace habitat
