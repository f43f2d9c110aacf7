#include "integrate/run_memory.hpp"

#include "core/error.hpp"
#include "core/host_memory.hpp"
#include "core/params.hpp"
#include "io/output_guard.hpp"

namespace orbis {

namespace {

// Positions, momenta (3 doubles each), IDs, time bins; long-range, short-range and total
// accelerations (3 doubles each). An isolated system's particles may also carry a mass (a
// double) and a type (a byte) each (core/particles.hpp): counted whether they do or not.
constexpr double kBytesPerParticle = 24 + 24 + 8 + 1 + 3 * 24;
constexpr double kIsolatedExtraBytes = 8 + 1;

bool isolated(const Params& params) { return !params.has("box.particles_per_side"); }

double bytes_per_particle(const Params& params) {
  return kBytesPerParticle + (isolated(params) ? kIsolatedExtraBytes : 0.0);
}

// An isolated system has no mesh (its parameters have no [gravity] pm_grid_side).
double mesh_bytes(const Params& params) {
  if (!params.has("gravity.pm_grid_side")) return 0;
  std::int64_t grid = params.get_int("gravity.pm_grid_side");
  if (grid == 0) grid = 2 * params.get_int("box.particles_per_side");
  const double cells = static_cast<double>(grid) * static_cast<double>(grid) * static_cast<double>(grid);
  const double real_bytes = params.get_string("gravity.pm_mesh_precision") == "float" ? 4 : 8;
  return 2 * cells * real_bytes;   // the density mesh and its transform
}

}  // namespace

double run_host_bytes(const Params& params, std::uint64_t particles) {
  return static_cast<double>(particles) * bytes_per_particle(params) + mesh_bytes(params);
}

void check_host_memory(const Params& params, std::uint64_t particles) {
  const double needed = run_host_bytes(params, particles);
  const HostMemoryAvailable available = available_host_memory();
  if (needed <= static_cast<double>(available.bytes)) return;
  fail("the run needs at least {} of host memory ({} particles at {} bytes each, and {} for the PM mesh), but "
       "{} is available ({}): lower {}, or run on a larger machine",
       format_bytes(needed), particles, bytes_per_particle(params), format_bytes(mesh_bytes(params)),
       format_bytes(static_cast<double>(available.bytes)), available.source,
       !isolated(params)           ? params.describe("box.particles_per_side") + " or " + params.describe("gravity.pm_grid_side")
       : params.has("ic.particles") ? params.describe("ic.particles")
                                    : "the particles of " + params.describe("ic.file"));
}

}  // namespace orbis
