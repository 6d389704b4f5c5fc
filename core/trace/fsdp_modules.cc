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
  // One walk in pre-order, with the stack of the module's ancestors: per
  // repeated class, whether some instance lies inside another repeated
  // class's instance, and the bytes inside its outermost instances; and the
  // classes that hold modules (blocks, not layers). Each module is pushed
  // and popped once, so a deep hierarchy costs no more than a flat one.
  struct Open {
    const v1::Module* module;
    int64_t subtree_bytes;
    bool outermost;  // no ancestor of its class
    // The repeated classes of its ancestors: the first met, and whether
    // there are two or more.
    const std::string* repeated_above;
    bool two_repeated_above;
  };
  std::map<std::string, bool, std::less<>> nested;
  std::map<std::string, int64_t, std::less<>> bytes;
  std::map<std::string, int, std::less<>> open_instances;
  std::set<std::string, std::less<>> holds_modules;
  std::vector<Open> stack;
  auto close = [&]() {
    const Open done = stack.back();
    stack.pop_back();
    if (!stack.empty()) stack.back().subtree_bytes += done.subtree_bytes;
    const std::string& name = done.module->class_name();
    if (!repeated(name)) return;
    --open_instances[name];
    if (done.outermost) bytes[name] += done.subtree_bytes;
  };
  for (const v1::Module& m : modules) {
    while (!stack.empty() && !Inside(m.path(), stack.back().module->path())) close();
    Open entry{&m, std::max<int64_t>(0, m.parameter_bytes()), false, nullptr, false};
    if (!stack.empty()) {
      const Open& parent = stack.back();
      holds_modules.insert(parent.module->class_name());
      entry.repeated_above = parent.repeated_above;
      entry.two_repeated_above = parent.two_repeated_above;
      const std::string& above = parent.module->class_name();
      if (repeated(above)) {
        if (entry.repeated_above == nullptr) {
          entry.repeated_above = &above;
        } else if (*entry.repeated_above != above) {
          entry.two_repeated_above = true;
        }
      }
    }
    const std::string& name = m.class_name();
    if (repeated(name)) {
      if (entry.two_repeated_above ||
          (entry.repeated_above != nullptr && *entry.repeated_above != name)) {
        nested[name] = true;
      }
      entry.outermost = open_instances[name]++ == 0;
    }
    stack.push_back(entry);
  }
  while (!stack.empty()) close();
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
