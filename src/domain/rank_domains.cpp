#include "domain/rank_domains.hpp"

#include <algorithm>
#include <cmath>

#include "core/error.hpp"
#include "core/log.hpp"
#include "domain/particle_exchange.hpp"

namespace orbis {

RankDomains::RankDomains(double box_mpc_h, const Comm& comm) : comm_(comm), box_(box_mpc_h), domains_(box_mpc_h) {}

void RankDomains::update(Particles& particles, double work) {
  report_.rebuilt = false;
  report_.migrated = 0;
  if (comm_.size() == 1) return;
  const double most = comm_.max(work);
  const double mean = comm_.sum(work) / comm_.size();
  report_.imbalance = mean > 0 ? most / mean : 1.0;
  if (!built_ || report_.imbalance > kRebalance) {
    // Each particle weighs its rank's work per particle; a rank that measured none, the
    // run's mean per particle; nothing measured anywhere (the first step): 1 each.
    std::vector<double> weight;
    if (mean > 0) {
      const double n_total = static_cast<double>(comm_.sum<std::uint64_t>(particles.size()));
      const double per_particle = work > 0 && !particles.pos.empty() ? work / static_cast<double>(particles.size())
                                           : mean * comm_.size() / n_total;
      weight.assign(particles.size(), per_particle);
    }
    domains_ = OrbDomains::build(particles.pos, weight, box_, comm_);
    built_ = true;
    report_.rebuilt = true;
  }
  std::uint64_t leaving = 0;
  for (const Vec3d& x : particles.pos) leaving += domains_.owner(x) != comm_.rank();
  report_.migrated = leaving;
  migrate_particles(particles, domains_, comm_);
  ghosts_chosen_ = false;   // the particles are others now, in another order
  // The per-rank load, in the log: particles and measured work per rank.
  const std::uint64_t fewest = comm_.min<std::uint64_t>(particles.size());
  const std::uint64_t most_particles = comm_.max<std::uint64_t>(particles.size());
  const std::uint64_t moved = comm_.sum(report_.migrated);
  log::info("domains {} on {} ranks: {}..{} particles per rank, {} migrated; work imbalance of the last steps {:.3f} "
            "(largest rank / mean)", report_.rebuilt ? "rebuilt" : "kept", comm_.size(), fewest, most_particles, moved,
            report_.imbalance);
}

std::string RankDomains::state() const { return built_ ? domains_.to_bytes() : std::string(); }

void RankDomains::restore(const std::string& state, const std::string& what) {
  ghosts_chosen_ = false;
  built_ = !state.empty();
  domains_ = built_ ? OrbDomains::from_bytes(state, comm_.size(), what) : OrbDomains(box_);
  if (built_ && std::abs(domains_.box() - box_) > 1e-12 * box_)
    fail("{}: its rank domains are for a box of {} Mpc/h, this run's is {}", what, domains_.box(), box_);
}

const std::vector<Vec3d>& RankDomains::with_ghosts(const std::vector<Vec3d>& pos, double r_cut, bool* same_set) {
  with_ghosts_ = pos;
  if (same_set) *same_set = false;
  if (comm_.size() == 1) return with_ghosts_;
  // The largest displacement since the choice, over every rank.
  double moved2 = ghosts_chosen_ && chosen_at_.size() == pos.size() && chosen_r_cut_ == r_cut ? 0.0 : HUGE_VAL;
  if (moved2 == 0.0)
    for (std::size_t i = 0; i < pos.size(); ++i) {
      Vec3d d = pos[i] - chosen_at_[i];
      for (int a = 0; a < 3; ++a) d[a] = periodic_wrap_delta(d[a], box_);
      moved2 = std::max(moved2, norm2(d));
    }
  const double allowed = 0.5 * kGhostMargin * r_cut;
  std::vector<Vec3d> ghosts;
  if (comm_.max(moved2) <= allowed * allowed) {
    ghosts = refresh_ghosts(pos, routes_, comm_);
    if (same_set) *same_set = true;
  } else {
    const DomainBox& mine = domains_.domain(comm_.rank());
    ghosts = import_ghosts(pos, (mine.lo + mine.hi) * 0.5, r_cut * (1 + kGhostMargin), box_, comm_, &routes_);
    chosen_at_ = pos;
    chosen_r_cut_ = r_cut;
    ghosts_chosen_ = true;
  }
  report_.ghosts = ghosts.size();
  with_ghosts_.insert(with_ghosts_.end(), ghosts.begin(), ghosts.end());
  return with_ghosts_;
}

}  // namespace orbis
