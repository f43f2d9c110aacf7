#include "core/host_memory.hpp"

#include <algorithm>
#include <fstream>
#include <limits>
#include <sstream>

namespace orbis {
namespace {

constexpr std::uint64_t kUnknown = std::numeric_limits<std::uint64_t>::max();

// "Key:   1234 kB" of a /proc file, in bytes; kUnknown when absent.
std::uint64_t proc_kib_field(const char* file, const std::string& key) {
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) {
    if (line.compare(0, key.size(), key) != 0 || line.size() <= key.size() || line[key.size()] != ':') continue;
    std::istringstream fields(line.substr(key.size() + 1));
    std::uint64_t kib = 0;
    if (fields >> kib) return kib * 1024;
  }
  return kUnknown;
}

// A number from a one-line cgroup file ("max" or a huge v1 value: unlimited).
std::uint64_t cgroup_value(const std::string& path) {
  std::ifstream in(path);
  std::string text;
  if (!(in >> text) || text == "max") return kUnknown;
  try {
    const std::uint64_t v = std::stoull(text);
    return v >= (std::uint64_t{1} << 62) ? kUnknown : v;
  } catch (...) {
    return kUnknown;
  }
}

// "key value" of a cgroup memory.stat file; kUnknown when absent.
std::uint64_t stat_field(const std::string& path, const std::string& key) {
  std::ifstream in(path);
  std::string name;
  std::uint64_t value = 0;
  while (in >> name >> value)
    if (name == key) return value;
  return kUnknown;
}

// The cgroup the process is in ("0::/some/path" for v2; "N:memory:/path" for v1).
std::string own_cgroup(const std::string& controller) {
  std::ifstream in("/proc/self/cgroup");
  for (std::string line; std::getline(in, line);) {
    const auto first = line.find(':'), second = line.find(':', first + 1);
    if (first == std::string::npos || second == std::string::npos) continue;
    const std::string controllers = line.substr(first + 1, second - first - 1);
    if (controllers == controller || (controller.empty() && controllers.empty())) return line.substr(second + 1);
  }
  return "/";
}

}  // namespace

HostMemoryAvailable available_host_memory() {
  HostMemoryAvailable out{kUnknown, "unknown"};
  const std::uint64_t mem_available = proc_kib_field("/proc/meminfo", "MemAvailable");
  if (mem_available != kUnknown) out = {mem_available, "MemAvailable of /proc/meminfo"};
  // The cgroup's limit less what the group uses, page cache that can be dropped not counted
  // (as `docker stats` does): cgroup v2, then v1; the group's own folder, or the root of a
  // container's namespaced view.
  struct Files { std::string dir, limit, usage, inactive; };
  const std::string v2 = "/sys/fs/cgroup", v1 = "/sys/fs/cgroup/memory";
  for (const Files& f : {Files{v2 + own_cgroup(""), "memory.max", "memory.current", "inactive_file"},
                         Files{v2, "memory.max", "memory.current", "inactive_file"},
                         Files{v1 + own_cgroup("memory"), "memory.limit_in_bytes", "memory.usage_in_bytes", "total_inactive_file"},
                         Files{v1, "memory.limit_in_bytes", "memory.usage_in_bytes", "total_inactive_file"}}) {
    const std::uint64_t limit = cgroup_value(f.dir + "/" + f.limit);
    if (limit == kUnknown) continue;
    std::uint64_t usage = cgroup_value(f.dir + "/" + f.usage);
    if (usage == kUnknown) usage = 0;
    const std::uint64_t inactive = stat_field(f.dir + "/memory.stat", f.inactive);
    if (inactive != kUnknown) usage = usage > inactive ? usage - inactive : 0;
    const std::uint64_t left = limit > usage ? limit - usage : 0;
    if (left < out.bytes) out = {left, "the memory limit of the cgroup (" + f.dir + "/" + f.limit + ") less its use"};
    break;
  }
  return out;
}

std::uint64_t resident_bytes() {
  const std::uint64_t v = proc_kib_field("/proc/self/status", "VmRSS");
  return v == kUnknown ? 0 : v;
}

std::uint64_t peak_resident_bytes() {
  const std::uint64_t v = proc_kib_field("/proc/self/status", "VmHWM");
  return v == kUnknown ? 0 : v;
}

bool reset_peak_resident_bytes() {
  std::ofstream out("/proc/self/clear_refs");
  if (!out) return false;
  out << "5";
  out.flush();
  return static_cast<bool>(out);
}

}  // namespace orbis
