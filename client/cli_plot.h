// `habitat predict --plot FILE`: throughput against price per GPU-hour, drawn
// by the Python client's plot (habitat_client.plot, matplotlib) rather than
// by hand-written SVG here.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "habitat/v1/prediction_service.pb.h"

namespace habitat {

// INVALID_ARGUMENT unless `path` ends in .svg or .png (checked before any
// work, as a usage error).
absl::Status CheckPlotPath(const std::string& path);

// FAILED_PRECONDITION, saying why, unless the catalog that will price
// `request` has prices of the kind it asks for: the plot's x axis is the
// price, so this is checked before predicting. `catalogs`: the service's
// (its default_catalog prices a request naming none). OK where it cannot
// tell (a catalog the service lacks, which the prediction then reports, or
// a server that does not say its default).
absl::Status CheckPlotPrices(const habitat::v1::PredictRequest& request,
                             const habitat::v1::ListCatalogsResponse& catalogs);

// Writes the plot of `response` to `path` with
//   $HABITAT_PYTHON (default: python3 on PATH) -m habitat_client.plot
// FAILED_PRECONDITION, with the plotter's own message and what to install,
// when no interpreter, client package or matplotlib is there.
absl::Status PlotPrediction(const habitat::v1::PredictResponse& response,
                            const std::string& model_name, const std::string& path);

}  // namespace habitat
