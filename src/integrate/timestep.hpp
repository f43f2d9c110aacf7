// Global adaptive step (docs/design.md, "Time stepping"): the step in ln a is limited by time.max_dln_a and, when
// the force is softened, by dt <= eta sqrt(eps_phys / |g_phys|) = eta sqrt(eps a^3 / |g|)
// (eps comoving, g comoving: g_phys = g / a^2). Steps are then evened out so that they land
// exactly on the next output instead of leaving a sliver.
#pragma once

namespace orbis {

class Cosmology;

struct StepLimits {
  double max_dln_a = 0.025;
  double eta = 0.2;        // 0: no force criterion
  double softening = 0;   // comoving Mpc/h; 0: no force criterion
};

// The ln-a step the criteria allow at scale factor a, given the largest |g| of any particle.
double allowed_dln_a(const StepLimits& limits, const Cosmology& cosmology, double a, double max_acc);
// The end of the next step from a towards `target`, with steps of at most dln_a, all equal.
double next_scale_factor(double a, double target, double dln_a);

}  // namespace orbis
