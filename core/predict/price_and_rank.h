// Pricing and ranking the GPUs of one Predict: throughput at each
// prediction's batch, the price of the smallest catalog instance with the
// GPU, cost per 1,000 samples, and the ranks by throughput and by cost.
#pragma once

#include <vector>

#include "habitat/v1/device.pb.h"
#include "habitat/v1/prediction_service.pb.h"

namespace habitat {

// Fills throughput (at each prediction's batch_size), prices and both ranks
// of `predictions` in place; a prediction whose memory does not fit gets no
// ranks (0).
void PriceAndRank(const habitat::v1::PriceCatalog* catalog, habitat::v1::PriceKind kind,
                  std::vector<habitat::v1::DevicePrediction>* predictions);

// Clears both ranks of every prediction.
void Unrank(std::vector<habitat::v1::DevicePrediction>* predictions);

}  // namespace habitat
