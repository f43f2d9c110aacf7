// Test-only friends-of-friends labels (for each particle the smallest index of its group, the
// form StepEngine::fof_labels gives): from the host linker (analysis/fof.hpp, whose decisions
// the device's must equal bit for bit) and from a brute-force O(N^2) search (independent of
// any grid); and the first difference between two halo catalogues.
#pragma once
#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "analysis/fof.hpp"
#include "core/vec3.hpp"
#include "io/catalogue.hpp"

namespace orbis::testing {

// The host linker's groups as labels.
inline std::vector<std::uint32_t> host_fof_labels(const std::vector<Vec3d>& pos, double box, double link) {
  const fof::CellGrid grid(pos, box, link);
  fof::DisjointSets sets(grid.size());
  fof::link_particles(grid, pos, sets);
  sets.flatten();
  const auto& order = grid.order();
  std::vector<std::uint32_t> smallest(pos.size(), std::numeric_limits<std::uint32_t>::max());   // by root slot
  for (std::size_t s = 0; s < grid.size(); ++s) {
    const std::uint32_t r = sets.root(static_cast<std::uint32_t>(s));
    smallest[r] = std::min(smallest[r], order[s]);
  }
  std::vector<std::uint32_t> label(pos.size());
  for (std::size_t s = 0; s < grid.size(); ++s) label[order[s]] = smallest[sets.root(static_cast<std::uint32_t>(s))];
  return label;
}

// Components of all pairs with minimum-image separation <= link (breadth-first search from
// each unlabelled particle in index order, so the seed is the smallest index).
inline std::vector<std::uint32_t> brute_force_labels(const std::vector<Vec3d>& pos, double box, double link) {
  const std::size_t n = pos.size();
  constexpr std::uint32_t none = std::numeric_limits<std::uint32_t>::max();
  std::vector<std::uint32_t> label(n, none), queue;
  for (std::size_t seed = 0; seed < n; ++seed) {
    if (label[seed] != none) continue;
    label[seed] = static_cast<std::uint32_t>(seed);
    queue.assign(1, static_cast<std::uint32_t>(seed));
    for (std::size_t head = 0; head < queue.size(); ++head) {
      const Vec3d& a = pos[queue[head]];
      for (std::size_t j = 0; j < n; ++j) {
        if (label[j] != none) continue;
        double d2 = 0;
        for (int d = 0; d < 3; ++d) {
          const double dx = periodic_wrap_delta(a[d] - pos[j][d], box);
          d2 += dx * dx;
        }
        if (d2 <= link * link) {
          label[j] = static_cast<std::uint32_t>(seed);
          queue.push_back(static_cast<std::uint32_t>(j));
        }
      }
    }
  }
  return label;
}

// Groups of >= min_size members among the labels.
inline std::size_t count_groups(const std::vector<std::uint32_t>& label, std::size_t min_size) {
  std::vector<std::uint32_t> size(label.size(), 0);
  for (std::uint32_t l : label) ++size[l];
  return static_cast<std::size_t>(
      std::count_if(size.begin(), size.end(), [&](std::uint32_t s) { return s >= min_size; }));
}

// "" when the catalogues are the same in every header field and column, bit for bit; else
// the first difference.
inline std::string catalogue_difference(const GroupCatalogue& a, const GroupCatalogue& b) {
  if (a.box_mpc_h != b.box_mpc_h || a.a != b.a || a.omega_m != b.omega_m || a.omega_lambda != b.omega_lambda ||
      a.h != b.h || a.particle_mass != b.particle_mass || a.num_particles != b.num_particles ||
      a.linking_length_mpc_h != b.linking_length_mpc_h ||
      a.linking_length_over_spacing != b.linking_length_over_spacing || a.min_members != b.min_members ||
      a.softening_mpc_h != b.softening_mpc_h)
    return "header";
  if (a.size() != b.size()) return fmt::format("{} groups vs {}", a.size(), b.size());
  if (a.len != b.len) return "len";
  if (a.offset != b.offset) return "offset";
  if (a.ids != b.ids) return "ids";
  if (a.mass != b.mass) return "mass";
  if (a.min_pot_id != b.min_pot_id) return "min_pot_id";
  if (a.vel_disp != b.vel_disp) return "vel_disp";
  if (a.m_crit200 != b.m_crit200 || a.r_crit200 != b.r_crit200) return "crit200";
  if (a.m_mean200 != b.m_mean200 || a.r_mean200 != b.r_mean200) return "mean200";
  for (std::size_t g = 0; g < a.size(); ++g)
    for (int d = 0; d < 3; ++d) {
      if (a.pos[g][d] != b.pos[g][d]) return fmt::format("pos of group {}", g);
      if (a.cm[g][d] != b.cm[g][d]) return fmt::format("cm of group {}", g);
      if (a.vel_pec[g][d] != b.vel_pec[g][d]) return fmt::format("vel_pec of group {}", g);
    }
  return "";
}

}  // namespace orbis::testing
