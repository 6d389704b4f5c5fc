#include "server/process_metrics.h"

#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <utility>

namespace habitat {
namespace {

prometheus::MetricFamily Family(const std::string& name, const std::string& help,
                                prometheus::MetricType type, double value) {
  prometheus::ClientMetric metric;
  if (type == prometheus::MetricType::Counter) {
    metric.counter.value = value;
  } else {
    metric.gauge.value = value;
  }
  return prometheus::MetricFamily{name, help, type, {metric}};
}

// Fields 14 (utime), 15 (stime), 22 (starttime, ticks after boot), 23
// (vsize, bytes) and 24 (rss, pages) of /proc/self/stat; the command name
// (field 2) may hold spaces, so fields are counted after its ')'.
struct Stat {
  double cpu_seconds = 0, start_ticks = 0, virtual_bytes = 0, resident_pages = 0;
  bool ok = false;
};

Stat ReadStat() {
  Stat stat;
  std::ifstream file("/proc/self/stat");
  std::string line;
  if (!std::getline(file, line)) return stat;
  const size_t close = line.rfind(')');
  if (close == std::string::npos) return stat;
  std::istringstream rest(line.substr(close + 2));  // from field 3 on
  std::vector<std::string> fields;
  for (std::string field; rest >> field;) fields.push_back(field);
  if (fields.size() < 22) return stat;
  const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  auto at = [&](int n) { return std::stod(fields[static_cast<size_t>(n - 3)]); };
  stat.cpu_seconds = (at(14) + at(15)) / ticks;
  stat.start_ticks = at(22);
  stat.virtual_bytes = at(23);
  stat.resident_pages = at(24);
  stat.ok = true;
  return stat;
}

// Boot time in seconds since the epoch (btime in /proc/stat).
double BootTime() {
  std::ifstream file("/proc/stat");
  for (std::string key; file >> key;) {
    if (key == "btime") {
      double value = 0;
      file >> value;
      return value;
    }
  }
  return 0;
}

double OpenFds() {
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return 0;
  double count = 0;
  while (const dirent* entry = readdir(dir)) {
    if (entry->d_name[0] != '.') ++count;
  }
  closedir(dir);
  return count - 1;  // the directory stream's own descriptor
}

}  // namespace

ProcessMetrics::ProcessMetrics(std::string version, std::string revision)
    : version_(std::move(version)), revision_(std::move(revision)) {}

std::vector<prometheus::MetricFamily> ProcessMetrics::Collect() const {
  using prometheus::MetricType;
  std::vector<prometheus::MetricFamily> families;
  prometheus::MetricFamily build =
      Family("habitat_build_info", "The running habitat-server's version and source revision",
             MetricType::Gauge, 1);
  build.metric[0].label = {{"revision", revision_}, {"version", version_}};
  families.push_back(std::move(build));

  const Stat stat = ReadStat();
  if (stat.ok) {
    families.push_back(Family("process_cpu_seconds_total", "User and system CPU time spent",
                              MetricType::Counter, stat.cpu_seconds));
    families.push_back(Family("process_resident_memory_bytes", "Resident memory size",
                              MetricType::Gauge,
                              stat.resident_pages * static_cast<double>(sysconf(_SC_PAGESIZE))));
    families.push_back(Family("process_virtual_memory_bytes", "Virtual memory size",
                              MetricType::Gauge, stat.virtual_bytes));
    families.push_back(
        Family("process_start_time_seconds", "Start time of the process since the Unix epoch",
               MetricType::Gauge,
               BootTime() + stat.start_ticks / static_cast<double>(sysconf(_SC_CLK_TCK))));
  }
  families.push_back(
      Family("process_open_fds", "Open file descriptors", MetricType::Gauge, OpenFds()));
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0) {
    families.push_back(Family("process_max_fds", "Limit on open file descriptors",
                              MetricType::Gauge, static_cast<double>(limit.rlim_cur)));
  }
  return families;
}

}  // namespace habitat
