// Rank domains: orthogonal recursive bisection (ORB) of the periodic box over the ranks of a
// run, as PKDGRAV3 and PhotoNs-GPU split theirs. The box is cut in two along the longest side
// of the current piece, the ranks in two (floor(P/2) and the rest), at the plane that leaves
// each half the share of the particles' weight proportional to its ranks; each half is cut
// again until every piece has one rank. Each rank's domain is then an axis-aligned box, and
// every point of [0, box)^3 has exactly one owner.
//
// The weights are the particles' measured cost (interactions per particle of the last step;
// 1 each when unknown): balanced weight is balanced work. The cut planes are found with
// global histograms of the weight (a few rounds of 256 bins each, narrowing onto the bin
// where the cumulative weight crosses the target), so no rank ever holds another's particles
// while deciding, and each round costs one small reduction. Every rank computes the same
// domains from the same reductions.
#pragma once
#include <string>
#include <vector>

#include "core/comm.hpp"
#include "core/vec3.hpp"

namespace orbis {

struct DomainBox {
  Vec3d lo, hi;   // the points x with lo <= x < hi on every axis, Mpc/h, inside [0, box)
};

class OrbDomains {
 public:
  // One rank: the whole box.
  explicit OrbDomains(double box_mpc_h = 1.0);

  // Collective over comm: the domains of comm.size() ranks for the particles at `pos`
  // (this rank's, in [0, box)) weighted by `weight` (empty: 1 each; else one non-negative
  // value per particle).
  static OrbDomains build(const std::vector<Vec3d>& pos, const std::vector<double>& weight, double box_mpc_h,
                          const Comm& comm);

  int ranks() const { return static_cast<int>(boxes_.size()); }
  double box() const { return box_; }
  const DomainBox& domain(int rank) const { return boxes_[static_cast<std::size_t>(rank)]; }
  // The rank whose domain holds x (in [0, box)).
  int owner(const Vec3d& x) const;

  // The domains as bytes (checkpoints: a restart must continue with the same cuts, which
  // depend on the measured work of every step before it) and back; from_bytes checks the
  // layout, the rank count and that the cut tree leads to every rank (an Error naming
  // `what` otherwise).
  std::string to_bytes() const;
  static OrbDomains from_bytes(const std::string& bytes, int ranks, const std::string& what);

 private:
  // The cut tree: node k splits its piece at `at` on `axis`; a child index < 0 is the leaf
  // of rank -(child + 1).
  struct Cut {
    int axis = 0;
    double at = 0;
    int left = -1, right = -1;
  };
  double box_;
  std::vector<Cut> cuts_;
  std::vector<DomainBox> boxes_;
};

}  // namespace orbis
