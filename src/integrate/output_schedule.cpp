#include "integrate/output_schedule.hpp"

#include <algorithm>
#include <cmath>

#include "core/error.hpp"
#include "core/params.hpp"

namespace orbis {
namespace {
constexpr double kSameA = 1e-12;   // relative: two scale factors this close are one output
bool same(double a, double b) { return std::abs(a - b) <= kSameA * std::max(a, b); }
}  // namespace

OutputSchedule OutputSchedule::from_params(const Params& params, double z_init, const std::string& z_init_source) {
  OutputSchedule s;
  const double z_final = params.get_real("time.z_final");
  if (!(z_final < z_init))
    fail("{} = {} must be below the starting redshift {} ({})", params.describe("time.z_final"), z_final,
         z_init, z_init_source);
  s.a_begin = 1.0 / (1.0 + z_init);
  s.a_end = 1.0 / (1.0 + z_final);
  for (double z : params.get_real_list("time.output_redshifts")) {
    if (z > z_init || z < z_final)
      fail("{}: output redshift {} lies outside the run, which goes from z = {} to z = {}",
           params.describe("time.output_redshifts"), z, z_init, z_final);
    s.a_outputs.push_back(1.0 / (1.0 + z));
  }
  s.a_outputs.push_back(s.a_end);
  std::sort(s.a_outputs.begin(), s.a_outputs.end());
  s.a_outputs.erase(std::unique(s.a_outputs.begin(), s.a_outputs.end(), same), s.a_outputs.end());
  // An output at z_init itself is the IC: keep it, the run writes it before the first step.
  return s;
}

OutputSchedule OutputSchedule::from_times(const Params& params) {
  OutputSchedule s;
  s.a_begin = params.get_real("time.t_begin");
  s.a_end = params.get_real("time.t_end");
  if (!(s.a_end > s.a_begin))
    fail("{} = {} must be after {} = {}", params.describe("time.t_end"), s.a_end, params.describe("time.t_begin"),
         s.a_begin);
  for (double t : params.get_real_list("time.output_times")) {
    if (t < s.a_begin || t > s.a_end)
      fail("{}: output time {} lies outside the run, which goes from t = {} to t = {}",
           params.describe("time.output_times"), t, s.a_begin, s.a_end);
    s.a_outputs.push_back(t);
  }
  const double interval = params.get_real("time.output_interval");
  if (interval > 0) {
    const double count = std::floor((s.a_end - s.a_begin) / interval * (1 + 1e-12));
    if (count > 1e6)
      fail("{} = {} makes {:.3g} outputs between t = {} and {} (at most 1e6)", params.describe("time.output_interval"),
           interval, count, s.a_begin, s.a_end);
    for (double k = 0; k <= count; ++k) s.a_outputs.push_back(s.a_begin + k * interval);
  }
  s.a_outputs.push_back(s.a_end);
  std::sort(s.a_outputs.begin(), s.a_outputs.end());
  s.a_outputs.erase(std::unique(s.a_outputs.begin(), s.a_outputs.end(), same), s.a_outputs.end());
  return s;
}

double OutputSchedule::next_after(double a) const {
  for (double out : a_outputs)
    if (out > a && !same(out, a)) return out;
  return a_end;
}

bool OutputSchedule::is_output(double a) const {
  return std::any_of(a_outputs.begin(), a_outputs.end(), [&](double out) { return same(out, a); });
}

}  // namespace orbis
