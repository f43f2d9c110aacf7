// The domain phase of a distributed TreePM run (issue #17): what RankDomains costs a PM step.
// Each rank starts with every ranks-th particle of a clustered set (test support: a displaced
// grid plus two Plummer haloes); the first update builds the top tree and the runs of its
// nodes and migrates about half of the particles. Then PM steps: every particle drifts a
// little (a fixed pseudo-random displacement of up to `drift` Mpc/h), update() builds the top
// tree again, keeps the runs and migrates the particles whose node is another rank's now,
// with_ghosts() chooses the ghost nodes, and `subs` - 1 more with_ghosts() refresh them after
// small drifts (the sub-steps of a PM step). Prints the time of each part on rank 0 (wall;
// collectives' waiting included) and a checksum of the particles' order and the ghosts,
// which must not change when the code gets faster.
//   mpirun -np 2 bench_domains [particles_per_side=128] [box=500] [r_cut=6.6 spacings]
//                              [pm_steps=3] [subs=16] [drift=0.3] [top_node_particles=4096]
//                              [let=0]
// let=1: after the first PM step's ghost choice, what each rank would receive instead as a
// locally essential tree (issue #29, item 3): the rank's forest is walked for its own
// particles (host tree and walk, no P2P), and the ghost leaves that reach P2P (their
// particles, 24 bytes each), the ghost nodes that are M2L sources (WalkNode and p = 4
// multipoles, 96 + 280 bytes) and the other ghost nodes the walk passes through below the
// top depth (WalkNode, 96 bytes) are counted against the whole ghost groups' positions
// (24 bytes a particle). Both are what a refresh moves at every sub-step.
// The domains are runs of the global tree's top nodes of about top_node_particles particles
// (max_leaf 32, the default's; depth top_levels_for(N, ...)); the ghosts whole nodes.
// OMP_NUM_THREADS sets the threads of each rank.
#include <omp.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "core/comm.hpp"
#include "core/parallel.hpp"
#include "core/timer.hpp"
#include "domain/rank_domains.hpp"
#include "fmm/p2p.hpp"
#include "fmm/short_range.hpp"
#include "tree/orb_tree.hpp"
#include "support/clustered_particles.hpp"

using namespace orbis;

