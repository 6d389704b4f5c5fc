#include "core/trace/fsdp_modules.h"

#include <algorithm>
#include <map>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace habitat {
namespace {

namespace v1 = habitat::v1;

// Whether the module at `path` is the one at `outer` or inside it.
bool Inside(absl::string_view path, absl::string_view outer) {
  return outer.empty() || path == outer ||
         (absl::StartsWith(path, outer) && path.size() > outer.size() && path[outer.size()] == '.');
}

bool IsContainer(absl::string_view class_name) {
  static const std::set<std::string, std::less<>> kContainers = {
      "ModuleList", "Sequential", "ModuleDict", "ParameterList", "ParameterDict"};
  return kContainers.count(class_name) > 0;
}

// Per class, how many modules of it there are.
std::map<std::string, int, std::less<>> InstancesPerClass(const ModuleList& modules) {
  std::map<std::string, int, std::less<>> out;
  for (const v1::Module& m : modules) ++out[m.class_name()];
  return out;
}

}  // namespace

absl::StatusOr<FsdpModuleUnits> FsdpUnitsOfModuleClass(const ModuleList& modules,
                                                       absl::string_view wrap_class) {
  if (modules.empty()) {
    return absl::FailedPreconditionError(
        "the trace names no modules: capture it with the agent's OperationTracker(model=...) to "
        "wrap by module class, or cut equal units with fsdp_units");
  }
  FsdpModuleUnits out;
  out.wrap_class = std::string(wrap_class);
  const v1::Module* open = nullptr;  // the instance being summed
  for (const v1::Module& m : modules) {
    if (open != nullptr && !Inside(m.path(), open->path())) open = nullptr;
    if (open == nullptr && m.class_name() == wrap_class) {
      open = &m;
      out.wrapped.push_back(0);
    }
    const int64_t bytes = std::max<int64_t>(0, m.parameter_bytes());
    if (open != nullptr) {
      out.wrapped.back() += bytes;
    } else {
      (out.wrapped.empty() ? out.root_before : out.root_after) += bytes;
    }
  }
  if (out.wrapped.empty()) {
    std::vector<std::string> repeated;
    for (const auto& [name, count] : InstancesPerClass(modules)) {
      if (count >= 2 && !IsContainer(name)) repeated.push_back(name);
    }
    return absl::NotFoundError(
        absl::StrCat("no module of class '", wrap_class,
                     "' in the trace; classes with two or more: ", absl::StrJoin(repeated, ", ")));
  }
  return out;
}

std::string RepeatedBlockClass(const ModuleList& modules) {
  const auto counts = InstancesPerClass(modules);
  auto repeated = [&counts](const std::string& name) {
    auto it = counts.find(name);
    return it != counts.end() && it->second >= 2 && !IsContainer(name);
  };
  // Per repeated class: whether some instance lies inside another repeated
  // class's instance, and the bytes of the modules inside its instances.
  std::map<std::string, bool, std::less<>> nested;
  std::map<std::string, int64_t, std::less<>> bytes;
  std::vector<const v1::Module*> open;  // repeated-class modules around this one
  for (const v1::Module& m : modules) {
    while (!open.empty() && !Inside(m.path(), open.back()->path())) open.pop_back();
    std::set<std::string> counted;
    for (const v1::Module* outer : open) {
      if (counted.insert(outer->class_name()).second) {
        bytes[outer->class_name()] += std::max<int64_t>(0, m.parameter_bytes());
      }
      if (repeated(m.class_name()) && outer->class_name() != m.class_name()) {
        nested[m.class_name()] = true;
      }
    }
    if (repeated(m.class_name())) {
      if (counted.insert(m.class_name()).second) {
        bytes[m.class_name()] += std::max<int64_t>(0, m.parameter_bytes());
      }
      open.push_back(&m);
    }
  }
  // A block holds modules: the next module in pre-order lies inside it.
  std::set<std::string, std::less<>> holds_modules;
  for (int i = 0; i + 1 < modules.size(); ++i) {
    if (Inside(modules[i + 1].path(), modules[i].path())) {
      holds_modules.insert(modules[i].class_name());
    }
  }
  std::string best;
  int64_t best_bytes = 0;
  for (const auto& [name, held] : bytes) {
    if (nested[name] || !holds_modules.count(name) || held <= best_bytes) continue;
    best = name;
    best_bytes = held;
  }
  return best;
}

}  // namespace habitat
