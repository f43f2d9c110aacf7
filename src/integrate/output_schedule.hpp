// The scale factors at which outputs are written: the requested output redshifts plus the
// final redshift (a run always saves its end state), sorted, checked against the run's span
// before any work. Steps are shortened so that they land on these exactly.
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
  // The first output strictly after a (with a relative tolerance), or a_end.
  double next_after(double a) const;
  bool is_output(double a) const;
};

}  // namespace orbis