namespace {

// A displacement of up to `amount` per axis, fixed by the particle's id and the step.
Vec3d jitter(std::uint64_t id, int step, double amount) {
  std::uint64_t h = id * 0x9E3779B97F4A7C15ull + static_cast<std::uint64_t>(step) * 0xBF58476D1CE4E5B9ull;
  Vec3d d;
  for (int a = 0; a < 3; ++a) {
    h ^= h >> 31;
    h *= 0x94D049BB133111EBull;
    h ^= h >> 29;
    d[a] = amount * ((static_cast<double>(h >> 11) / 9007199254740992.0) * 2 - 1);
  }
  return d;
}

void drift(Particles& p, int step, double amount, double box) {
  for (std::size_t i = 0; i < p.size(); ++i) {
    const Vec3d d = jitter(p.id[i], step, amount);
    for (int a = 0; a < 3; ++a) {
      double x = p.pos[i][a] + d[a];
      if (x >= box) x -= box;
      if (x < 0) x += box;
      if (x >= box) x = 0;
      p.pos[i][a] = x;
    }
  }
}

// A P2P evaluator that evaluates nothing: the walk's task lists are all the LET count needs.
class NoP2P final : public P2PEvaluator {
 public:
  P2PStats evaluate(const P2PSettings&, const P2PInput&, std::vector<Vec3d>& acc) override {
    std::fill(acc.begin(), acc.end(), Vec3d{});
    return {};
  }
  std::string name() const override { return "none"; }
};

// The LET estimate of let=1 (see the top of the file), printed per rank.
void report_let(const RankDomains& domains, const std::vector<Vec3d>& with_ghosts, std::size_t n_own, double box,
                double r_cut, int depth) {
  ShortRangeSettings s;
  s.box_mpc_h = box;
  s.r_cut = r_cut;
  s.r_s = r_cut / 5.5;   // the default ratio; the walk's decisions do not depend on it
  s.max_leaf = 32;
  s.top_levels = depth;
  s.g_mass = 1;
  ShortRangeSolver solver(s);
  NoP2P none;
  std::vector<std::uint8_t> bins(with_ghosts.size(), 0);
  std::fill(bins.begin(), bins.begin() + static_cast<std::ptrdiff_t>(n_own), 1);
  ShortRangeTargets targets;
  targets.bins = &bins;
  targets.min_bin = 1;
  targets.forest_groups = &domains.group_offsets();
  targets.forest_group_ids = &domains.groups();
  solver.begin(with_ghosts, none, targets);   // the walk; its P2P (none) is never finished
  const OrbTree& tree = solver.tree();
  const auto& nodes = tree.nodes();
  const auto& leaves = tree.leaves();
  const auto ghost_node = [&](std::int32_t k) {
    return nodes[static_cast<std::size_t>(k)].first >= n_own && nodes[static_cast<std::size_t>(k)].depth >= depth;
  };
  std::vector<std::uint8_t> kind(nodes.size(), 0);   // 1 passed through, 2 M2L source
  std::vector<std::uint8_t> leaf_used(leaves.size(), 0);
  for (const InteractionTask& t : solver.tasks().m2l)
    if (ghost_node(static_cast<std::int32_t>(t.source))) kind[t.source] = 2;
  for (const InteractionTask& t : solver.tasks().p2p)
    if (leaves[t.source].first >= n_own) leaf_used[t.source] = 1;
  std::uint64_t let_particles = 0;
  for (std::size_t l = 0; l < leaves.size(); ++l)
    if (leaf_used[l]) {
      let_particles += leaves[l].count;
      const std::int32_t k = tree.leaf_node()[l];
      if (kind[static_cast<std::size_t>(k)] == 0) kind[static_cast<std::size_t>(k)] = 1;
    }
  // Every ancestor of a node the walk reached, down from the top depth, is passed through.
  for (std::size_t k = nodes.size(); k-- > 0;) {
    if (kind[k] == 0) continue;
    for (std::int32_t up = nodes[k].parent; up >= 0 && ghost_node(up) && kind[static_cast<std::size_t>(up)] == 0;
         up = nodes[static_cast<std::size_t>(up)].parent)
      kind[static_cast<std::size_t>(up)] = 1;
  }
  std::uint64_t m2l_nodes = 0, walk_nodes = 0;
  for (std::uint8_t k : kind) {
    m2l_nodes += k == 2;
    walk_nodes += k == 1;
  }
  const std::uint64_t ghosts = with_ghosts.size() - n_own;
  const double ghost_bytes = 24.0 * static_cast<double>(ghosts);
  const double let_bytes = 24.0 * static_cast<double>(let_particles) + 376.0 * static_cast<double>(m2l_nodes) +
                           96.0 * static_cast<double>(walk_nodes);
  std::printf("  rank %d: %zu own, %llu ghosts (%.3f per own particle, %.1f MB a refresh); as a LET: %llu particles in "
              "P2P leaves (%.3f per own), %llu M2L source nodes, %llu nodes passed through: %.1f MB a refresh "
              "(%.2f of the ghosts')\n",
              domains.comm().rank(), n_own, static_cast<unsigned long long>(ghosts),
              static_cast<double>(ghosts) / static_cast<double>(n_own), 1e-6 * ghost_bytes,
              static_cast<unsigned long long>(let_particles),
              static_cast<double>(let_particles) / static_cast<double>(n_own),
              static_cast<unsigned long long>(m2l_nodes), static_cast<unsigned long long>(walk_nodes),
              1e-6 * let_bytes, let_bytes / ghost_bytes);
  std::fflush(stdout);
}

std::uint64_t mix(std::uint64_t h, std::uint64_t v) { return (h ^ v) * 0x100000001B3ull; }
std::uint64_t bits(double x) {
  std::uint64_t u;
  static_assert(sizeof u == sizeof x);
  __builtin_memcpy(&u, &x, sizeof u);
  return u;
}

}  // namespace

