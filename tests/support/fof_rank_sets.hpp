// Test-only particle sets for friends-of-friends across ranks (tests/mpi/test_fof_ranks and
// test_fof_ranks_cuda): a clustered set with a filament across the periodic boundary, dealt
// out over the ranks in x slabs (the filament crosses every slab: a group straddling every
// domain), with the last rank empty, or round-robin; the same set with the particles near
// the faces moved to their periodic images just outside the box (a rank's particles between
// wraps); and a linker independent of the host grid (brute force) for the local links.
#pragma once
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "analysis/fof_ranks.hpp"
#include "core/comm.hpp"
#include "core/particles.hpp"
#include "core/vec3.hpp"
#include "support/clustered_particles.hpp"
#include "support/fof_labels.hpp"

namespace orbis::testing {

constexpr double kFofBox = 64.0;
constexpr int kFofClustered = 4096;   // the clustered set: the first particles
constexpr int kFofFilament = 301;

// The clustered set (4096) plus a filament of 301 particles 0.2 Mpc/h apart along x (the
// linking length is ~0.78 Mpc/h), from x = 40 across the boundary to x = 36; momenta vary.
// IDs are 3 i + 5 (not the index); 4397 particles, divided by no rank count of the tests.
inline Particles fof_rank_set() {
  std::vector<Vec3d> pos = test::clustered_particles(16, kFofBox, 7);
  for (int k = 0; k < kFofFilament; ++k) pos.push_back({std::fmod(40.0 + 0.2 * k, kFofBox), 23.3, 47.1});
  Particles p;
  p.resize(pos.size());
  p.pos = pos;
  p.mass = 0.7;
  for (std::size_t i = 0; i < p.size(); ++i) {
    p.id[i] = 3 * i + 5;
    p.mom[i] = {std::sin(0.1 * i) * 100, std::cos(0.3 * i) * 50, static_cast<double>(i % 7)};
  }
  return p;
}

// The index in fof_rank_set() of the particle with this ID.
inline std::size_t fof_rank_index(std::uint64_t id) { return static_cast<std::size_t>((id - 5) / 3); }

enum class Split { slabs, empty_rank, round_robin };

// This rank's share: x slabs with uneven cuts (the last rank's empty for Split::empty_rank),
// or every ranks-th particle. Positions outside the box go to the first or the last slab.
inline Particles fof_share(const Particles& all, Split split, const Comm& comm) {
  const int ranks = split == Split::empty_rank && comm.size() > 1 ? comm.size() - 1 : comm.size();
  Particles mine;
  mine.mass = all.mass;
  for (std::size_t i = 0; i < all.size(); ++i) {
    int owner = static_cast<int>(i % static_cast<std::size_t>(ranks));
    if (split != Split::round_robin) {
      const double f = all.pos[i].x / kFofBox;   // cuts at (r / ranks)^1.3 of the box
      owner = 0;
      while (owner + 1 < ranks && f >= std::pow(static_cast<double>(owner + 1) / ranks, 1.3)) ++owner;
    }
    if (owner != comm.rank()) continue;
    mine.pos.push_back(all.pos[i]);
    mine.mom.push_back(all.mom[i]);
    mine.id.push_back(all.id[i]);
    mine.time_bin.push_back(0);
  }
  return mine;
}

// `all` with the coordinates within 0.5 Mpc/h of a face moved to their periodic image just
// outside the box: x < 0.5 to x + box, y >= box - 0.5 to y - box, z < 0.5 to z + box.
inline Particles drifted_out_of_box(Particles all) {
  for (Vec3d& x : all.pos) {
    if (x.x < 0.5) x.x += kFofBox;
    if (x.y >= kFofBox - 0.5) x.y -= kFofBox;
    if (x.z < 0.5) x.z += kFofBox;
  }
  return all;
}

inline Vec3d wrapped(const Vec3d& x, double box) {
  return {periodic_wrap_position(x.x, box), periodic_wrap_position(x.y, box), periodic_wrap_position(x.z, box)};
}
// The particles as the linkers see them: wrapped into the box.
inline Particles wrapped_into_box(Particles p) {
  for (Vec3d& x : p.pos) x = wrapped(x, kFofBox);
  return p;
}

// A fof::LocalLinker independent of the host grid: brute force over the own particles
// (wrapped) and the ghosts.
inline std::vector<std::uint32_t> brute_force_linker(const std::vector<Vec3d>& own, const std::vector<Vec3d>& ghosts,
                                                     double box, double link) {
  std::vector<Vec3d> pos;
  pos.reserve(own.size() + ghosts.size());
  for (const Vec3d& x : own) pos.push_back(wrapped(x, box));
  pos.insert(pos.end(), ghosts.begin(), ghosts.end());
  return brute_force_labels(pos, box, link);
}

// "" when the gathered groups are the reference's (lengths, member IDs and order), else
// the first difference. (A description, not REQUIREs: the other ranks go on to collectives.)
inline std::string first_difference(const fof::GatheredGroups& got, const fof::FofGroups& ref,
                                    const std::vector<std::vector<std::uint64_t>>& brute, const Particles& all) {
  if (got.groups.size() != ref.size())
    return "groups: " + std::to_string(got.groups.size()) + " vs " + std::to_string(ref.size());
  if (got.members.size() != ref.members.size()) return "members: " + std::to_string(got.members.size());
  for (std::size_t g = 0; g < ref.size(); ++g) {
    if (got.groups.length[g] != ref.length[g] || ref.length[g] != brute[g].size())
      return "length of group " + std::to_string(g);
    for (std::uint32_t k = 0; k < ref.length[g]; ++k) {
      const std::uint64_t id = got.members.id[got.groups.members[got.groups.offset[g] + k]];
      if (id != all.id[ref.members[ref.offset[g] + k]] || id != brute[g][k])
        return "member " + std::to_string(k) + " of group " + std::to_string(g);
    }
  }
  return "";
}

// "" when every gathered member has its position in `all` (the set as the linkers saw it,
// wrapped into the box), bit for bit; else the first difference.
inline std::string member_position_difference(const fof::GatheredGroups& got, const Particles& all) {
  for (std::size_t k = 0; k < got.members.size(); ++k) {
    const Vec3d& x = got.members.pos[k];
    const Vec3d& ref = all.pos[fof_rank_index(got.members.id[k])];
    if (x.x != ref.x || x.y != ref.y || x.z != ref.z)
      return "position of member ID " + std::to_string(got.members.id[k]);
  }
  return "";
}

}  // namespace orbis::testing
