// The run: ICs, the KDK loop with a global adaptive step, and the outputs (snapshot, power
// spectrum, halo catalogue) at every output redshift. It owns all state (STYLE.md §9).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "core/params.hpp"
#include "core/particles.hpp"
#include "cosmology/cosmology.hpp"
#include "integrate/gravity.hpp"
#include "integrate/output_schedule.hpp"
#include "integrate/timestep.hpp"

namespace orbis {

struct RunSummary {
  int steps = 0;
  double a_final = 0;
  double seconds = 0;
  std::vector<std::string> outputs;   // files written
};

class Simulation {
 public:
  // Validates every parameter and their combinations; does no work.
  explicit Simulation(const Params& params);
  ~Simulation();

  // Generates the ICs (built-in, or [ic] file) and runs to z_final.
  RunSummary run();
  // Runs from the given state at scale factor a (tests, restarts).
  RunSummary run_from(Particles particles, double a);

  const Particles& particles() const { return particles_; }
  const Cosmology& cosmology() const { return cosmology_; }

 private:
  void write_outputs(double a, RunSummary& summary);
  double max_acceleration() const;

  Params params_;
  Cosmology cosmology_;
  double file_a_ = 0;        // scale factor of [ic] file (0: built-in ICs); before file_ics_,
  Particles file_ics_;       // whose initialiser sets it (members initialise in this order)
  OutputSchedule schedule_;
  StepLimits limits_;
  std::unique_ptr<GravitySolver> gravity_;
  Particles particles_;
  std::vector<Vec3d> acc_;
  std::string out_dir_;
  int output_count_ = 0;
};

// `orbis run FILE [--set ...]`: everything above, with the banner and the parameter echo.
int run_simulation_command(const std::string& file, const std::vector<std::string>& overrides);

}  // namespace orbis