int main(int argc, char** argv) {
  parallel::init(&argc, &argv);
  {
    const Comm comm = Comm::world();
    const int side = argc > 1 ? std::atoi(argv[1]) : 128;
    const double box = argc > 2 ? std::atof(argv[2]) : 500.0;
    const double r_cut = argc > 3 ? std::atof(argv[3]) * box / side : 6.6 * box / side;
    const int pm_steps = argc > 4 ? std::atoi(argv[4]) : 3;
    const int subs = argc > 5 ? std::atoi(argv[5]) : 16;
    const double amount = argc > 6 ? std::atof(argv[6]) : 0.3;
    const long node_particles = argc > 7 ? std::atol(argv[7]) : 4096;
    const bool let = argc > 8 && std::atoi(argv[8]) != 0;

    const Particles all = test::clustered_particle_set(side, box, 20261127);
    Particles mine;
    mine.mass = all.mass;
    for (std::size_t i = static_cast<std::size_t>(comm.rank()); i < all.size(); i += static_cast<std::size_t>(comm.size())) {
      mine.pos.push_back(all.pos[i]);
      mine.mom.push_back(all.mom[i]);
      mine.id.push_back(all.id[i]);
      mine.time_bin.push_back(static_cast<std::uint8_t>(all.id[i] % 3));
    }
    const int max_leaf = 32;
    const int depth = top_levels_for(static_cast<std::int64_t>(all.size()), node_particles, max_leaf);
    RankDomains domains(box, max_leaf, depth, comm);
    comm.barrier();
    Stopwatch first;
    domains.update(mine, 0);
    const double first_s = first.seconds();
    if (comm.is_root())
      std::printf("%d^3 particles in %g Mpc/h on %d ranks, %d threads each, r_cut %.3g Mpc/h; first update "
                  "(build, migrate ~half) %.3f s; %u top-tree nodes (depth %d)\n",
                  side, box, comm.size(), omp_get_max_threads(), r_cut, first_s, domains.domains().groups(), depth);
    std::uint64_t check = 0xCBF29CE484222325ull;
    double sum_update = 0, sum_select = 0, sum_refresh = 0;
    for (int s = 0; s < pm_steps; ++s) {
      drift(mine, 1000 * s, amount, box);
      comm.barrier();
      Stopwatch update;
      domains.update(mine, 1.0e9);   // equal work: the domains are kept
      const double update_s = update.seconds();
      const DomainReport::Times up = domains.report().times;
      comm.barrier();
      Stopwatch select;
      bool same = true;
      const std::size_t sources = domains.with_ghosts(mine.pos, r_cut, &same).size();
      const double select_s = select.seconds();
      const DomainReport::Times sel = domains.report().times;
      if (let && s == 0) {
        const std::vector<Vec3d> with = domains.with_ghosts(mine.pos, r_cut);   // the same choice: a refresh
        for (int r = 0; r < comm.size(); ++r) {
          if (r == comm.rank()) report_let(domains, with, mine.size(), box, r_cut, depth);
          comm.barrier();
        }
      }
      double refresh_s = 0, rechoice_s = 0;
      int rechoices = 0;
      for (int k = 1; k < subs; ++k) {
        drift(mine, 1000 * s + k, 1e-4 * r_cut, box);
        comm.barrier();
        Stopwatch refresh;
        const std::vector<Vec3d>& with = domains.with_ghosts(mine.pos, r_cut, &same);
        refresh_s += refresh.seconds();
        rechoice_s += domains.report().times.ghost_choice;
        rechoices += domains.report().rechosen ? 1 : 0;
        for (std::size_t i = mine.size(); i < with.size(); i += 97)
          check = mix(mix(mix(check, bits(with[i].x)), bits(with[i].y)), bits(with[i].z));
        if (!same && comm.is_root()) std::printf("  (sub-step %d chose the ghosts again)\n", k);
      }
      for (std::size_t i = 0; i < mine.size(); ++i) check = mix(mix(check, mine.id[i]), bits(mine.pos[i].x));
      check = mix(check, sources);
      const std::uint64_t migrated = comm.sum(domains.report().migrated);
      if (comm.is_root())
        std::printf("  parts: top tree %.4f s (%d levels, %d rounds, %.4f s in reductions), groups and runs %.4f s, "
                    "migration %.4f s, subtree order %.4f s; ghost choice %.4f s, ghost exchange %.4f s\n",
                    up.top_tree, up.top_levels, up.top_rounds, up.top_comm, up.runs, up.migrate, up.order,
                    sel.ghost_choice, sel.ghost_exchange);
      if (comm.is_root())
        std::printf("  refreshes: %d chose again (pairs tested), in %.4f s\n", rechoices, rechoice_s);
      if (comm.is_root())
        std::printf("PM step %d: update %.4f s (%llu migrated), ghost selection %.4f s (%llu ghosts in %llu nodes), "
                    "%d refreshes %.4f s; domain phase %.4f s\n",
                    s + 1, update_s, static_cast<unsigned long long>(migrated), select_s,
                    static_cast<unsigned long long>(domains.report().ghosts),
                    static_cast<unsigned long long>(domains.report().ghost_groups), subs - 1, refresh_s,
                    update_s + select_s + refresh_s);
      sum_update += update_s;
      sum_select += select_s;
      sum_refresh += refresh_s;
    }
    const std::vector<std::uint64_t> checks = comm.allgather(check);
    if (comm.is_root()) {
      std::printf("mean per PM step: update %.4f s, selection %.4f s, refreshes %.4f s, domain phase %.4f s\n",
                  sum_update / pm_steps, sum_select / pm_steps, sum_refresh / pm_steps,
                  (sum_update + sum_select + sum_refresh) / pm_steps);
      std::printf("checksum");
      for (std::uint64_t c : checks) std::printf(" %016llx", static_cast<unsigned long long>(c));
      std::printf("\n");
    }
  }
  parallel::finalize();
  return 0;
}
