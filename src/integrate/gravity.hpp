// The force seam of the run loop: PM and FMM meet only here (DESIGN.md). A GravitySolver
// returns the comoving acceleration g = -grad(phi), lap(phi) = 4 pi G (rho - rho_mean), of
// every particle in (km/s)^2/(Mpc/h); the kick turns it into dp = g da/(a^2 H).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "core/particles.hpp"
#include "core/timer.hpp"

namespace orbis {

class Params;

struct ForceStats {
  PhaseTimes times;            // pm, tree, walk, m2l, p2p, ...
  double p2p_interactions = 0;
  double m2l_interactions = 0;
  std::string p2p_where;       // "cpu (2 threads)", "cuda (...)", or empty
};

class GravitySolver {
 public:
  virtual ~GravitySolver() = default;
  virtual void accelerations(const Particles& particles, std::vector<Vec3d>& acc, ForceStats& stats) = 0;
  virtual std::string describe() const = 0;
  // Plummer-equivalent softening length (comoving Mpc/h) for the step criterion; 0 = none.
  virtual double softening() const { return 0.0; }
};

// Built from [gravity] (and [gpu]); every setting is checked here, before any work.
std::unique_ptr<GravitySolver> make_gravity_solver(const Params& params);

}  // namespace orbis
