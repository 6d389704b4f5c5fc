#include "eval/kernel_alike/neusight.h"

#include <algorithm>
#include <filesystem>
#include <set>
#include <tuple>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/file_io.h"
#include "common/status_macros.h"
#include "common/time_units.h"

namespace habitat::eval {

const std::vector<std::string>& KernelAlikeOps() {
  static const auto* ops =
      new std::vector<std::string>{"add",  "addu", "mul",  "mulu", "div", "divu",   "pow",
                                   "powu", "relu", "tanh", "gelu", "ln",  "softmax"};
  return *ops;
}

absl::StatusOr<std::vector<std::string>> SplitCsvLine(absl::string_view line) {
  std::vector<std::string> fields(1);
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        fields.back() += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        fields.back() += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      fields.emplace_back();
    } else if (c != '\r') {
      fields.back() += c;
    }
  }
  if (quoted) return absl::InvalidArgumentError("unterminated quoted field");
  return fields;
}

absl::StatusOr<std::map<Config, Measurement>> ParseNeuSightCsv(
    absl::string_view text, absl::string_view source, const habitat::v1::DeviceDatabase& devices,
    std::string* device_id) {
  std::vector<absl::string_view> lines = absl::StrSplit(text, '\n', absl::SkipWhitespace());
  if (lines.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": empty file"));
  }
  HABITAT_ASSIGN_OR_RETURN(const std::vector<std::string> header, SplitCsvLine(lines[0]));
  absl::flat_hash_map<std::string, size_t> col;
  for (size_t i = 0; i < header.size(); ++i) col[header[i]] = i;
  const std::vector<std::string> needed = {"OPName",  "Latency", "Device",  "Grid x",
                                           "Grid y",  "Grid z",  "Block x", "Block y",
                                           "Block z", "B",       "H"};
  for (const auto& name : needed) {
    if (!col.contains(name)) {
      return absl::InvalidArgumentError(absl::StrCat(source, ": no column '", name, "'"));
    }
  }
  std::map<Config, Measurement> out;
  device_id->clear();
  for (size_t n = 1; n < lines.size(); ++n) {
    const std::string where = absl::StrCat(source, ":", n + 1);
    absl::StatusOr<std::vector<std::string>> f = SplitCsvLine(lines[n]);
    if (!f.ok()) return absl::InvalidArgumentError(absl::StrCat(where, ": ", f.status().message()));
    if (f->size() != header.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": ", f->size(), " fields, header has ", header.size()));
    }
    auto field = [&](const std::string& name) -> const std::string& { return (*f)[col[name]]; };
    // Resolve the GPU once per file, from the driver name it was measured on.
    if (device_id->empty()) {
      for (const auto& d : devices.devices()) {
        for (const auto& name : d.driver_names()) {
          if (absl::EqualsIgnoreCase(name, field("Device"))) *device_id = d.id();
        }
      }
      if (device_id->empty()) {
        return absl::NotFoundError(
            absl::StrCat(where, ": Device '", field("Device"),
                         "' matches no driver_names in the device database"));
      }
    }
    Config c;
    c.op = field("OPName");
    Measurement m;
    bool ok = absl::SimpleAtoi(field("B"), &c.b) && absl::SimpleAtoi(field("H"), &c.h) &&
              absl::SimpleAtod(field("Latency"), &m.latency_ms);
    const char* dims[6] = {"Grid x", "Grid y", "Grid z", "Block x", "Block y", "Block z"};
    for (int i = 0; i < 6 && ok; ++i) {
      ok = absl::SimpleAtoi(field(dims[i]), i < 3 ? &m.grid[i] : &m.block[i - 3]);
    }
    if (!ok) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": B, H, Latency, Grid or Block is not a number"));
    }
    if (!(m.latency_ms > 0) || c.b <= 0 || c.h <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": Latency, B and H must be positive"));
    }
    if (col.contains("Kernel Duration") &&
        !absl::SimpleAtod(field("Kernel Duration"), &m.kernel_duration_ms)) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": Kernel Duration is not a number"));
    }
    m.repeats = 1;
    auto [it, inserted] = out.emplace(c, m);
    if (!inserted) {
      // A configuration measured twice: keep the mean latency. The launch
      // must agree, else the rows are not the same kernel.
      Measurement& prev = it->second;
      if (!std::equal(prev.grid, prev.grid + 3, m.grid) ||
          !std::equal(prev.block, prev.block + 3, m.block)) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": repeated configuration with a different launch"));
      }
      prev.latency_ms = (prev.latency_ms * prev.repeats + m.latency_ms) / (prev.repeats + 1);
      prev.kernel_duration_ms =
          (prev.kernel_duration_ms * prev.repeats + m.kernel_duration_ms) / (prev.repeats + 1);
      ++prev.repeats;
    }
  }
  return out;
}

