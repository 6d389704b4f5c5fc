// FSDP units from the modules a trace names (Trace.modules, recorded when
// the agent was given the model): where fully_shard, applied to each
// instance of a module class and then to the model, would cut the
// parameters (docs/multi_gpu.md, section 6, "Units").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "habitat/v1/trace.pb.h"

namespace habitat {

// Parameter bytes in registration order (forward order for the models FSDP
// wraps per block): the root's before the first wrapped module, each
// outermost instance of the class, the root's after the first instance
// that no instance holds.
struct FsdpModuleUnits {
  std::string wrap_class;
  int64_t root_before = 0;
  std::vector<int64_t> wrapped;
  int64_t root_after = 0;
};

// The units of wrapping each outermost instance of `wrap_class`.
// FAILED_PRECONDITION for a trace without modules, NOT_FOUND (naming the
// classes it has two or more of) when no module is of that class.
using ModuleList = google::protobuf::RepeatedPtrField<habitat::v1::Module>;
absl::StatusOr<FsdpModuleUnits> FsdpUnitsOfModuleClass(const ModuleList& modules,
                                                       absl::string_view wrap_class);

// The class a per-block policy wraps: among the classes with two or more
// instances that are not containers (ModuleList, Sequential, ...), those
// that hold modules (blocks, not layers such as Embedding) and no instance
// of which lies inside an instance of another such class, the one whose
// instances hold the most parameter bytes. "" when none (or no modules).
std::string RepeatedBlockClass(const ModuleList& modules);

}  // namespace habitat
