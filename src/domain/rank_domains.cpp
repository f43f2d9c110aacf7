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
  report_.migrated = migrate_particles(particles, domains_, comm_);
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
  if (same_set) *same_set = false;
  if (comm_.size() == 1) {
    with_ghosts_ = pos;
    return with_ghosts_;
  }
  // One pass over the particles: copied to the front of the result (its buffer is the last
  // call's: between the sub-steps of a PM step the same size, no allocation) and, while a
  // choice stands, their largest displacement since it (a maximum: the same for any thread
  // count).
  const std::size_t n = pos.size();
  if (with_ghosts_.size() < n) with_ghosts_.resize(n);
  // Both positions lie in [0, box), so the nearest image of their difference is one box
  // away at most: a comparison, not periodic_wrap_delta's division (which differs only
  // where |d| is within rounding of box / 2, far beyond any displacement allowed).
  const bool chosen = ghosts_chosen_ && chosen_at_.size() == n && chosen_r_cut_ == r_cut;
  const double half = 0.5 * box_;
  double moved2 = chosen ? 0.0 : HUGE_VAL;
#pragma omp parallel for schedule(static) reduction(max : moved2)
  for (std::ptrdiff_t k = 0; k < static_cast<std::ptrdiff_t>(n); ++k) {
    const std::size_t i = static_cast<std::size_t>(k);
    with_ghosts_[i] = pos[i];
    if (!chosen) continue;
    Vec3d d = pos[i] - chosen_at_[i];
    for (int a = 0; a < 3; ++a) d[a] = d[a] > half ? d[a] - box_ : (d[a] < -half ? d[a] + box_ : d[a]);
    moved2 = std::max(moved2, norm2(d));
  }
  const double allowed = 0.5 * kGhostMargin * r_cut;
  if (comm_.max(moved2) <= allowed * allowed) {
    refresh_ghosts(pos, routes_, comm_, with_ghosts_, n);
    if (same_set) *same_set = true;
  } else {
    const DomainBox& mine = domains_.domain(comm_.rank());
    const std::vector<Vec3d> ghosts =
        import_ghosts(pos, (mine.lo + mine.hi) * 0.5, r_cut * (1 + kGhostMargin), box_, comm_, &routes_);
    chosen_at_.resize(n);
    with_ghosts_.resize(n + ghosts.size());
#pragma omp parallel for schedule(static)
    for (std::ptrdiff_t k = 0; k < static_cast<std::ptrdiff_t>(n); ++k)
      chosen_at_[static_cast<std::size_t>(k)] = pos[static_cast<std::size_t>(k)];
#pragma omp parallel for schedule(static)
    for (std::ptrdiff_t k = 0; k < static_cast<std::ptrdiff_t>(ghosts.size()); ++k)
      with_ghosts_[n + static_cast<std::size_t>(k)] = ghosts[static_cast<std::size_t>(k)];
    chosen_r_cut_ = r_cut;
    ghosts_chosen_ = true;
  }
  report_.ghosts = with_ghosts_.size() - n;
  return with_ghosts_;
}

}  // namespace orbis