namespace {

// The .csv.gz files of `op` under `root`/ops, sorted.
absl::StatusOr<std::vector<std::filesystem::path>> CsvFilesOf(const std::string& root,
                                                              const std::string& op) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(root) / "ops" / op;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    return absl::NotFoundError(absl::StrCat(dir.string(), ": no such directory"));
  }
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (absl::EndsWith(e.path().string(), ".csv.gz")) files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace

absl::StatusOr<std::vector<JoinedRow>> LoadJoined(const std::vector<std::string>& data_dirs,
                                                  const std::vector<std::string>& ops,
                                                  const habitat::v1::DeviceDatabase& devices,
                                                  std::vector<std::string>* device_ids) {
  namespace fs = std::filesystem;
  std::map<Config, JoinedRow> joined;
  std::set<std::string> all_devices;
  std::map<std::string, std::set<std::string>> devices_per_op;
  for (const std::string& op : ops) {
    std::vector<fs::path> files;
    for (const std::string& root : data_dirs) {
      HABITAT_ASSIGN_OR_RETURN(std::vector<fs::path> here, CsvFilesOf(root, op));
      files.insert(files.end(), here.begin(), here.end());
    }
    for (const fs::path& file : files) {
      HABITAT_ASSIGN_OR_RETURN(const std::string text, ReadFile(file.string()));
      std::string id;
      HABITAT_ASSIGN_OR_RETURN(auto rows, ParseNeuSightCsv(text, file.string(), devices, &id));
      // Two roots measuring one GPU would silently overwrite each other.
      if (!devices_per_op[op].insert(id).second) {
        return absl::InvalidArgumentError(
            absl::StrCat(file.string(), ": a second file of ", id, " for op '", op, "'"));
      }
      all_devices.insert(id);
      for (auto& [config, m] : rows) {
        if (config.op != op) {
          return absl::InvalidArgumentError(absl::StrCat(file.string(), ": OPName '", config.op,
                                                         "' in the folder of '", op, "'"));
        }
        JoinedRow& row = joined[config];
        row.config = config;
        row.by_device[id] = m;
      }
    }
  }
  for (const auto& [op, ids] : devices_per_op) {
    if (ids != all_devices) {
      return absl::InvalidArgumentError(
          absl::StrCat("op '", op, "' is measured on ", absl::StrJoin(ids, ","),
                       " but the data set has ", absl::StrJoin(all_devices, ",")));
    }
  }
  // Stable GPU order: the device database's.
  device_ids->clear();
  for (const auto& d : devices.devices()) {
    if (all_devices.count(d.id()) > 0) device_ids->push_back(d.id());
  }
  std::vector<JoinedRow> out;
  for (auto& [config, row] : joined) {
    if (row.by_device.size() == all_devices.size()) out.push_back(std::move(row));
  }
  return out;
}

DramTraffic AnalyticDramTraffic(const Config& c) {
  const int64_t n = c.b * c.h;
  constexpr int64_t kFloat = 4;
  if (c.op == "add" || c.op == "mul" || c.op == "div" || c.op == "pow") {
    return {2 * n * kFloat, n * kFloat};
  }
  if (c.op == "ln") return {(n + 2 * c.h) * kFloat, (n + 2 * c.b) * kFloat};
  return {n * kFloat, n * kFloat};
}

habitat::v1::Kernel ToKernel(const Config& config, const Measurement& m, bool with_counters,
                             bool kernel_duration) {
  habitat::v1::Kernel k;
  k.set_name(absl::StrCat(config.op, " B=", config.b, " H=", config.h));
  k.mutable_grid()->set_x(m.grid[0]);
  k.mutable_grid()->set_y(m.grid[1]);
  k.mutable_grid()->set_z(m.grid[2]);
  k.mutable_block()->set_x(m.block[0]);
  k.mutable_block()->set_y(m.block[1]);
  k.mutable_block()->set_z(m.block[2]);
  k.set_duration_ns(MsToNs(kernel_duration ? m.kernel_duration_ms : m.latency_ms));
  if (with_counters) {
    const DramTraffic t = AnalyticDramTraffic(config);
    k.mutable_counters()->set_dram_read_bytes(t.read_bytes);
    k.mutable_counters()->set_dram_write_bytes(t.write_bytes);
  }
  return k;
}

}  // namespace habitat::eval
