// FoF across ranks, the first two steps (fof_ranks.hpp): the ghost import and the host
// linker. The merge and gather: fof_ranks_gather.cpp.
#include "analysis/fof_ranks.hpp"

#include <algorithm>
#include <limits>

#include "core/periodic_extent.hpp"

namespace orbis::fof {
namespace {

struct GhostRecord {
  Vec3d pos;
  std::uint64_t id;
};

// `pos` itself when every position lies in [0, box), else a copy wrapped into it (in `storage`).
const std::vector<Vec3d>& inside_box(const std::vector<Vec3d>& pos, double box, std::vector<Vec3d>& storage) {
  const bool inside = std::all_of(pos.begin(), pos.end(), [box](const Vec3d& x) {
    return x.x >= 0 && x.x < box && x.y >= 0 && x.y < box && x.z >= 0 && x.z < box;
  });
  if (inside) return pos;
  storage.resize(pos.size());
  for (std::size_t i = 0; i < pos.size(); ++i) storage[i] = linked_position(pos[i], box);
  return storage;
}

}  // namespace

Vec3d linked_position(const Vec3d& x, double box) {
  return {periodic_wrap_position(x.x, box), periodic_wrap_position(x.y, box), periodic_wrap_position(x.z, box)};
}

Ghosts import_ghosts(const Particles& local, double box, double link, const Comm& comm) {
  std::vector<Vec3d> storage;
  const std::vector<Vec3d>& pos = inside_box(local.pos, box, storage);
  const std::size_t n = pos.size();
  // This rank's particles within one linking length of another rank's extent go there.
  const std::vector<PeriodicExtent> extents = comm.allgather(PeriodicExtent::of(pos, box));
  const double l2 = link * link;
  Ghosts g;
  std::vector<GhostRecord> send;
  std::vector<std::size_t> send_counts(static_cast<std::size_t>(comm.size()), 0);
  for (int r = 0; r < comm.size(); ++r) {
    const PeriodicExtent& e = extents[static_cast<std::size_t>(r)];
    if (r == comm.rank() || e.empty) continue;
    for (std::size_t i = 0; i < n; ++i)
      if (e.distance2(pos[i], box) <= l2) {
        g.exported.push_back(static_cast<std::uint32_t>(i));
        send.push_back({pos[i], local.id[i]});
        ++send_counts[static_cast<std::size_t>(r)];
      }
  }
  const std::vector<GhostRecord> ghosts = comm.alltoallv(send, send_counts, &g.from);
  g.pos.reserve(ghosts.size());
  g.id.reserve(ghosts.size());
  for (const GhostRecord& r : ghosts) g.pos.push_back(r.pos), g.id.push_back(r.id);
  return g;
}

std::vector<std::uint32_t> link_on_host(const std::vector<Vec3d>& own, const std::vector<Vec3d>& ghosts, double box,
                                        double link) {
  std::vector<Vec3d> storage;
  std::vector<Vec3d> pos(inside_box(own, box, storage));
  pos.insert(pos.end(), ghosts.begin(), ghosts.end());
  if (pos.empty()) return {};
  const CellGrid grid(pos, box, link);
  DisjointSets sets(grid.size());
  link_particles(grid, pos, sets);
  sets.flatten();
  // Each root slot's smallest particle index, then each particle's.
  const std::vector<std::uint32_t>& order = grid.order();
  std::vector<std::uint32_t> smallest(pos.size(), std::numeric_limits<std::uint32_t>::max());
  for (std::size_t s = 0; s < order.size(); ++s) {
    std::uint32_t& m = smallest[sets.root(static_cast<std::uint32_t>(s))];
    m = std::min(m, order[s]);
  }
  std::vector<std::uint32_t> label(pos.size());
  for (std::size_t s = 0; s < order.size(); ++s) label[order[s]] = smallest[sets.root(static_cast<std::uint32_t>(s))];
  return label;
}

LocalLinks link_locally(const Particles& local, double box, double link, const Comm& comm, const LocalLinker& linker) {
  LocalLinks links;
  links.box_mpc_h = box;
  links.link_mpc_h = link;
  links.ghosts = import_ghosts(local, box, link, comm);
  links.label = linker(local.pos, links.ghosts.pos, box, link);
  return links;
}

GatheredGroups find_groups_across_ranks(const Particles& local, double box, double link, std::uint32_t min_members,
                                        const Comm& comm, int root, const LocalLinker& linker) {
  return gather_groups(local, link_locally(local, box, link, comm, linker), min_members, comm, root);
}

}  // namespace orbis::fof
