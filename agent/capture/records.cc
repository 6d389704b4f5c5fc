#include "agent/capture/records.h"

#include <unordered_map>

namespace habitat {
namespace agent {

void ResolveLaunches(ActivityRecords* records) {
  std::unordered_map<uint32_t, int64_t> launch_of;
  launch_of.reserve(records->api_calls.size());
  for (const ApiRecord& api : records->api_calls) {
    auto [it, inserted] = launch_of.try_emplace(api.correlation_id, api.start_ns);
    if (!inserted && api.start_ns < it->second) it->second = api.start_ns;
  }
  // One external id per correlation id and kind; the agent pushes one kind.
  std::unordered_map<uint32_t, uint64_t> external_of;
  external_of.reserve(records->external_correlations.size());
  for (const ExternalCorrelation& e : records->external_correlations) {
    external_of[e.correlation_id] = e.external_id;
  }
  auto resolve = [&](auto& r) {
    auto launch = launch_of.find(r.correlation_id);
    if (launch != launch_of.end()) {
      r.launch_ns = launch->second;
      r.has_launch_time = true;
    }
    auto ext = external_of.find(r.correlation_id);
    if (ext != external_of.end()) r.external_id = ext->second;
  };
  for (KernelRecord& k : records->kernels) resolve(k);
  for (MemoryRecord& m : records->memory) resolve(m);
}

}  // namespace agent
}  // namespace habitat
