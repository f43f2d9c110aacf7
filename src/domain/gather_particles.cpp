#include "domain/gather_particles.hpp"

#include <algorithm>
#include <cstdint>

#include "core/error.hpp"

namespace orbis {
namespace {

struct Record {
  Vec3d pos, mom, value;
  std::uint64_t id;
  std::uint64_t time_bin;   // a whole word: no uninitialised padding travels
};

}  // namespace

GatheredParticles gather_particles(const Particles& local, const std::vector<Vec3d>& values, const Comm& comm,
                                   int root) {
  const std::size_t n = local.size();
  if (!values.empty() && values.size() != n) fail("internal: {} values for {} particles", values.size(), n);
  const bool with_values = comm.any(!values.empty());
  std::vector<Record> mine(n);
  for (std::size_t i = 0; i < n; ++i)
    mine[i] = Record{local.pos[i], local.mom[i], values.empty() ? Vec3d{} : values[i], local.id[i],
                     local.time_bin.empty() ? 0u : local.time_bin[i]};
  std::vector<Record> all = comm.gatherv(mine, root);
  std::sort(all.begin(), all.end(), [](const Record& a, const Record& b) { return a.id < b.id; });
  GatheredParticles out;
  out.particles.mass = local.mass;
  out.particles.resize(all.size());
  if (with_values) out.values.resize(all.size());
  for (std::size_t i = 0; i < all.size(); ++i) {
    out.particles.pos[i] = all[i].pos;
    out.particles.mom[i] = all[i].mom;
    out.particles.id[i] = all[i].id;
    out.particles.time_bin[i] = static_cast<std::uint8_t>(all[i].time_bin);
    if (with_values) out.values[i] = all[i].value;
  }
  return out;
}

}  // namespace orbis
