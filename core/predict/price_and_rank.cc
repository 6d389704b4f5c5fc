#include "core/predict/price_and_rank.h"

#include <algorithm>
#include <utility>

#include "common/time_units.h"
#include "core/pricing/price_catalog.h"

namespace habitat {
namespace {

using habitat::v1::DevicePrediction;

// Throughput at the prediction's batch, and the price and cost from the
// catalog's smallest instance with the GPU (none without one).
void Price(const v1::PriceCatalog* catalog, v1::PriceKind kind, DevicePrediction* p) {
  const double seconds = NsToSeconds(p->wall_time_ns());
  p->set_samples_per_second(seconds > 0 ? p->batch_size() / seconds : 0.0);
  p->set_has_price(false);
  p->clear_instance_type();
  p->clear_gpus_per_instance();
  p->clear_instance_description();
  p->clear_price_region();
  if (catalog == nullptr) return;
  const v1::GpuPrice* row = ChoosePrice(*catalog, p->device_id(), kind);
  if (row == nullptr) return;
  const double price = PricePerGpuHour(*row, kind);
  p->set_has_price(true);
  p->set_price_per_hour(price);
  p->set_instance_type(row->instance_type());
  p->set_gpus_per_instance(GpusPerInstance(*row));
  p->set_instance_description(row->instance_description());
  p->set_price_region(row->region());
  p->set_cost_per_1000_samples(
      p->samples_per_second() > 0 ? price / 3600.0 * 1000.0 / p->samples_per_second() : 0.0);
  p->set_samples_per_currency_unit(p->samples_per_second() * 3600.0 / price);
}

// A GPU the batch does not fit would run out of memory, not win.
bool Ranked(const DevicePrediction& p) { return !p.has_memory() || p.memory().fits(); }

void RankByTime(std::vector<DevicePrediction>* predictions) {
  std::vector<size_t> order;
  for (size_t i = 0; i < predictions->size(); ++i) {
    if (Ranked((*predictions)[i])) order.push_back(i);
  }
  // By throughput: GPUs fitted to different batches compare by samples per
  // second, which at one batch orders as the wall time does. Where the host
  // sets the pace, several GPUs share one wall time; the one with less GPU
  // time has more headroom and comes first.
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const auto& pa = (*predictions)[a];
    const auto& pb = (*predictions)[b];
    return std::pair(-pa.samples_per_second(), pa.gpu_time_ns()) <
           std::pair(-pb.samples_per_second(), pb.gpu_time_ns());
  });
  for (size_t rank = 0; rank < order.size(); ++rank) {
    (*predictions)[order[rank]].set_rank_by_time(static_cast<uint32_t>(rank + 1));
  }
}

void RankByCost(std::vector<DevicePrediction>* predictions) {
  std::vector<size_t> priced;
  for (size_t i = 0; i < predictions->size(); ++i) {
    const DevicePrediction& p = (*predictions)[i];
    if (p.has_price() && Ranked(p)) priced.push_back(i);
  }
  std::stable_sort(priced.begin(), priced.end(), [&](size_t a, size_t b) {
    return (*predictions)[a].cost_per_1000_samples() < (*predictions)[b].cost_per_1000_samples();
  });
  for (size_t rank = 0; rank < priced.size(); ++rank) {
    (*predictions)[priced[rank]].set_rank_by_cost(static_cast<uint32_t>(rank + 1));
  }
}

}  // namespace

void PriceAndRank(const v1::PriceCatalog* catalog, v1::PriceKind kind,
                  std::vector<DevicePrediction>* predictions) {
  for (auto& p : *predictions) {
    Price(catalog, kind, &p);
    p.set_rank_by_time(0);
    p.set_rank_by_cost(0);
  }
  RankByTime(predictions);
  RankByCost(predictions);
}

void Unrank(std::vector<DevicePrediction>* predictions) {
  for (auto& p : *predictions) {
    p.set_rank_by_time(0);
    p.set_rank_by_cost(0);
  }
}

}  // namespace habitat
