#include "analysis/halo_properties.hpp"

#include <algorithm>
#include <cmath>

#include "analysis/halo_potential.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "core/timer.hpp"
#include "core/units.hpp"
#include "cosmology/cosmology.hpp"

namespace orbis::halo {
namespace {

constexpr double kFourThirdsPi = 4.0 / 3.0 * units::pi;

Vec3d wrap_delta(const Vec3d& d, double box) {
  return {periodic_wrap_delta(d.x, box), periodic_wrap_delta(d.y, box), periodic_wrap_delta(d.z, box)};
}
Vec3d wrap_position(const Vec3d& x, double box) {
  return {periodic_wrap_position(x.x, box), periodic_wrap_position(x.y, box), periodic_wrap_position(x.z, box)};
}

}  // namespace

void sphere_distances(const fof::CellGrid& grid, const std::vector<Vec3d>& pos, const Vec3d& centre, double radius,
                      std::vector<double>& r2) {
  r2.clear();
  const std::int64_t nc = grid.coarse_side();
  const double lc = grid.coarse_length(), box = grid.box(), rad2 = radius * radius;
  std::int64_t lo[3], hi[3];
  for (int d = 0; d < 3; ++d) {
    lo[d] = static_cast<std::int64_t>(std::floor((centre[d] - radius) / lc));
    hi[d] = static_cast<std::int64_t>(std::floor((centre[d] + radius) / lc));
    if (hi[d] - lo[d] + 1 >= nc) lo[d] = 0, hi[d] = nc - 1;   // the whole axis, each cell once
  }
  const auto& order = grid.order();
  for (std::int64_t x = lo[0]; x <= hi[0]; ++x)
    for (std::int64_t y = lo[1]; y <= hi[1]; ++y)
      for (std::int64_t z = lo[2]; z <= hi[2]; ++z) {
        const std::size_t c = grid.coarse_index(x, y, z);
        for (std::uint32_t s = grid.cell_begin(c); s < grid.cell_end(c); ++s) {
          const double d2 = norm2(wrap_delta(pos[order[s]] - centre, box));
          if (d2 <= rad2) r2.push_back(d2);
        }
      }
}

double rho_crit_comoving(const Cosmology& cosmo, double a) {
  const double e = cosmo.E(a);
  return units::rho_crit0 * e * e * a * a * a;
}

double rho_mean_comoving(const Cosmology& cosmo) { return cosmo.params().omega_m * units::rho_crit0; }

bool spherical_overdensity(std::vector<double>& r2, double search_radius, double particle_mass,
                           double rho_threshold, double& mass, double& radius) {
  std::sort(r2.begin(), r2.end());
  const double per_volume = rho_threshold * kFourThirdsPi;
  // Outermost k (1-based) whose enclosed density k m / ((4/3) pi r_k^3) reaches the threshold.
  std::size_t inside = 0;
  for (std::size_t k = r2.size(); k > 0; --k) {
    const double r = std::sqrt(r2[k - 1]);
    if (static_cast<double>(k) * particle_mass >= per_volume * r * r * r) {
      inside = k;
      break;
    }
  }
  mass = static_cast<double>(inside) * particle_mass;
  radius = std::cbrt(mass / per_volume);
  // All particles inside the search sphere still above the threshold and R beyond it: the
  // crossing may lie further out.
  return inside < r2.size() || radius <= search_radius;
}

std::vector<HaloProperties> member_properties(const Particles& p, const fof::FofGroups& groups, double box,
                                              double a, double softening) {
  if (!(a > 0)) fail("halo_properties.cpp: scale factor a = {} must be positive", a);
  const double m = p.mass;
  Stopwatch watch;
  std::vector<HaloProperties> out(groups.size());
  std::vector<std::size_t> large;   // groups whose potential minimum runs threads over members
  for (std::size_t g = 0; g < groups.size(); ++g)
    if (groups.length[g] > kPotentialDirectMax) large.push_back(g);
  auto centre = [&](std::size_t g) {
    const std::uint32_t* members = groups.members.data() + groups.offset[g];
    const PotentialMinimum best = potential_minimum(p.pos, p.id, members, groups.length[g], box, softening);
    out[g].pos = p.pos[members[best.member]];
    out[g].min_pot_id = p.id[members[best.member]];
  };
#pragma omp parallel for schedule(dynamic, 8)
  for (std::size_t g = 0; g < groups.size(); ++g) {
    HaloProperties& h = out[g];
    const std::uint32_t* members = groups.members.data() + groups.offset[g];
    h.len = groups.length[g];
    h.mass = h.len * m;
    const Vec3d ref = p.pos[members[0]];
    Vec3d dx{}, v{};
    for (std::uint32_t k = 0; k < h.len; ++k) {
      dx += wrap_delta(p.pos[members[k]] - ref, box);
      v += p.mom[members[k]];
    }
    const double inv_n = 1.0 / h.len;
    h.cm = wrap_position(ref + dx * inv_n, box);
    h.vel_pec = v * (inv_n / a);
    double sum2 = 0;
    for (std::uint32_t k = 0; k < h.len; ++k) sum2 += norm2(p.mom[members[k]] * (1.0 / a) - h.vel_pec);
    h.vel_disp = std::sqrt(sum2 * inv_n / 3.0);
    if (h.len <= kPotentialDirectMax) centre(g);
  }
  const double t_small = watch.seconds();
  for (std::size_t g : large) centre(g);
  log::info("haloes: member properties and potential minima {:.2f} s, of which {:.2f} s for the {} groups of > {} "
            "members (octree; largest {})", watch.seconds(), watch.seconds() - t_small, large.size(),
            kPotentialDirectMax, groups.size() ? groups.length[0] : 0);
  return out;
}

void overdensity_masses(std::vector<HaloProperties>& haloes, double box, double m, const Cosmology& cosmo, double a,
                        const SphereQuery& query) {
  const double thresholds[2] = {kOverdensity * rho_crit_comoving(cosmo, a),
                                kOverdensity * rho_mean_comoving(cosmo)};
  // Search radius per threshold: 1.25 x the radius that would hold the FoF mass at that
  // density (FoF masses at b = 0.2 exceed M200m, so this almost always suffices), doubled
  // while the enclosed density at the search radius is still above the threshold. One
  // query at the larger (mean-density) radius serves both thresholds. Haloes go in batches,
  // which bounds the distances held at once.
  constexpr std::size_t kBatch = 4096;
  struct Search {
    double radius[2];
    bool done[2] = {false, false};
  };
  bool capped = false;
  for (std::size_t b0 = 0; b0 < haloes.size(); b0 += kBatch) {
    const std::size_t b1 = std::min(haloes.size(), b0 + kBatch);
    std::vector<Search> search(b1 - b0);
    std::vector<std::size_t> open;
    for (std::size_t g = b0; g < b1; ++g) {
      for (int t = 0; t < 2; ++t)
        search[g - b0].radius[t] = 1.25 * std::cbrt(haloes[g].mass / (thresholds[t] * kFourThirdsPi));
      open.push_back(g);
    }
    while (!open.empty()) {
      std::vector<Vec3d> centres(open.size());
      std::vector<double> radii(open.size());
      std::vector<char> last(open.size());
      for (std::size_t k = 0; k < open.size(); ++k) {
        Search& s = search[open[k] - b0];
        last[k] = std::max(s.radius[0], s.radius[1]) >= 0.5 * box;
        for (double& r : s.radius) r = std::min(r, 0.5 * box);
        centres[k] = haloes[open[k]].pos;
        radii[k] = std::max(s.radius[0], s.radius[1]);
      }
      std::vector<std::vector<double>> r2;
      query(centres, radii, r2);
#pragma omp parallel reduction(|| : capped)
      {
        std::vector<double> inside;
#pragma omp for schedule(dynamic, 8)
        for (std::size_t k = 0; k < open.size(); ++k) {
          HaloProperties& h = haloes[open[k]];
          Search& s = search[open[k] - b0];
          double* results[2][2] = {{&h.m_crit200, &h.r_crit200}, {&h.m_mean200, &h.r_mean200}};
          for (int t = 0; t < 2; ++t) {
            if (s.done[t]) continue;
            inside.clear();
            const double limit = s.radius[t] * s.radius[t];
            for (double v : r2[k])
              if (v <= limit) inside.push_back(v);
            const bool found = spherical_overdensity(inside, s.radius[t], m, thresholds[t], *results[t][0], *results[t][1]);
            if (!found && last[k]) capped = true;
            s.done[t] = found || last[k];
            if (!s.done[t]) s.radius[t] *= 2.0;
          }
        }
      }
      std::vector<std::size_t> still;
      for (std::size_t g : open)
        if (!(search[g - b0].done[0] && search[g - b0].done[1])) still.push_back(g);
      open.swap(still);
    }
  }
  if (capped)
    log::warn("halo properties: an overdensity radius reached half the box; its M200 is a lower bound");
}

std::vector<HaloProperties> compute_properties(const fof::CellGrid& grid, const Particles& p,
                                               const fof::FofGroups& groups, const Cosmology& cosmo,
                                               double a, double softening) {
  if (grid.size() != p.size())
    fail("halo_properties.cpp: the grid indexes {} particles, the set has {}", grid.size(), p.size());
  std::vector<HaloProperties> out = member_properties(p, groups, grid.box(), a, softening);
  overdensity_masses(out, grid.box(), p.mass, cosmo, a,
                     [&](const std::vector<Vec3d>& centres, const std::vector<double>& radii,
                         std::vector<std::vector<double>>& r2) {
                       r2.resize(centres.size());
#pragma omp parallel for schedule(dynamic, 8)
                       for (std::size_t k = 0; k < centres.size(); ++k)
                         sphere_distances(grid, p.pos, centres[k], radii[k], r2[k]);
                     });
  return out;
}

}  // namespace orbis::halo
