#include "analysis/halo_catalogue.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "analysis/fof_ranks.hpp"
#include "analysis/halo_members_ranks.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "core/params.hpp"
#include "core/timer.hpp"
#include "cosmology/cosmology.hpp"
#include "io/atomic_file.hpp"

namespace orbis::halo {
namespace {

constexpr double kBinWidthDex = 0.2;
constexpr double kMassUnitMsunH = 1e10;   // catalogue masses are in 1e10 Msun/h

// The run's Plummer-equivalent softening, as its short-range forces use it (fmm/short_range.cpp).
double softening(const Params& params, double box_mpc_h) {
  return params.get_real("gravity.softening_over_spacing") * box_mpc_h /
         static_cast<double>(params.get_int("box.particles_per_side"));
}

// The catalogue of groups (lengths and offsets in `groups`) whose members' IDs are `ids`, in
// member order.
GroupCatalogue catalogue_of(double particle_mass, std::uint64_t num_particles, std::vector<std::uint64_t> ids,
                            const fof::FofGroups& groups, const std::vector<HaloProperties>& haloes, double box_mpc_h,
                            double a, const fof::FofConfig& config, const Params& params) {
  if (haloes.size() != groups.size())
    fail("halo_catalogue.cpp: {} property records for {} groups", haloes.size(), groups.size());
  GroupCatalogue c;
  c.box_mpc_h = box_mpc_h;
  c.a = a;
  c.omega_m = cosmology_params(params).omega_m;
  c.omega_lambda = cosmology_params(params).omega_lambda;
  c.h = params.get_real("cosmology.h");
  c.particle_mass = particle_mass;
  c.num_particles = num_particles;
  c.linking_length_mpc_h = groups.link_mpc_h;
  c.linking_length_over_spacing = config.linking_length_over_spacing;
  c.min_members = config.min_members;
  c.softening_mpc_h = softening(params, box_mpc_h);
  const std::size_t n = groups.size();
  c.len = groups.length;
  c.offset = groups.offset;
  c.mass.resize(n);
  c.pos.resize(n);
  c.vel_pec.resize(n);
  c.vel_disp.resize(n);
  c.cm.resize(n);
  c.min_pot_id.resize(n);
  c.m_crit200.resize(n);
  c.r_crit200.resize(n);
  c.m_mean200.resize(n);
  c.r_mean200.resize(n);
  for (std::size_t g = 0; g < n; ++g) {
    const HaloProperties& h = haloes[g];
    c.mass[g] = h.mass;
    c.pos[g] = h.pos;
    c.vel_pec[g] = h.vel_pec;
    c.vel_disp[g] = h.vel_disp;
    c.cm[g] = h.cm;
    c.min_pot_id[g] = h.min_pot_id;
    c.m_crit200[g] = h.m_crit200;
    c.r_crit200[g] = h.r_crit200;
    c.m_mean200[g] = h.m_mean200;
    c.r_mean200[g] = h.r_mean200;
  }
  c.ids = std::move(ids);
  return c;
}

}  // namespace

GroupCatalogue make_catalogue(const Particles& particles, const fof::FofGroups& groups,
                              const std::vector<HaloProperties>& haloes, double box_mpc_h, double a,
                              const fof::FofConfig& config, const Params& params) {
  std::vector<std::uint64_t> ids(groups.members.size());
  for (std::size_t k = 0; k < ids.size(); ++k) ids[k] = particles.id[groups.members[k]];
  return catalogue_of(particles.mass, particles.size(), std::move(ids), groups, haloes, box_mpc_h, a, config, params);
}

GroupCatalogue find_haloes(const Particles& particles, double box_mpc_h, double a, const Params& params) {
  Stopwatch watch;
  const fof::FofConfig config = fof::config_from_params(params);
  const double link = fof::linking_length(particles.size(), box_mpc_h, config.linking_length_over_spacing);
  const fof::CellGrid grid(particles.pos, box_mpc_h, link);
  const fof::FofGroups groups = fof::find_groups(grid, particles, config.min_members);
  const double t_fof = watch.seconds();
  const Cosmology cosmo = Cosmology::from_params(params);
  const auto haloes = compute_properties(grid, particles, groups, cosmo, a, softening(params, box_mpc_h));
  log::info("haloes: FoF {:.2f} s, properties {:.2f} s", t_fof, watch.seconds() - t_fof);
  return make_catalogue(particles, groups, haloes, box_mpc_h, a, config, params);
}

GroupCatalogue find_haloes_from_labels(const Particles& particles, const std::vector<std::uint32_t>& label,
                                       double box_mpc_h, double a, const Params& params) {
  Stopwatch watch;
  const fof::FofConfig config = fof::config_from_params(params);
  const double link = fof::linking_length(particles.size(), box_mpc_h, config.linking_length_over_spacing);
  if (label.size() != particles.size())
    fail("internal: halo_catalogue.cpp: {} group labels for {} particles", label.size(), particles.size());
  const fof::FofGroups groups = fof::groups_from_labels(label, particles.id, config.min_members, link);
  const fof::CellGrid grid(particles.pos, box_mpc_h, link);
  const double t_groups = watch.seconds();
  const Cosmology cosmo = Cosmology::from_params(params);
  const auto haloes = compute_properties(grid, particles, groups, cosmo, a, softening(params, box_mpc_h));
  log::info("haloes: {} groups of >= {} particles from the step engine's links; groups and grid {:.2f} s, "
            "properties {:.2f} s", groups.size(), config.min_members, t_groups, watch.seconds() - t_groups);
  return make_catalogue(particles, groups, haloes, box_mpc_h, a, config, params);
}

namespace {

// One rank's answer to a batch of overdensity spheres: the squared distances of its particles
// in each, concatenated, and how many per sphere.
void local_distances(const fof::CellGrid& grid, const Particles& local, const std::vector<Vec3d>& centres,
                     const std::vector<double>& radii, std::vector<double>& flat, std::vector<std::uint64_t>& counts) {
  std::vector<std::vector<double>> r2(centres.size());
#pragma omp parallel for schedule(dynamic, 8)
  for (std::size_t k = 0; k < centres.size(); ++k) sphere_distances(grid, local.pos, centres[k], radii[k], r2[k]);
  counts.resize(centres.size());
  std::vector<std::size_t> first(centres.size() + 1, 0);
  for (std::size_t k = 0; k < centres.size(); ++k) {
    counts[k] = r2[k].size();
    first[k + 1] = first[k] + counts[k];
  }
  flat.resize(first.back());
#pragma omp parallel for schedule(dynamic, 64)
  for (std::size_t k = 0; k < centres.size(); ++k) std::copy(r2[k].begin(), r2[k].end(), flat.begin() + first[k]);
}

// Root: every rank's answer (`all`, ranks in order; counts[rank * spheres + k]) by sphere.
void distances_by_sphere(const std::vector<double>& all, const std::vector<std::uint64_t>& counts, int ranks,
                         std::size_t spheres, std::vector<std::vector<double>>& r2) {
  // Where rank r's answer for sphere k starts in `all`.
  std::vector<std::size_t> first(counts.size() + 1, 0);
  for (std::size_t k = 0; k < counts.size(); ++k) first[k + 1] = first[k] + counts[k];
  r2.assign(spheres, {});
#pragma omp parallel for schedule(dynamic, 64)
  for (std::size_t k = 0; k < spheres; ++k) {
    std::size_t size = 0;
    for (int rank = 0; rank < ranks; ++rank) size += counts[static_cast<std::size_t>(rank) * spheres + k];
    r2[k].reserve(size);
    for (int rank = 0; rank < ranks; ++rank) {
      const std::size_t at = static_cast<std::size_t>(rank) * spheres + k;
      r2[k].insert(r2[k].end(), all.begin() + static_cast<std::ptrdiff_t>(first[at]),
                   all.begin() + static_cast<std::ptrdiff_t>(first[at + 1]));
    }
  }
}

}  // namespace

GroupCatalogue find_haloes_across_ranks(const Particles& local, double box_mpc_h, double a, const Params& params,
                                        const Comm& comm, const fof::LocalLinks* links) {
  if (comm.size() == 1) {
    if (links && !links->label.empty()) return find_haloes_from_labels(local, links->label, box_mpc_h, a, params);
    return find_haloes(local, box_mpc_h, a, params);
  }
  if (!(a > 0)) fail("halo_catalogue.cpp: scale factor a = {} must be positive", a);
  Stopwatch watch;
  const fof::FofConfig config = fof::config_from_params(params);
  const std::uint64_t total = comm.sum<std::uint64_t>(local.size());
  const double link = fof::linking_length(total, box_mpc_h, config.linking_length_over_spacing);
  if (links && (links->link_mpc_h != link || links->box_mpc_h != box_mpc_h))
    fail("internal: halo_catalogue.cpp: links made for box {} and linking length {}, the catalogue's are {} and {}",
         links->box_mpc_h, links->link_mpc_h, box_mpc_h, link);
  const fof::RankGroups share =
      links ? fof::merge_groups(local, *links, config.min_members, comm)
            : fof::merge_groups(local, fof::link_locally(local, box_mpc_h, link, comm), config.min_members, comm);
  const double t_fof = watch.seconds();
  MemberHaloes found =
      member_haloes_across_ranks(local, share, box_mpc_h, a, softening(params, box_mpc_h), link, comm);
  const double t_members = watch.seconds() - t_fof;
  const fof::CellGrid local_grid(local.pos, box_mpc_h, link);   // for the overdensity spheres
  const double t_grid = watch.seconds() - t_fof - t_members;
  std::vector<double> flat;
  std::vector<std::uint64_t> counts;
  // Each round: root broadcasts the spheres (none: the end), every rank answers for its own
  // particles, root collects the answers by sphere.
  if (!comm.is_root()) {
    for (;;) {
      std::vector<Vec3d> centres;
      std::vector<double> radii;
      comm.broadcast(centres);
      if (centres.empty()) return GroupCatalogue{};
      comm.broadcast(radii);
      local_distances(local_grid, local, centres, radii, flat, counts);
      comm.gatherv(counts);
      comm.gatherv(flat);
    }
  }
  const Cosmology cosmo = Cosmology::from_params(params);
  overdensity_masses(found.haloes, box_mpc_h, found.particle_mass, cosmo, a,
                     [&](const std::vector<Vec3d>& centres, const std::vector<double>& radii,
                         std::vector<std::vector<double>>& r2) {
                       std::vector<Vec3d> c(centres);
                       std::vector<double> r(radii);
                       comm.broadcast(c);
                       comm.broadcast(r);
                       local_distances(local_grid, local, c, r, flat, counts);
                       const std::vector<std::uint64_t> all_counts = comm.gatherv(counts);
                       const std::vector<double> all = comm.gatherv(flat);
                       distances_by_sphere(all, all_counts, comm.size(), c.size(), r2);
                     });
  std::vector<Vec3d> end;
  comm.broadcast(end);
  const std::size_t grouped = found.ids.size();
  log::info("fof: {} groups of >= {} particles hold {} of {} particles ({:.1f}%); linking length {:.5g} Mpc/h; "
            "largest group {} particles; {} ranks, {} label rounds",
            found.groups.size(), config.min_members, grouped, total,
            100.0 * static_cast<double>(grouped) / static_cast<double>(std::max<std::uint64_t>(total, 1)), link,
            found.groups.size() ? found.groups.length[0] : 0, comm.size(), share.merge_rounds);
  log::info("haloes: FoF {:.2f} s (labels merged {:.2f} s, members ordered {:.2f} s), member properties {:.2f} s "
            "(each group's on one rank; {} groups moved for it), grid {:.2f} s, overdensity masses {:.2f} s ({} "
            "ranks)", t_fof, share.merge_seconds, share.share_seconds, t_members, found.moved, t_grid,
            watch.seconds() - t_fof - t_members - t_grid, comm.size());
  return catalogue_of(found.particle_mass, total, std::move(found.ids), found.groups, found.haloes, box_mpc_h, a,
                      config, params);
}

std::string catalogue_file_name(int output_number) { return fmt::format("fof_tab_{:03d}.hdf5", output_number); }

std::string mass_function_path(const std::string& catalogue_path) {
  const std::string ext = ".hdf5";
  std::string stem = catalogue_path;
  if (stem.size() > ext.size() && stem.compare(stem.size() - ext.size(), ext.size(), ext) == 0)
    stem.resize(stem.size() - ext.size());
  return stem + "_massfn.txt";
}

std::string mass_function_text(const GroupCatalogue& c) {
  const double volume = c.box_mpc_h * c.box_mpc_h * c.box_mpc_h;   // (Mpc/h)^3
  const double m_min = static_cast<double>(std::max<std::uint64_t>(c.min_members, 1)) * c.particle_mass * kMassUnitMsunH;
  const double lo = std::log10(m_min);
  auto bin_of = [&](double mass) {
    return static_cast<long>(std::floor((std::log10(mass * kMassUnitMsunH) - lo) / kBinWidthDex));
  };
  long bins = 0;
  for (std::size_t g = 0; g < c.size(); ++g) {
    bins = std::max(bins, bin_of(c.mass[g]) + 1);
    if (c.m_mean200[g] > 0) bins = std::max(bins, bin_of(c.m_mean200[g]) + 1);
  }
  std::vector<long> n_fof(bins, 0), n_200m(bins, 0);
  for (std::size_t g = 0; g < c.size(); ++g) {
    const long b = bin_of(c.mass[g]);
    if (b >= 0) ++n_fof[b];
    if (c.m_mean200[g] > 0) {
      const long b2 = bin_of(c.m_mean200[g]);
      if (b2 >= 0) ++n_200m[b2];
    }
  }
  std::string out = fmt::format(
      "# orbis halo mass function: a = {:.6g}, z = {:.6g}, box = {:.6g} Mpc/h, {} groups of >= {} "
      "particles (m_p = {:.6e} Msun/h), b = {:.4g}\n"
      "# omega_m = {:.6g}, omega_lambda = {:.6g}, h = {:.6g}\n"
      "# FoF: GroupMass; 200m: Group_M_Mean200 (incomplete in the lowest bins, where haloes near the "
      "FoF limit have smaller M200m). dn/dlog10M in (h/Mpc)^3, errors Poisson sqrt(N)/(V dlog10M)\n"
      "# log10M_lo log10M_hi log10M_mid [Msun/h]  N_fof  dndlog10M_fof  err_fof  N_200m  "
      "dndlog10M_200m  err_200m\n",
      c.a, c.redshift(), c.box_mpc_h, c.size(), c.min_members, c.particle_mass * kMassUnitMsunH,
      c.linking_length_over_spacing, c.omega_m, c.omega_lambda, c.h);
  const double per = 1.0 / (volume * kBinWidthDex);
  for (long b = 0; b < bins; ++b) {
    const double l0 = lo + b * kBinWidthDex;
    out += fmt::format("{:.4f} {:.4f} {:.4f} {} {:.6e} {:.6e} {} {:.6e} {:.6e}\n", l0, l0 + kBinWidthDex,
                       l0 + 0.5 * kBinWidthDex, n_fof[b], n_fof[b] * per, std::sqrt(n_fof[b]) * per,
                       n_200m[b], n_200m[b] * per, std::sqrt(n_200m[b]) * per);
  }
  return out;
}

void write_halo_outputs(const std::string& catalogue_path, const GroupCatalogue& catalogue,
                        const Params& params) {
  write_catalogue(catalogue_path, catalogue, params);
  write_text_atomically(mass_function_path(catalogue_path), mass_function_text(catalogue));
  log::info("haloes: wrote {} groups to '{}' and the mass function to '{}'", catalogue.size(),
            catalogue_path, mass_function_path(catalogue_path));
}

}  // namespace orbis::halo
