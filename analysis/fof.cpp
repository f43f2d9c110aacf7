#include "analysis/fof.hpp"

#include <omp.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <numeric>

#include "core/error.hpp"
#include "core/log.hpp"
#include "core/params.hpp"

namespace orbis::fof {
namespace {

// A coarse-cell pair with at most this many particle pairs is linked by checking every
// pair; above it, fine cell by fine cell. bench_fof takes the same time (within 5%) for any
// value from 128 to 4096; the fine-cell path is what keeps dense cores from costing O(n^2).
constexpr std::size_t kDirectPairs = 1024;
// Largest m^3 for which a thread keeps a local-key lookup table (4 bytes per entry).
constexpr std::int64_t kMaxTable = 1 << 18;

std::int64_t floor_div(std::int64_t a, std::int64_t b) {
  const std::int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

struct Offset {
  int x, y, z;
};

// Consecutive slots of one coarse cell in one fine cell: all of them are friends.
struct Run {
  std::uint32_t key;     // local fine key inside the coarse cell
  std::uint32_t begin;   // index into the cell's position buffer
  std::uint32_t end;
  CellCoord fine;        // fine coordinates (wrapped, true grid coordinates)
};

// Links the candidate pairs of a coarse cell with itself and its neighbours; one per thread,
// it owns the thread's buffers.
class CellLinker {
 public:
  CellLinker(const CellGrid& grid, const std::vector<Vec3d>& pos, DisjointSets& sets)
      : grid_(grid), pos_(pos), sets_(sets), l2_(grid.link() * grid.link()) {
    // Fine offsets whose cells can hold a pair within l: per axis the smallest gap between
    // cells |d| apart is (|d| - 1) h.
    const double h = grid.fine_length();
    const int reach = static_cast<int>(std::floor(grid.link() / h)) + 1;
    for (int dx = -reach; dx <= reach; ++dx)
      for (int dy = -reach; dy <= reach; ++dy)
        for (int dz = -reach; dz <= reach; ++dz) {
          auto gap = [&](int d) { return std::max(std::abs(d) - 1, 0) * h; };
          if (gap(dx) * gap(dx) + gap(dy) * gap(dy) + gap(dz) * gap(dz) > l2_ * (1 + 1e-9)) continue;
          if (dx == 0 && dy == 0 && dz == 0) continue;
          // Cells of the neighbour at coarse offset o can only be reached by fine offsets
          // pointing the same way as o on every axis where o is not 0; the cell with itself
          // takes the half shell (each pair of its fine cells once).
          for (int c = 0; c < 27; ++c) {
            const int ox = c / 9 - 1, oy = c / 3 % 3 - 1, oz = c % 3 - 1;
            auto along = [](int o, int d) { return o == 0 || (o > 0 ? d > 0 : d < 0); };
            if (c == 13) {
              if (dx > 0 || (dx == 0 && (dy > 0 || (dy == 0 && dz > 0)))) by_coarse_[c].push_back({dx, dy, dz});
            } else if (along(ox, dx) && along(oy, dy) && along(oz, dz)) {
              by_coarse_[c].push_back({dx, dy, dz});
            }
          }
        }
    reach_ = reach;
    const std::int64_t m = grid.fine_per_coarse();
    if (m * m * m <= kMaxTable) table_.assign(static_cast<std::size_t>(m * m * m), -1);
  }

  // Coarse cell a with each neighbour at the coarse offsets for which keep(offset) holds;
  // offset 0 is the cell with itself.
  template <typename Keep>
  void link_cell(std::int64_t ax, std::int64_t ay, std::int64_t az, const std::array<Offset, 14>& offsets,
                 Keep keep) {
    const std::size_t ca = grid_.coarse_index(ax, ay, az);
    const std::uint32_t a0 = grid_.cell_begin(ca), na = grid_.cell_end(ca) - a0;
    if (na == 0) return;
    load(pa_, a0, na, Vec3d{});
    runs_a_ready_ = false;
    // The neighbours' positions are scattered in memory: request them all before the first
    // is needed, so that the cache misses overlap.
    const auto& order = grid_.order();
    for (const Offset& o : offsets) {
      if (!keep(o)) continue;
      const std::size_t cb = grid_.coarse_index(ax + o.x, ay + o.y, az + o.z);
      for (std::uint32_t s = grid_.cell_begin(cb); s < grid_.cell_end(cb); ++s) __builtin_prefetch(&pos_[order[s]]);
    }
    for (const Offset& o : offsets)
      if (keep(o)) link_pair(ax, ay, az, a0, na, o);
  }

 private:
  // A's slots [a0, a0 + na) are loaded in pa_.
  void link_pair(std::int64_t ax, std::int64_t ay, std::int64_t az, std::uint32_t a0, std::uint32_t na,
                 const Offset& o) {
    const std::int64_t bx = ax + o.x, by = ay + o.y, bz = az + o.z;
    const std::size_t cb = grid_.coarse_index(bx, by, bz);
    const std::uint32_t b0 = grid_.cell_begin(cb), nb = grid_.cell_end(cb) - b0;
    if (nb == 0) return;
    const bool self = o.x == 0 && o.y == 0 && o.z == 0;
    // B's periodic image next to A: positions shifted so plain differences are separations.
    const std::int64_t nc = grid_.coarse_side();
    const double box = grid_.box();
    if (!self) {
      const Vec3d shift{floor_div(bx, nc) * box, floor_div(by, nc) * box, floor_div(bz, nc) * box};
      load(pb_, b0, nb, shift);
    }
    const std::vector<Vec3d>& pb = self ? pa_ : pb_;

    if (static_cast<std::size_t>(na) * nb <= kDirectPairs) {
      for (std::uint32_t i = 0; i < na; ++i) {
        const Vec3d xi = pa_[i];
        for (std::uint32_t j = self ? i + 1 : 0; j < nb; ++j)
          if (norm2(xi - pb[j]) <= l2_) sets_.unite(a0 + i, b0 + j);
      }
      return;
    }
    if (!runs_a_ready_) {
      runs(ra_, a0, na);
      runs_a_ready_ = true;
    }
    if (self) {
      for (const Run& r : ra_)
        for (std::uint32_t s = r.begin + 1; s < r.end; ++s) sets_.unite(a0 + r.begin, a0 + s);
      link_runs(a0, pa_, ra_, a0, pa_, ra_, Offset{0, 0, 0}, ax, ay, az);
    } else {
      runs(rb_, b0, nb);
      link_runs(a0, pa_, ra_, b0, pb_, rb_, o, bx, by, bz);
    }
  }

  void load(std::vector<Vec3d>& buf, std::uint32_t first, std::uint32_t n, const Vec3d& shift) {
    buf.resize(n);
    const auto& order = grid_.order();
    for (std::uint32_t k = 0; k < n; ++k) buf[k] = pos_[order[first + k]] + shift;
  }

  // Fine-cell runs of the slots [first, first + n) of one coarse cell (sorted by local key by
  // construction). Computed from the stored positions, exactly as the grid sorted them.
  void runs(std::vector<Run>& out, std::uint32_t first, std::uint32_t n) {
    out.clear();
    const auto& order = grid_.order();
    for (std::uint32_t k = 0; k < n; ++k) {
      const CellCoord f = grid_.fine_cell(pos_[order[first + k]]);
      const std::uint32_t key = grid_.local_key(f);
      if (!out.empty() && out.back().key == key) {
        out.back().end = k + 1;
      } else {
        out.push_back({key, k, k + 1, f});
      }
    }
  }

  // For each fine cell of A, the fine cells of B (coarse coordinates b, unwrapped) at the
  // given offsets; two cells are linked by the first pair within l.
  void link_runs(std::uint32_t a0, const std::vector<Vec3d>& pa, const std::vector<Run>& ra,
                 std::uint32_t b0, const std::vector<Vec3d>& pb, const std::vector<Run>& rb,
                 const Offset& o, std::int64_t bx, std::int64_t by, std::int64_t bz) {
    const std::int64_t m = grid_.fine_per_coarse();
    const std::vector<Offset>& offsets = by_coarse_[(o.x + 1) * 9 + (o.y + 1) * 3 + (o.z + 1)];
    // A's fine coordinates unwrapped to A's image: A's coarse cell is B's minus o.
    const std::int64_t ox = (bx - o.x) * m, oy = (by - o.y) * m, oz = (bz - o.z) * m;
    const std::int64_t mx = bx * m, my = by * m, mz = bz * m;
    // B's runs by local key: a direct table when m^3 is small, else binary search.
    const bool use_table = !table_.empty();
    if (use_table)
      for (std::size_t k = 0; k < rb.size(); ++k) table_[rb[k].key] = static_cast<std::int32_t>(k);
    for (const Run& r : ra) {
      const std::int64_t lx = r.fine.x % m, ly = r.fine.y % m, lz = r.fine.z % m;
      // Only cells within reach of B's face can have partners there.
      if ((o.x > 0 && lx < m - reach_) || (o.x < 0 && lx >= reach_) ||
          (o.y > 0 && ly < m - reach_) || (o.y < 0 && ly >= reach_) ||
          (o.z > 0 && lz < m - reach_) || (o.z < 0 && lz >= reach_))
        continue;
      for (const Offset& d : offsets) {
        const std::int64_t tx = ox + lx + d.x - mx, ty = oy + ly + d.y - my, tz = oz + lz + d.z - mz;
        if (tx < 0 || tx >= m || ty < 0 || ty >= m || tz < 0 || tz >= m) continue;
        const auto key = static_cast<std::uint32_t>((tx * m + ty) * m + tz);
        const Run* target = nullptr;
        if (use_table) {
          if (table_[key] < 0) continue;
          target = &rb[static_cast<std::size_t>(table_[key])];
        } else {
          auto it = std::lower_bound(rb.begin(), rb.end(), key,
                                     [](const Run& run, std::uint32_t k) { return run.key < k; });
          if (it == rb.end() || it->key != key) continue;
          target = &*it;
        }
        if (sets_.same(a0 + r.begin, b0 + target->begin)) continue;
        link_cells(a0, pa, r, b0, pb, *target);
      }
    }
    if (use_table)
      for (const Run& r : rb) table_[r.key] = -1;
  }

  void link_cells(std::uint32_t a0, const std::vector<Vec3d>& pa, const Run& ra, std::uint32_t b0,
                  const std::vector<Vec3d>& pb, const Run& rb) {
    for (std::uint32_t i = ra.begin; i < ra.end; ++i)
      for (std::uint32_t j = rb.begin; j < rb.end; ++j)
        if (norm2(pa[i] - pb[j]) <= l2_) {
          sets_.unite(a0 + i, b0 + j);
          return;
        }
  }

  const CellGrid& grid_;
  const std::vector<Vec3d>& pos_;
  DisjointSets& sets_;
  double l2_;
  int reach_ = 2;
  bool runs_a_ready_ = false;
  std::array<std::vector<Offset>, 27> by_coarse_;   // fine offsets per coarse offset
  std::vector<std::int32_t> table_;                 // local key -> run of B, or -1
  std::vector<Vec3d> pa_, pb_;
  std::vector<Run> ra_, rb_;
};

// The 13 coarse neighbours of the half shell (each unordered pair of adjacent cells once)
// plus the cell itself. Every half-shell offset has o.x in {0, 1}.
std::array<Offset, 14> coarse_offsets() {
  std::array<Offset, 14> out{};
  int n = 0;
  out[n++] = {0, 0, 0};
  for (int dx = 0; dx <= 1; ++dx)
    for (int dy = -1; dy <= 1; ++dy)
      for (int dz = -1; dz <= 1; ++dz)
        if (dx > 0 || (dx == 0 && (dy > 0 || (dy == 0 && dz > 0)))) out[n++] = {dx, dy, dz};
  return out;
}

// Slabs of whole x planes with about equal particle counts; returns plane boundaries.
std::vector<std::int64_t> slab_bounds(const CellGrid& grid, int slabs) {
  const std::int64_t nc = grid.coarse_side();
  const std::size_t plane = static_cast<std::size_t>(nc * nc);
  const double n = static_cast<double>(grid.size());
  std::vector<std::int64_t> bounds{0};
  for (int s = 1; s < slabs; ++s) {
    const double target = n * s / slabs;
    std::int64_t p = bounds.back() + 1;
    while (p < nc - (slabs - s) && grid.cell_begin(static_cast<std::size_t>(p) * plane) < target) ++p;
    bounds.push_back(p);
  }
  bounds.push_back(nc);
  return bounds;
}

// Groups given as (length, offset, members in any order within a group) in the canonical
// order of fof.hpp: members by ID (ties by index), groups by descending length, then by
// smallest member ID. Whatever linked them, the same groups come out the same.
FofGroups canonical_groups(const std::vector<std::uint32_t>& length, const std::vector<std::uint64_t>& offset,
                           std::vector<std::uint32_t>& members, const std::vector<std::uint64_t>& ids,
                           double link_mpc_h) {
  const std::size_t ngroups = length.size();
  const std::uint64_t total = members.size();
  auto by_id = [&](std::uint32_t i, std::uint32_t j) { return ids[i] != ids[j] ? ids[i] < ids[j] : i < j; };
#pragma omp parallel for schedule(dynamic, 16)
  for (std::size_t g = 0; g < ngroups; ++g)
    std::sort(members.begin() + offset[g], members.begin() + offset[g] + length[g], by_id);

  // Canonical group order: longest first, then by smallest member ID (the first member now).
  std::vector<std::uint32_t> rank(ngroups);
  std::iota(rank.begin(), rank.end(), 0u);
  std::sort(rank.begin(), rank.end(), [&](std::uint32_t a, std::uint32_t b) {
    if (length[a] != length[b]) return length[a] > length[b];
    return by_id(members[offset[a]], members[offset[b]]);
  });
  FofGroups out;
  out.link_mpc_h = link_mpc_h;
  out.length.resize(ngroups);
  out.offset.resize(ngroups);
  out.members.resize(total);
  std::uint64_t next = 0;
  for (std::size_t k = 0; k < ngroups; ++k) {
    const std::uint32_t g = rank[k];
    out.length[k] = length[g];
    out.offset[k] = next;
    std::copy_n(members.begin() + offset[g], length[g], out.members.begin() + next);
    next += length[g];
  }
  return out;
}

}  // namespace

FofConfig config_from_params(const Params& params) {
  FofConfig c;
  c.linking_length_over_spacing = params.get_real("analysis.fof_linking_length");
  c.min_members = static_cast<std::uint32_t>(
      std::min<std::int64_t>(params.get_int("analysis.fof_min_members"), std::numeric_limits<std::uint32_t>::max()));
  return c;
}

double linking_length(std::size_t num_particles, double box_mpc_h, double b) {
  if (num_particles == 0) fail("fof.cpp: friends-of-friends on an empty particle set");
  return b * box_mpc_h / std::cbrt(static_cast<double>(num_particles));
}

void link_particles(const CellGrid& grid, const std::vector<Vec3d>& pos, DisjointSets& sets) {
  if (sets.size() != grid.size() || pos.size() != grid.size())
    fail("fof.cpp: link_particles with {} sets and {} positions for a grid of {} particles",
         sets.size(), pos.size(), grid.size());
  const std::int64_t nc = grid.coarse_side();
  const auto offsets = coarse_offsets();
  // 4 slabs per thread balance clustered sets; >= 4 planes per slab keep the serial boundary
  // pass (o.x = 1 pairs of each slab's last plane, 9 of 14 offsets) under ~1/6 of the work.
  const int slabs = static_cast<int>(
      std::max<std::int64_t>(1, std::min<std::int64_t>(nc / 4, 4 * omp_get_max_threads())));
  const auto bounds = slab_bounds(grid, slabs);
  std::vector<int> slab_of(static_cast<std::size_t>(nc));
  for (int s = 0; s < slabs; ++s)
    for (std::int64_t p = bounds[s]; p < bounds[s + 1]; ++p) slab_of[p] = s;
  // Whether plane x and the next one (periodically) belong to the same slab: the half-shell
  // offsets have o.x in {0, 1}, so only pairs with o.x = 1 from such a plane cross slabs.
  std::vector<char> next_same(static_cast<std::size_t>(nc));
  for (std::int64_t p = 0; p < nc; ++p) next_same[p] = slab_of[p] == slab_of[(p + 1) % nc];

  // Within slabs: every set a thread touches lies inside its slab, so no two threads write
  // the same union-find entries.
#pragma omp parallel
  {
    CellLinker linker(grid, pos, sets);
#pragma omp for schedule(dynamic, 1)
    for (int s = 0; s < slabs; ++s)
      for (std::int64_t x = bounds[s]; x < bounds[s + 1]; ++x)
        for (std::int64_t y = 0; y < nc; ++y)
          for (std::int64_t z = 0; z < nc; ++z)
            linker.link_cell(x, y, z, offsets, [&](const Offset& o) { return o.x == 0 || next_same[x]; });
  }
  // Across slab boundaries (only offsets with o.x = 1 from a slab's last plane cross).
  CellLinker linker(grid, pos, sets);
  for (int s = 0; s < slabs; ++s) {
    const std::int64_t x = bounds[s + 1] - 1;
    if (next_same[x]) continue;
    for (std::int64_t y = 0; y < nc; ++y)
      for (std::int64_t z = 0; z < nc; ++z)
        linker.link_cell(x, y, z, offsets, [](const Offset& o) { return o.x == 1; });
  }
}

FofGroups collect_groups(const CellGrid& grid, DisjointSets& sets,
                         const std::vector<std::uint64_t>& ids, std::uint32_t min_members) {
  const std::size_t n = grid.size();
  if (ids.size() != n) fail("fof.cpp: {} IDs for {} particles", ids.size(), n);
  constexpr std::uint32_t none = std::numeric_limits<std::uint32_t>::max();
  sets.flatten();

  // Counts per root, then (reusing the array) a provisional group number per kept root.
  std::vector<std::uint32_t> tag(n, 0);
  for (std::size_t s = 0; s < n; ++s) ++tag[sets.root(static_cast<std::uint32_t>(s))];
  std::vector<std::uint32_t> length;
  for (std::size_t s = 0; s < n; ++s) {
    if (sets.root(static_cast<std::uint32_t>(s)) != s) continue;
    if (tag[s] >= min_members) {
      length.push_back(tag[s]);
      tag[s] = static_cast<std::uint32_t>(length.size() - 1);
    } else {
      tag[s] = none;
    }
  }
  const std::size_t ngroups = length.size();
  std::vector<std::uint64_t> offset(ngroups, 0), cursor(ngroups);
  for (std::size_t g = 1; g < ngroups; ++g) offset[g] = offset[g - 1] + length[g - 1];
  const std::uint64_t total = ngroups ? offset.back() + length.back() : 0;
  std::vector<std::uint32_t> members(total);
  cursor = offset;
  const auto& order = grid.order();
  for (std::size_t s = 0; s < n; ++s) {
    const std::uint32_t g = tag[sets.root(static_cast<std::uint32_t>(s))];
    if (g != none) members[cursor[g]++] = order[s];
  }
  std::vector<std::uint32_t>().swap(tag);
  return canonical_groups(length, offset, members, ids, grid.link());
}

FofGroups groups_from_labels(const std::vector<std::uint32_t>& label, const std::vector<std::uint64_t>& ids,
                             std::uint32_t min_members, double link_mpc_h) {
  const std::size_t n = label.size();
  if (ids.size() != n) fail("fof.cpp: {} IDs for {} particle labels", ids.size(), n);
  constexpr std::uint32_t none = std::numeric_limits<std::uint32_t>::max();
  // A label is its group's smallest member index: label[i] <= i, and a label labels itself.
  for (std::size_t i = 0; i < n; ++i)
    if (label[i] > i || label[label[i]] != label[i])
      fail("internal: fof.cpp: particle {}'s group label {} is not its group's smallest member", i, label[i]);
  // Counts per label, then (reusing the array) a provisional group number per kept label.
  std::vector<std::uint32_t> tag(n, 0);
  for (std::size_t i = 0; i < n; ++i) ++tag[label[i]];
  std::vector<std::uint32_t> length;
  for (std::size_t i = 0; i < n; ++i) {
    if (label[i] != i) continue;
    if (tag[i] >= min_members) {
      length.push_back(tag[i]);
      tag[i] = static_cast<std::uint32_t>(length.size() - 1);
    } else {
      tag[i] = none;
    }
  }
  const std::size_t ngroups = length.size();
  std::vector<std::uint64_t> offset(ngroups, 0);
  for (std::size_t g = 1; g < ngroups; ++g) offset[g] = offset[g - 1] + length[g - 1];
  std::vector<std::uint64_t> cursor(offset);
  std::vector<std::uint32_t> members(ngroups ? offset.back() + length.back() : 0);
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint32_t g = tag[label[i]];
    if (g != none) members[cursor[g]++] = static_cast<std::uint32_t>(i);
  }
  return canonical_groups(length, offset, members, ids, link_mpc_h);
}

FofGroups find_groups(const CellGrid& grid, const Particles& particles, std::uint32_t min_members) {
  DisjointSets sets(particles.size());
  link_particles(grid, particles.pos, sets);
  FofGroups groups = collect_groups(grid, sets, particles.id, min_members);
  const std::uint64_t grouped = groups.members.size();
  log::info("fof: {} groups of >= {} particles hold {} of {} particles ({:.1f}%); linking length "
            "{:.5g} Mpc/h; largest group {} particles",
            groups.size(), min_members, grouped, particles.size(),
            100.0 * static_cast<double>(grouped) / static_cast<double>(std::max<std::size_t>(particles.size(), 1)),
            grid.link(), groups.size() ? groups.length[0] : 0);
  return groups;
}

}  // namespace orbis::fof
