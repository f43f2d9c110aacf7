// FoF across ranks, the first two steps (fof_ranks.hpp): the ghost import and the host
// linker. The merge and gather: fof_ranks_gather.cpp.
#include "analysis/fof_ranks.hpp"

#include <algorithm>
#include <limits>

#include "analysis/fof_ghost_cells.hpp"
#include "core/error.hpp"

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
  const std::vector<Vec3d>& pos = local.pos;   // wrapped into the box as they are read, not copied
  const std::size_t n = pos.size();
  const auto ranks = static_cast<std::size_t>(comm.size()), me = static_cast<std::size_t>(comm.rank());
  // This rank's occupied cells (fof_ghost_cells.hpp) go to each rank whose cells may lie
  // within l of them (their cell boxes, allgathered, decide that alike on every rank); theirs
  // come here.
  const GhostCells cells(box, link);
  const std::vector<std::uint64_t> mine = cells.occupancy(pos);
  const std::vector<GhostCells::Box> boxes = comm.allgather(cells.box_of(mine));
  const std::size_t words = cells.words();
  std::vector<std::size_t> bit_counts(ranks, 0);
  std::vector<std::uint64_t> bits_out;
  for (std::size_t r = 0; r < ranks; ++r)
    if (r != me && cells.may_touch(boxes[me], boxes[r])) {
      bit_counts[r] = words;
      bits_out.insert(bits_out.end(), mine.begin(), mine.end());
    }
  std::vector<std::size_t> bits_from;
  const std::vector<std::uint64_t> bits_in = comm.alltoallv(bits_out, bit_counts, &bits_from);
  bits_out = {};
  std::vector<std::size_t> near_rank;   // the ranks whose cells arrived, ascending
  std::vector<const std::uint64_t*> near_bits;
  for (std::size_t r = 0, at = 0; r < ranks; at += bits_from[r], ++r) {
    if (bits_from[r] == 0) continue;
    if (bits_from[r] != words)
      fail("internal: fof_ranks.cpp: {} words of occupied cells from rank {}, expected {}", bits_from[r], r, words);
    near_rank.push_back(r);
    near_bits.push_back(bits_in.data() + at);
  }
  // Their cells and the cells around them: most particles are near none of them and pass
  // after one lookup.
  const std::vector<std::uint64_t> around_them =
      near_rank.empty() ? std::vector<std::uint64_t>{} : cells.neighbourhood(near_bits);

  // This rank's particles near each of those ranks' cells, in index order: chunks of fixed
  // size over the threads, joined in chunk order (the same for any thread count).
  constexpr std::size_t kChunk = 1 << 16;
  const std::size_t sources = near_rank.size(), chunks = sources > 0 ? (n + kChunk - 1) / kChunk : 0;
  std::vector<std::vector<std::uint32_t>> picked(chunks * sources);
#pragma omp parallel for schedule(dynamic)
  for (std::ptrdiff_t c = 0; c < static_cast<std::ptrdiff_t>(chunks); ++c) {
    const std::size_t first = static_cast<std::size_t>(c) * kChunk, last = std::min(n, first + kChunk);
    for (std::size_t i = first; i < last; ++i) {
      if (!cells.in(pos[i], around_them.data())) continue;
      const GhostCells::Near near = cells.near(pos[i]);
      for (std::size_t s = 0; s < sources; ++s)
        if (GhostCells::any_set(near, near_bits[s]))
          picked[static_cast<std::size_t>(c) * sources + s].push_back(static_cast<std::uint32_t>(i));
    }
  }
  Ghosts g;
  std::vector<std::size_t> send_counts(ranks, 0);
  for (std::size_t s = 0; s < sources; ++s)
    for (std::size_t c = 0; c < chunks; ++c) {
      const std::vector<std::uint32_t>& p = picked[c * sources + s];
      g.exported.insert(g.exported.end(), p.begin(), p.end());
      send_counts[near_rank[s]] += p.size();
    }
  picked = {};
  std::vector<GhostRecord> send(g.exported.size());
  const auto sent = static_cast<std::ptrdiff_t>(send.size());
#pragma omp parallel for schedule(static)
  for (std::ptrdiff_t k = 0; k < sent; ++k) {
    const std::uint32_t i = g.exported[static_cast<std::size_t>(k)];
    send[static_cast<std::size_t>(k)] = {linked_position(pos[i], box), local.id[i]};
  }
  const std::vector<GhostRecord> ghosts = comm.alltoallv(send, send_counts, &g.from);
  g.pos.resize(ghosts.size());
  g.id.resize(ghosts.size());
  for (std::size_t k = 0; k < ghosts.size(); ++k) g.pos[k] = ghosts[k].pos, g.id[k] = ghosts[k].id;
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
