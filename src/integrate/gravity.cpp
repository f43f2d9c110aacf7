#include "integrate/gravity.hpp"

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/params.hpp"
#include "pm/pm_solver.hpp"

namespace orbis {
namespace {

double sum_of(const PhaseTimes& times) {
  double total = 0;
  for (const auto& [phase, seconds] : times.all()) total += seconds;
  return total;
}

// PM only: the whole force from the mesh (gravity.solver = "pm").
class PmGravity : public GravitySolver {
 public:
  explicit PmGravity(const PmSettings& settings) : pm_(settings) {}
  void accelerations(const Particles& particles, std::vector<Vec3d>& acc, ForceStats& stats) override {
    PhaseTimes pm_times;
    pm_.accelerations(particles.pos, particles.mass, acc, &pm_times);
    stats.times.add("pm", sum_of(pm_times));
  }
  std::string describe() const override {
    const auto& s = pm_.settings();
    return fmt::format("PM only, {}^3 mesh ({} window, cell {:.4g} Mpc/h), {:.1f} MiB", s.grid_side,
                       window_name(s.window), s.box_mpc_h / s.grid_side, pm_.bytes() / 1048576.0);
  }

 private:
  PmSolver pm_;
};

}  // namespace

std::unique_ptr<GravitySolver> make_gravity_solver(const Params& params) {
  const std::string& solver = params.get_string("gravity.solver");
  if (solver == "pm") return std::make_unique<PmGravity>(PmSettings::from_params(params));
  fail("{} = \"{}\" is not available in this build", params.describe("gravity.solver"), solver);
}

}  // namespace orbis
