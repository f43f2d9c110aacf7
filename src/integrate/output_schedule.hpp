// The values of the run clock's variable (run_clock.hpp) at which outputs are written: a
// cosmological run's scale factors of the requested output redshifts plus the final one, an
// isolated system's output times plus its end time (a run always saves its end state),
// sorted, checked against the run's span before any work. Steps are shortened so that they
// land on these exactly. (The members say a: the clock's variable, t for an isolated system.)
#pragma once
#include <string>
#include <vector>

namespace orbis {

class Params;

struct OutputSchedule {
  double a_begin = 0, a_end = 0;
  std::vector<double> a_outputs;   // increasing, the last one is a_end

  // The run starts at z_init (from [ic] z_init, or from the IC file's header; `z_init_source`
  // names where it came from in messages).
  static OutputSchedule from_params(const Params& params, double z_init, const std::string& z_init_source);
  // An isolated system's ([gravity] boundary = "vacuum"): [time] t_begin to t_end, outputs at
  // output_times and every output_interval from t_begin.
  static OutputSchedule from_times(const Params& params);
  // The first output strictly after a (with a relative tolerance), or a_end.
  double next_after(double a) const;
  bool is_output(double a) const;
};

}  // namespace orbis
