#include "pm/slab_ghost_lists.hpp"

#include <utility>

#include "pm/fft_mesh.hpp"

namespace orbis {

SlabGhostLists slab_ghost_lists(int n, int ranks, int rank, int wanted) {
  // Rank s's ghost planes: (global plane, owner) in ghost order (FftMesh::exchange_ghost_planes).
  const auto ghosts_of = [&](int s) {
    std::vector<std::pair<int, int>> out;
    const SlabPlanes slab = slab_planes(n, ranks, s);
    const int count = ghost_plane_count(n, slab, wanted);
    for (int g = 0; g < count; ++g) {
      const int i = (slab.first + slab.count + g) % n;
      out.emplace_back(i, slab_owner(i, n, ranks));
    }
    return out;
  };
  const SlabPlanes mine = slab_planes(n, ranks, rank);
  const auto my_ghosts = ghosts_of(rank);
  SlabGhostLists lists;
  lists.ghost_counts.assign(static_cast<std::size_t>(ranks), 0);
  lists.owned_counts.assign(static_cast<std::size_t>(ranks), 0);
  for (int r = 0; r < ranks; ++r) {
    for (std::size_t g = 0; g < my_ghosts.size(); ++g)
      if (my_ghosts[g].second == r) {
        lists.ghost_planes.push_back(mine.count + static_cast<int>(g));
        ++lists.ghost_counts[static_cast<std::size_t>(r)];
      }
    for (const auto& [i, owner] : ghosts_of(r))
      if (owner == rank) {
        lists.owned_planes.push_back(i - mine.first);
        ++lists.owned_counts[static_cast<std::size_t>(r)];
      }
  }
  return lists;
}

}  // namespace orbis
