// The halo catalogue over MPI ranks (issue #29): friends-of-friends across ranks, the merge
// of the groups, their properties and the catalogue on root (halo::find_haloes_across_ranks),
// on bench_fof's clustered set (Plummer haloes, ~45% of the particles, in a uniform
// background; IDs shuffled, as a run's halo members' are scattered over the ID range).
// The particles are dealt out as a run deals them: domains=1 through RankDomains (runs of
// the global ORB tree's top nodes, each rank's particles in subtree order), domains=0 in x
// slabs of equal width. Prints on rank 0 the time of the ghost import alone (a run's output
// makes it on the host, then the CUDA engine links on its GPU), of the import and the host
// linking, of the catalogue from those links (what a run's output thread does: the merge,
// the properties and the overdensity masses; its phases are logged by halo_catalogue.cpp),
// and with check=1 the one-rank catalogue of all the particles for comparison, which must
// be the same bit for bit.
// With domains=1, rank 0 then reports `skew` times the others' work per particle and the
// domains are cut again where that balances: inside a subtree, as a run's measured work cuts
// them (a domain's extent then reaches into the other's).
// in_haloes and max_halo: the fraction of the particles in haloes and the largest halo's
// members (bench_fof's 0.45 and 2e5 by default; their potential minima dominate the catalogue's
// time; 256^3 in 1 Gpc/h, the run of issue #29, has ~0.1 in groups of up to a few thousand).
//   mpirun -np 2 bench_fof_ranks [particles_per_side=128] [domains=1] [check=1] [box=100] [skew=1.3]
//                                [in_haloes=0.45] [max_halo=2e5]
// OMP_NUM_THREADS sets the threads of each rank.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>

#include "analysis/fof_ranks.hpp"
#include "analysis/halo_catalogue.hpp"
#include "core/comm.hpp"
#include "core/log.hpp"
#include "core/parallel.hpp"
#include "core/params.hpp"
#include "core/timer.hpp"
#include "domain/rank_domains.hpp"
#include "support/fof_labels.hpp"
#include "support/fof_samples.hpp"
#include "tree/orb_tree.hpp"

using namespace orbis;

namespace {

// The clustered set with shuffled IDs and momenta that vary from particle to particle.
Particles bench_set(int side, double box, double in_haloes, double max_halo) {
  std::mt19937_64 rng(2024);
  Particles p = testing::plummer_halo_set(side, box, rng, in_haloes, max_halo);
  std::shuffle(p.id.begin(), p.id.end(), rng);
  for (std::size_t i = 0; i < p.size(); ++i)
    p.mom[i] = {100 * std::sin(0.1 * static_cast<double>(i)), 50 * std::cos(0.3 * static_cast<double>(i)),
                static_cast<double>(i % 7)};
  return p;
}

Particles slab_share(const Particles& all, double box, const Comm& comm) {
  Particles mine;
  mine.mass = all.mass;
  for (std::size_t i = 0; i < all.size(); ++i) {
    const int owner = std::min(comm.size() - 1, static_cast<int>(all.pos[i].x / box * comm.size()));
    if (owner != comm.rank()) continue;
    mine.pos.push_back(all.pos[i]);
    mine.mom.push_back(all.mom[i]);
    mine.id.push_back(all.id[i]);
    mine.time_bin.push_back(0);
  }
  return mine;
}

Particles domain_share(const Particles& all, double box, double skew, const Comm& comm) {
  Particles mine;
  mine.mass = all.mass;
  const auto ranks = static_cast<std::size_t>(comm.size());
  for (std::size_t i = static_cast<std::size_t>(comm.rank()); i < all.size(); i += ranks) {
    mine.pos.push_back(all.pos[i]);
    mine.mom.push_back(all.mom[i]);
    mine.id.push_back(all.id[i]);
    mine.time_bin.push_back(0);
  }
  const int max_leaf = 32;   // the default's
  RankDomains domains(box, max_leaf, top_levels_for(static_cast<std::int64_t>(all.size()), 4096, max_leaf), comm);
  domains.update(mine, 0);
  // Rank 0 reports `skew` times the others' work per particle: the runs are cut again where
  // the work balances, inside a subtree, as a run's measured work moves them.
  if (skew != 1) domains.update(mine, static_cast<double>(mine.size()) * (comm.rank() == 0 ? skew : 1.0));
  return mine;
}

}  // namespace

