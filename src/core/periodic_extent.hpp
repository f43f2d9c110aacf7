// The extent of a set of points in a periodic box: a box around a centre, the points taken
// at their nearest image to the centre, so that a set straddling the boundary (a domain at
// x = 0) has a small extent. The ghost exchanges ask it which points lie within a distance
// of another rank's points (domain/particle_exchange.hpp for short-range forces,
// analysis/fof_ranks.cpp for friends-of-friends links).
#pragma once
#include <cstdint>
#include <vector>

#include "core/vec3.hpp"

namespace orbis {

struct PeriodicExtent {
  Vec3d centre;
  Vec3d lo, hi;               // relative to centre, each in [-box/2, box/2]
  std::uint64_t empty = 1;    // a whole word (travels as bytes): 1 when there are no points

  // The extent of `pos` (in [0, box)) around `centre`.
  static PeriodicExtent around(const std::vector<Vec3d>& pos, const Vec3d& centre, double box);
  // The extent around a centre chosen opposite the widest empty gap of each axis: the
  // tightest box when the points fill one connected region, wherever it lies.
  static PeriodicExtent of(const std::vector<Vec3d>& pos, double box);

  // Squared distance from x (in [0, box)) to the extent, over the periodic images.
  double distance2(const Vec3d& x, double box) const;
  // A lower bound of the squared distance between any point of this extent and any point of
  // `other`, over the periodic images (per axis, the gap between the two intervals; 0 where
  // they overlap or either is empty). A rank whose extent is farther than r_cut from
  // another's has no particle within r_cut of it: the ghost selection skips that pair.
  double gap2(const PeriodicExtent& other, double box) const;
};

}  // namespace orbis
