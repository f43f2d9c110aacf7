// RankDomains::update and its parts (domain/rank_domains.hpp): the groups and the runs, the
// migration, the subtree order. The CUDA engine calls the first and the last part itself and
// does the migration and the order on the device (gpu/domain_update_cuda.cuh).
#include "domain/rank_domains.hpp"

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "core/error.hpp"
#include "core/log.hpp"
#include "core/timer.hpp"
#include "domain/global_top_tree.hpp"
#include "tree/orb_tree.hpp"

namespace orbis {
namespace {

// The particles' arrays permuted: new[k] = old[perm[k]].
void permute(Particles& p, const std::vector<std::uint32_t>& perm) {
  const auto apply = [&perm](auto& values) {
    std::remove_reference_t<decltype(values)> out(values.size());
    const std::ptrdiff_t n = static_cast<std::ptrdiff_t>(perm.size());
#pragma omp parallel for schedule(static)
    for (std::ptrdiff_t k = 0; k < n; ++k) out[static_cast<std::size_t>(k)] = values[perm[static_cast<std::size_t>(k)]];
    values.swap(out);
  };
  apply(p.pos);
  apply(p.mom);
  apply(p.id);
  apply(p.time_bin);
}

}  // namespace

void RankDomains::update(Particles& particles, double work) {
  if (comm_.size() == 1) {
    report_.rebuilt = false;
    report_.migrated = 0;
    return;
  }
  Stopwatch watch;
  const double comm_before = comm_.stats().seconds;
  const GlobalTopTree top = GlobalTopTree::build(particles.pos, max_leaf_, top_depth_, comm_);
  std::vector<std::uint32_t> group = assign_groups(top, work, watch.seconds(), comm_.stats().seconds - comm_before);
  watch.restart();
  const std::uint64_t migrated = migrate_particles(particles, group, domains_, comm_);
  const double migrate_seconds = watch.seconds();
  watch.restart();

  // Group by group, each in subtree order.
  const std::uint32_t g_begin = domains_.begin(comm_.rank());
  std::vector<std::int32_t> own_group(group.size());
  const std::ptrdiff_t n_here = static_cast<std::ptrdiff_t>(group.size());
#pragma omp parallel for schedule(static)
  for (std::ptrdiff_t i = 0; i < n_here; ++i)
    own_group[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(group[static_cast<std::size_t>(i)] - g_begin);
  const auto n_own = static_cast<std::int32_t>(domains_.end(comm_.rank()) - g_begin);
  std::vector<std::uint32_t> offsets;
  const std::vector<std::uint32_t> order =
      OrbTree::subtree_order_by_group(particles.pos, own_group, n_own, max_leaf_, offsets);
  if (order.size() != particles.size())
    fail("internal: rank domains: a subtree order of {} particles for {}", order.size(), particles.size());
  permute(particles, order);
  finish_update(std::move(offsets), particles.size(), migrated, migrate_seconds, watch.seconds());
}

std::vector<std::int32_t> RankDomains::group_nodes(const GlobalTopTree& top) {
  // The groups: the top tree's leaves in tree order (preorder indices ascend along it).
  std::vector<std::int32_t> nodes;
  for (const GlobalTopNode& node : top.nodes())
    if (node.leaf()) nodes.push_back(node.index);
  std::sort(nodes.begin(), nodes.end());
  return nodes;
}

std::vector<std::uint32_t> RankDomains::assign_groups(const GlobalTopTree& top, double work, double top_seconds,
                                                      double top_comm_seconds) {
  Stopwatch watch;
  const std::vector<std::int32_t> nodes = group_nodes(top);
  const std::size_t n = top.particle_node().size();
  std::vector<std::uint32_t> group(n);
  const std::ptrdiff_t sn = static_cast<std::ptrdiff_t>(n);
#pragma omp parallel for schedule(static)
  for (std::ptrdiff_t i = 0; i < sn; ++i)
    group[static_cast<std::size_t>(i)] = static_cast<std::uint32_t>(
        std::lower_bound(nodes.begin(), nodes.end(), top.particle_node()[static_cast<std::size_t>(i)]) -
        nodes.begin());
  const auto local_count = [&group, &nodes] {
    std::vector<std::uint64_t> count(nodes.size(), 0);
    for (std::uint32_t g : group) ++count[g];
    return count;
  };
  assign_runs(top, nodes, n, work, top_seconds, top_comm_seconds, watch.seconds(), local_count);
  return group;
}

void RankDomains::assign_groups(const GlobalTopTree& top, const std::vector<std::uint64_t>& local_count, double work,
                                double top_seconds, double top_comm_seconds, double count_seconds) {
  const std::vector<std::int32_t> nodes = group_nodes(top);
  if (local_count.size() != nodes.size())
    fail("internal: rank domains: {} local group counts for {} groups", local_count.size(), nodes.size());
  std::uint64_t n = 0;
  for (std::uint64_t c : local_count) n += c;
  assign_runs(top, nodes, static_cast<std::size_t>(n), work, top_seconds, top_comm_seconds, count_seconds,
              [&local_count] { return local_count; });
}

void RankDomains::assign_runs(const GlobalTopTree& top, const std::vector<std::int32_t>& nodes, std::size_t n,
                              double work, double top_seconds, double top_comm_seconds, double groups_seconds,
                              const std::function<std::vector<std::uint64_t>()>& local_count) {
  report_.rebuilt = false;
  report_.migrated = 0;
  const double most = comm_.max(work);
  const double mean = comm_.sum(work) / comm_.size();
  report_.imbalance = mean > 0 ? most / mean : 1.0;

  DomainReport::Times& times = report_.times;
  times.top_tree = top_seconds;
  times.top_comm = top_comm_seconds;
  times.top_rounds = top.rounds();
  times.top_levels = top.nodes().empty() ? 0 : top.nodes().back().depth;
  Stopwatch watch;
  const std::size_t n_groups = nodes.size();
  group_count_.assign(n_groups, 0);
  group_lo_.assign(n_groups, Vec3d{});
  group_hi_.assign(n_groups, Vec3d{});
  for (const GlobalTopNode& node : top.nodes())
    if (node.leaf()) {
      const std::size_t g =
          static_cast<std::size_t>(std::lower_bound(nodes.begin(), nodes.end(), node.index) - nodes.begin());
      group_count_[g] = node.count;
      group_lo_[g] = node.lo;
      group_hi_[g] = node.hi;
    }

  if (built_ && domains_.groups() != n_groups) {
    log::warn_root("rank domains: the runs in force are of {} top-tree groups, this top tree has {}: rebuilt",
              domains_.groups(), n_groups);
    built_ = false;
  }
  if (!built_ || report_.imbalance > kRebalance) {
    // Each particle weighs its rank's work per particle; a rank that measured none, the
    // run's mean per particle; nothing measured anywhere (the first step): 1 each.
    double per_particle = 1;
    if (mean > 0) {
      const double n_total = static_cast<double>(comm_.sum<std::uint64_t>(n));
      per_particle = work > 0 && n > 0 ? work / static_cast<double>(n) : mean * comm_.size() / n_total;
    }
    const std::vector<std::uint64_t> count = local_count();
    std::vector<double> weight(n_groups);
    for (std::size_t g = 0; g < n_groups; ++g) weight[g] = per_particle * static_cast<double>(count[g]);
    comm_.reduce(weight, Comm::Op::sum);
    const std::vector<std::uint64_t> members(group_count_.begin(), group_count_.end());
    domains_ = NodeDomains::balance(weight, members, comm_.size());
    // Counts alone keep the limit unless single nodes are too large for it: say so, since
    // every rank's memory was planned for it.
    std::uint64_t total = 0, largest_node = 0;
    for (std::uint64_t c : members) {
      total += c;
      largest_node = std::max(largest_node, c);
    }
    const double limit = NodeDomains::kMaxParticleShare * static_cast<double>(total) / comm_.size();
    if (static_cast<double>(domains_.largest_count(members)) > limit)
      log::warn_root("rank domains: a rank holds {} particles, more than {} times the mean {}: top-tree nodes of up to "
                     "{} particles are too coarse for {} ranks (a smaller [gravity] top_node_particles gives smaller "
                     "nodes)", domains_.largest_count(members), NodeDomains::kMaxParticleShare,
                     total / static_cast<std::uint64_t>(comm_.size()), largest_node, comm_.size());
    built_ = true;
    report_.rebuilt = true;
    if (n_groups < 2 * static_cast<std::size_t>(comm_.size()))
      log::warn_root("rank domains: {} top-tree nodes (depth {}) for {} ranks: the runs cannot balance the work, and "
                "ranks without a node compute no short-range forces (a smaller [gravity] top_node_particles gives "
                "more nodes)", n_groups, top_depth_, comm_.size());
  }
  times.runs = groups_seconds + watch.seconds();
}

void RankDomains::finish_update(std::vector<std::uint32_t> own_offsets, std::size_t n, std::uint64_t migrated,
                                double migrate_seconds, double order_seconds) {
  const int me = comm_.rank();
  const std::uint32_t g_begin = domains_.begin(me), g_end = domains_.end(me);
  if (own_offsets.size() != static_cast<std::size_t>(g_end - g_begin) + 1 || own_offsets.back() != n)
    fail("internal: rank domains: {} group offsets ending at {} for {} particles in {} groups", own_offsets.size(),
         own_offsets.empty() ? 0u : own_offsets.back(), n, g_end - g_begin);
  for (std::uint32_t g = g_begin; g < g_end; ++g)
    if (own_offsets[g - g_begin + 1] - own_offsets[g - g_begin] != group_count_[g])
      fail("internal: rank {} holds {} particles of top-tree group {}, which has {}", me,
           own_offsets[g - g_begin + 1] - own_offsets[g - g_begin], g, group_count_[g]);
  own_offsets_ = std::move(own_offsets);
  report_.migrated = migrated;
  report_.times.migrate = migrate_seconds;
  report_.times.order = order_seconds;
  updated_ = true;
  top_boxes_current_ = true;
  ghosts_chosen_ = false;   // the particles are others now, in another order

  // The per-rank load, in the log: particles and measured work per rank.
  const DomainReport::Times& times = report_.times;
  const std::uint64_t fewest = comm_.min<std::uint64_t>(n);
  const std::uint64_t most_particles = comm_.max<std::uint64_t>(n);
  const std::uint64_t moved = comm_.sum(report_.migrated);
  log::info("domains {} on {} ranks ({} top-tree nodes): {}..{} particles per rank, {} migrated; work imbalance of "
            "the last steps {:.3f} (largest rank / mean); rank 0: top tree {:.3f} s, groups {:.3f} s, migration "
            "{:.3f} s, subtree order {:.3f} s", report_.rebuilt ? "rebuilt" : "kept", comm_.size(), group_count_.size(),
            fewest, most_particles, moved, report_.imbalance, times.top_tree, times.runs, times.migrate, times.order);
}

}  // namespace orbis
