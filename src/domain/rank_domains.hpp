// A rank's part of a distributed run's particles: the ORB domains (domain/orb_domains.hpp),
// kept from PM step to PM step and rebuilt when the measured work is out of balance, the
// migration of the particles into them, and the ghosts their short-range forces need
// (domain/particle_exchange.hpp). The step engines call it; on one rank it does nothing.
//
// Balance: each rank reports the work of its last force computations (interactions counted
// by the short-range solver: deterministic, unlike timings, so a run's domains and results
// are the same every time). When the largest exceeds the mean by more than kRebalance, the
// domains are rebuilt with each particle weighted by its rank's work per particle, which
// moves the cuts towards the expensive (clustered) regions.
#pragma once
#include <string>
#include <vector>

#include "core/comm.hpp"
#include "core/particles.hpp"
#include "core/vec3.hpp"
#include "domain/orb_domains.hpp"
#include "domain/particle_exchange.hpp"

namespace orbis {

struct DomainReport {
  double imbalance = 1;         // largest rank's measured work / the mean (1: none measured)
  bool rebuilt = false;         // the domains were (re)built at the last update
  std::uint64_t migrated = 0;   // particles that left this rank at the last update
  std::uint64_t ghosts = 0;     // ghosts imported at the last with_ghosts()
};

class RankDomains {
 public:
  static constexpr double kRebalance = 1.1;

  RankDomains(double box_mpc_h, const Comm& comm);

  // Collective. At a PM step, before the forces: (re)builds the domains if there are none
  // or the work reported since the last update is out of balance, then moves every particle
  // to its domain's rank (sorted by id there). work: this rank's interactions since then.
  void update(Particles& particles, double work);
  // Collective: pos followed by the other ranks' particles within r_cut of them (one rank:
  // pos itself). Valid until the next call.
  // The ghosts are chosen within r_cut (1 + kGhostMargin) and kept, only their positions
  // exchanged, while no particle has moved more than r_cut kGhostMargin / 2 since the choice
  // (two particles approach by at most twice that) and none has changed rank; then they are
  // chosen again. Between PM steps this saves the selection and lets the short-range
  // solver refit its tree instead of building it. *same_set: the result holds the same
  // particles in the same order as at the last call.
  const std::vector<Vec3d>& with_ghosts(const std::vector<Vec3d>& pos, double r_cut, bool* same_set = nullptr);
  static constexpr double kGhostMargin = 0.1;

  // What decides the domains of the steps to come, for a checkpoint written at the end of a
  // PM step (right after update()): the cuts in force ("" while there are none: one rank, or
  // before the first update). restore() takes it back in a fresh RankDomains; its first
  // update() then keeps those cuts (the work it is given is what the restart measured
  // since, none) and moves no particle that the checkpoint's rank held. What else decides
  // the trajectory is not kept: the ghosts are chosen afresh at every update() (the
  // uninterrupted run chooses them there too), and the work since the update is counted
  // again by the restart's first force computation, which repeats the one after it.
  std::string state() const;
  void restore(const std::string& state, const std::string& what);

  const OrbDomains& domains() const { return domains_; }
  const DomainReport& report() const { return report_; }
  const Comm& comm() const { return comm_; }

 private:
  Comm comm_;
  double box_;
  bool built_ = false;
  OrbDomains domains_;
  DomainReport report_;
  std::vector<Vec3d> with_ghosts_;
  // The current ghost choice: what was sent where, at which positions and r_cut.
  bool ghosts_chosen_ = false;
  GhostRoutes routes_;
  std::vector<Vec3d> chosen_at_;
  double chosen_r_cut_ = 0;
};

}  // namespace orbis
