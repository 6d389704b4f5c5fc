// The standard process_* metrics (CPU seconds, resident and virtual memory,
// open and maximum file descriptors, start time), read from /proc at each
// scrape, and habitat_build_info{version,revision}. prometheus-cpp 1.0 has
// no process collector of its own.
#pragma once

#include <string>
#include <vector>

#include "prometheus/collectable.h"
#include "prometheus/metric_family.h"

namespace habitat {

class ProcessMetrics : public prometheus::Collectable {
 public:
  ProcessMetrics(std::string version, std::string revision);
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  const std::string version_;
  const std::string revision_;
};

}  // namespace habitat