int main(int argc, char** argv) {
  parallel::init(&argc, &argv);
  {
    const Comm comm = Comm::world();
    log::set_rank(comm.rank(), comm.size());
    const int side = argc > 1 ? std::atoi(argv[1]) : 128;
    const bool by_domains = argc > 2 ? std::atoi(argv[2]) != 0 : true;
    const bool check = argc > 3 ? std::atoi(argv[3]) != 0 : true;
    const double box = argc > 4 ? std::atof(argv[4]) : 100.0;
    const double skew = argc > 5 ? std::atof(argv[5]) : 1.3;
    const double in_haloes = argc > 6 ? std::atof(argv[6]) : 0.45;
    const double max_halo = argc > 7 ? std::atof(argv[7]) : 2e5;
    const double a = 1.0;
    const Params params = Params::parse(fmt::format(R"(
[box]
size_mpc_h = {}
particles_per_side = {}
[cosmology]
omega_m = 0.3
omega_lambda = 0.7
h = 0.7
[analysis]
fof = true
fof_min_members = 32
)", box, side), "bench.toml");

    const Particles all = bench_set(side, box, in_haloes, max_halo);
    const Particles mine = by_domains ? domain_share(all, box, skew, comm) : slab_share(all, box, comm);
    const double link =
        fof::linking_length(all.size(), box, fof::config_from_params(params).linking_length_over_spacing);

    // The ghost import alone (what a run's output does on the host before its GPU links), then
    // the whole first two steps with the host linker.
    comm.barrier();
    Stopwatch watch;
    const fof::Ghosts imported = fof::import_ghosts(mine, box, link, comm);
    const double t_import = comm.max(watch.seconds());
    comm.barrier();
    watch.restart();
    const fof::LocalLinks links = fof::link_locally(mine, box, link, comm);
    const double t_link = comm.max(watch.seconds());
    const std::uint64_t ghosts = comm.sum<std::uint64_t>(links.ghosts.size());

    // The merge and gather alone, then (check=1) the whole catalogue from the same links and
    // the one-rank catalogue.
    comm.barrier();
    watch.restart();
    const fof::GatheredGroups found = fof::gather_groups(mine, links, 32, comm);
    const double t_gather = comm.max(watch.seconds());
    // The catalogue's FoF part: the merge and each rank's share, nothing gathered.
    comm.barrier();
    watch.restart();
    const fof::RankGroups share = fof::merge_groups(mine, links, 32, comm);
    const double t_merge = comm.max(watch.seconds());

    std::string verdict = "not made";
    double t_catalogue = 0, t_one = 0;
    std::size_t haloes = 0;
    if (check) {
      comm.barrier();
      watch.restart();
      const GroupCatalogue got = halo::find_haloes_across_ranks(mine, box, a, params, comm, &links);
      t_catalogue = comm.max(watch.seconds());
      haloes = got.size();
      if (comm.is_root()) {
        watch.restart();
        const GroupCatalogue ref = halo::find_haloes(all, box, a, params);
        t_one = watch.seconds();
        const std::string difference = testing::catalogue_difference(got, ref);
        verdict = difference.empty() ? "identical to one rank's" : "DIFFERS from one rank's: " + difference;
      }
    }
    if (comm.is_root()) {
      std::printf("bench_fof_ranks: %d^3 particles (%.2f in haloes of up to %g), box %g Mpc/h, l = %.4f Mpc/h, %d "
                  "ranks (%s) of %d threads\n", side, in_haloes, max_halo, box, link, comm.size(),
                  by_domains ? fmt::format("RankDomains, skew {}", skew).c_str() : "x slabs", omp_get_max_threads());
      std::printf("  ghosts %llu (%.3f per particle)\n", static_cast<unsigned long long>(ghosts),
                  static_cast<double>(ghosts) / static_cast<double>(all.size()));
      std::printf("  ghost import alone             %7.3f s (%zu ghosts on rank 0)\n", t_import, imported.size());
      std::printf("  ghost import + host linking   %7.3f s\n", t_link);
      std::printf("  merge and gather (%d rounds)   %7.3f s: %zu groups, %zu members\n", found.merge_rounds, t_gather,
                  found.groups.size(), found.members.size());
      std::printf("  merge and shares alone         %7.3f s: %zu group shares on rank 0\n", t_merge,
                  share.groups.size());
      std::printf("  catalogue from the links      %7.3f s (%zu haloes): %s\n", t_catalogue, haloes, verdict.c_str());
      if (check) std::printf("  one-rank catalogue (reference) %7.3f s\n", t_one);
      std::fflush(stdout);
    }
  }
  parallel::finalize();
  return 0;
}
