#include "client/cli_warnings.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/cli_output.h"
#include "client/cli_text.h"

namespace habitat {
namespace {

using v1::DevicePrediction;
using v1::PredictResponse;

// One kind's warnings: GPU ids as the response has them.
struct WarningGroup {
  std::string kind;
  std::string summary;
  std::vector<std::string> device_ids;
  std::vector<std::pair<std::string, std::vector<std::string>>> details;
};

void AddUnique(const std::string& id, std::vector<std::string>* ids) {
  if (std::find(ids->begin(), ids->end(), id) == ids->end()) ids->push_back(id);
}

// A response from a server before structured_warnings: one group per
// distinct text, the GPUs' (in the response's order), then the response's.
std::vector<WarningGroup> GroupsByText(const PredictResponse& response) {
  std::vector<WarningGroup> groups;
  for (const DevicePrediction& p : response.predictions()) {
    for (const std::string& text : p.warnings()) {
      auto group = std::find_if(groups.begin(), groups.end(),
                                [&text](const WarningGroup& g) { return g.summary == text; });
      if (group == groups.end()) {
        group = groups.insert(groups.end(), WarningGroup{"", text, {}, {{text, {}}}});
      }
      AddUnique(p.device_id(), &group->device_ids);
      AddUnique(p.device_id(), &group->details.front().second);
    }
  }
  for (const std::string& text : response.warnings()) {
    groups.push_back(WarningGroup{"", text, {}, {{text, {}}}});
  }
  return groups;
}

std::vector<WarningGroup> Groups(const PredictResponse& response) {
  if (response.structured_warnings_size() == 0) return GroupsByText(response);
  std::vector<WarningGroup> groups;
  for (const v1::Warning& w : response.structured_warnings()) {
    WarningGroup& group = groups.emplace_back();
    group.kind = w.kind();
    group.summary = w.summary();
    group.device_ids.assign(w.device_ids().begin(), w.device_ids().end());
    for (const v1::WarningDetail& d : w.details()) {
      group.details.emplace_back(
          d.text(), std::vector<std::string>(d.device_ids().begin(), d.device_ids().end()));
    }
  }
  return groups;
}

// Names GPUs for people, in the table's order.
class GpuNamer {
 public:
  explicit GpuNamer(const PredictResponse& response) {
    for (const DevicePrediction* p : TableOrder(response)) {
      position_.emplace(p->device_id(), table_.size());
      table_.push_back(p->device_id());
      if (p->is_origin()) origin_ = p->device_id();
    }
  }

  // "" for none; the GPU's id for one; for more "all N GPUs", or "N GPUs
  // (A, B, C)" up to 6, or beyond "N GPUs (all but A, B)" where at most 3
  // are left out ("all but the origin" where it is the one), else with only
  // the first 5 and how many more unless `complete`.
  std::string Name(std::vector<std::string> ids, bool complete) const {
    std::stable_sort(ids.begin(), ids.end(), [this](const std::string& a, const std::string& b) {
      return Position(a) < Position(b);
    });
    if (ids.empty()) return "";
    if (ids.size() == 1) return Printable(ids[0]);
    if (ids.size() == table_.size()) return absl::StrCat("all ", ids.size(), " GPUs");
    std::vector<std::string> left_out;
    for (const std::string& id : table_) {
      if (std::find(ids.begin(), ids.end(), id) == ids.end()) left_out.push_back(id);
    }
    std::vector<std::string> names;
    if (ids.size() > kMostNamed && left_out.size() <= kMostLeftOut) {
      if (left_out.size() == 1 && left_out[0] == origin_) {
        return absl::StrCat(ids.size(), " GPUs (all but the origin)");
      }
      for (const std::string& id : left_out) names.push_back(Printable(id));
      return absl::StrCat(ids.size(), " GPUs (all but ", absl::StrJoin(names, ", "), ")");
    }
    const bool cut = !complete && ids.size() > kMostNamed;
    for (size_t i = 0; i < ids.size() && !(cut && i == kNamedWhenCut); ++i) {
      names.push_back(Printable(ids[i]));
    }
    return absl::StrCat(ids.size(), " GPUs (", absl::StrJoin(names, ", "),
                        cut ? absl::StrCat(" and ", ids.size() - kNamedWhenCut, " more") : "", ")");
  }

 private:
  static constexpr size_t kMostLeftOut = 3;
  static constexpr size_t kMostNamed = 6;
  static constexpr size_t kNamedWhenCut = 5;

  // Ids the response does not predict (none from our servers) come last.
  size_t Position(const std::string& id) const {
    auto it = position_.find(id);
    return it == position_.end() ? table_.size() : it->second;
  }

  absl::flat_hash_map<std::string, size_t> position_;
  std::vector<std::string> table_;  // ids in the table's order
  std::string origin_;
};

std::string Prefixed(const std::string& who, const std::string& text) {
  return who.empty() ? text : absl::StrCat(who, ": ", text);
}

}  // namespace

std::string FormatPredictionWarnings(const PredictResponse& response, bool explain,
                                     const std::string& hint) {
  const std::vector<WarningGroup> groups = Groups(response);
  if (groups.empty()) return "";
  const GpuNamer namer(response);
  std::string out =
      absl::StrCat("warnings", hint.empty() ? "" : absl::StrCat(" (", hint, ")"), ":\n");
  for (const WarningGroup& group : groups) {
    const std::string line =
        Prefixed(namer.Name(group.device_ids, false), Printable(group.summary));
    // A warning without a kind (from an older server) is its full text.
    // Wrapped, as the table, within kTableWidth: a wrapped terminal line
    // loses the indent that tells one warning from the next.
    if (!explain || group.kind.empty()) {
      out += Wrap("  ", line, kTableWidth, 4);
      continue;
    }
    out += Wrap("  ", absl::StrCat(line, " [", Printable(group.kind), "]"), kTableWidth, 4);
    for (const auto& [text, ids] : group.details) {
      out += Wrap("    - ", Prefixed(namer.Name(ids, true), Printable(text)), kTableWidth);
    }
  }
  return out;
}

}  // namespace habitat
