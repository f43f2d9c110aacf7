// What the host's memory allows and what the process uses, from Linux's /proc and the cgroup
// (v2 or v1) the process runs in: a container's limit is often far below the machine's.
#pragma once
#include <cstdint>
#include <string>

namespace orbis {

struct HostMemoryAvailable {
  std::uint64_t bytes = 0;   // what a new allocation can still get without swapping
  std::string source;        // "MemAvailable", "cgroup limit", ... (messages)
};

// min(MemAvailable of /proc/meminfo, cgroup limit - cgroup usage); an unknown value is
// treated as unlimited (a machine without /proc: UINT64_MAX).
HostMemoryAvailable available_host_memory();

// The resident set now and its high-water mark (VmRSS, VmHWM of /proc/self/status); 0 when
// unknown.
std::uint64_t resident_bytes();
std::uint64_t peak_resident_bytes();
// Resets the high-water mark to the resident set now (Linux >= 4.0: "5" into
// /proc/self/clear_refs), so that peak_resident_bytes() measures from here: the peak of one
// step. False when the kernel refuses (the peak then runs from the start).
bool reset_peak_resident_bytes();

}  // namespace orbis
