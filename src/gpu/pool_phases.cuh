// Where a step's device memory goes, measured: the device pool's most bytes in use in each
// phase of the step (the memory plan's phases, gpu/device_memory_plan.hpp), for the run's
// summary. pool_phase(name) ends the phase before it (the pool's high-water mark since it
// began) and begins `name`. The pool counts an allocation when it is queued and a release
// when its free is queued (device_buffer.cuh), so the marks need no wait for the device.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "gpu/cuda_check.cuh"
#include "gpu/device_buffer.cuh"

namespace orbis::gpu {

struct PoolPhases {
  struct Phase {
    std::string name;
    std::size_t most = 0;       // the most in use while it ran, over the run
    std::size_t at_start = 0;   // in use when that run of it began: what it found held
    std::size_t reserved = 0;   // the most the pool reserved while it ran, over the run
  };
  std::vector<Phase> phases;   // in the order they first ran
  std::string current;
  std::size_t current_start = 0;
  std::size_t reserved_most = 0;   // the most the pool reserved in any phase that ended

  static PoolPhases& get() {
    thread_local PoolPhases p;
    return p;
  }
  Phase& find(const std::string& name) {
    for (Phase& p : phases)
      if (p.name == name) return p;
    phases.push_back({name});
    return phases.back();
  }
};

inline void pool_phase(const std::string& name) {
  cudaMemPool_t pool = device_pool();
  std::uint64_t used = 0, high = 0, reserved_high = 0;
  ORBIS_CUDA_CHECK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &used));
  ORBIS_CUDA_CHECK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &high));
  ORBIS_CUDA_CHECK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemHigh, &reserved_high));
  PoolPhases& p = PoolPhases::get();
  if (!p.current.empty()) {
    PoolPhases::Phase& ended = p.find(p.current);
    if (high > ended.most) {
      ended.most = static_cast<std::size_t>(high);
      ended.at_start = p.current_start;
    }
    ended.reserved = std::max(ended.reserved, static_cast<std::size_t>(reserved_high));
  }
  p.reserved_most = std::max(p.reserved_most, static_cast<std::size_t>(reserved_high));
  std::uint64_t reset = 0;   // the high-water marks start again from what is in use and reserved now
  ORBIS_CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &reset));
  ORBIS_CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReservedMemHigh, &reset));
  p.find(name);
  p.current = name;
  p.current_start = static_cast<std::size_t>(used);
}

// The most the pool has reserved since the first pool_phase() (the marks reset its own
// high-water mark): the device memory the steps took at their peak, holes included.
inline std::size_t pool_reserved_most() {
  std::uint64_t high = 0;
  ORBIS_CUDA_CHECK(cudaMemPoolGetAttribute(device_pool(), cudaMemPoolAttrReservedMemHigh, &high));
  return std::max(PoolPhases::get().reserved_most, static_cast<std::size_t>(high));
}

// After a computation beside the steps (an output, the energy check): the pool gives back to
// the driver what it reserved beyond `reserved` (what it held for the steps before), and its
// high-water mark starts again from there, so that pool_reserved_most() stays the steps'.
inline void trim_pool_to(std::size_t reserved) {
  cudaMemPool_t pool = device_pool();
  ORBIS_CUDA_CHECK(cudaMemPoolTrimTo(pool, reserved));
  std::uint64_t reset = 0;
  ORBIS_CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReservedMemHigh, &reset));
}

// "domain update 2.10 GiB (1.35 held when it began; 2.20 reserved), PM 1.90 GiB (...), ...":
// the phases that took memory of their own, in the order they first ran, and what the pool
// took from the device meanwhile (more where freed arrays left holes that larger ones did
// not fit).
inline std::string pool_phases_summary() {
  const auto gib = [](std::size_t b) { return static_cast<double>(b) / (1024.0 * 1024.0 * 1024.0); };
  std::string s;
  for (const PoolPhases::Phase& p : PoolPhases::get().phases) {
    if (p.most == 0) continue;
    s += fmt::format("{}{} {:.2f} GiB ({:.2f} held when it began; {:.2f} reserved)", s.empty() ? "" : ", ", p.name,
                     gib(p.most), gib(p.at_start), gib(p.reserved));
  }
  return s;
}

}  // namespace orbis::gpu
