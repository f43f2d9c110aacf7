#include "ic/isolated_ics.hpp"

#include <cmath>
#include <string>

#include "core/error.hpp"
#include "core/log.hpp"
#include "core/params.hpp"
#include "core/physical_units.hpp"
#include "ic/hernquist.hpp"
#include "ic/parabolic_orbit.hpp"
#include "ic/plummer.hpp"
#include "io/atomic_file.hpp"
#include "io/system_file.hpp"

namespace orbis {

namespace {

bool has_file(const Params& params) { return params.has("ic.file") && !params.get_string("ic.file").empty(); }

// The generators' keys, which a file's ICs do not take.
constexpr const char* kGeneratorKeys[] = {"ic.particles", "ic.mass",       "ic.mass_ratio", "ic.scale_radius",
                                          "ic.r_max_over_a", "ic.separation", "ic.pericentre"};

}  // namespace

std::uint64_t check_isolated_ics(const Params& params) {
  const bool kind = params.has("ic.kind"), file = has_file(params);
  if (kind && file)
    fail("{} and {} are both given: an isolated system's ICs come from one of them (remove one)",
         params.describe("ic.kind"), params.describe("ic.file"));
  if (!kind && !file)
    fail("{}: an isolated system ([gravity] boundary = \"vacuum\") needs its ICs: [ic] kind (plummer, hernquist or "
         "merger, with [ic] particles) or [ic] file (a GADGET HDF5 or binary file)", params.source());
  if (file) {
    for (const char* key : kGeneratorKeys)
      if (params.given(key))
        fail("{}: a key of the built-in generators ([ic] kind), but the ICs come from {} = '{}', which gives the "
             "particles, their masses and where they are: remove it", params.describe(key), params.describe("ic.file"),
             params.get_string("ic.file"));
    return 0;
  }
  const std::string name = params.get_string("ic.kind");
  if (!params.has("ic.particles"))
    fail("{}: [ic] kind = \"{}\" needs [ic] particles (integer, 1 <= value <= 2e9: the particles of the sphere{})",
         params.source(), name, name == "merger" ? ", of each" : "");
  const auto n = static_cast<std::uint64_t>(params.get_int("ic.particles"));
  if (name != "merger") {
    if (params.given("ic.mass_ratio"))
      fail("{} applies to [ic] kind = \"merger\" only, but {} = \"{}\"", params.describe("ic.mass_ratio"),
           params.describe("ic.kind"), name);
    return n;
  }
  for (const char* key : {"separation", "pericentre"})
    if (!params.has(std::string("ic.") + key))
      fail("{}: [ic] kind = \"merger\" needs [ic] {} (a length in the [units] system)", params.source(), key);
  if (params.get_real("ic.pericentre") > params.get_real("ic.separation"))
    fail("{} = {} exceeds {} = {}: the spheres would start inside their closest approach",
         params.describe("ic.pericentre"), params.get_real("ic.pericentre"), params.describe("ic.separation"),
         params.get_real("ic.separation"));
  return 2 * n;
}

Particles make_isolated_ics(const Params& params) {
  check_isolated_ics(params);
  if (!params.has("ic.kind")) fail("internal: make_isolated_ics without [ic] kind (the ICs come from [ic] file)");
  const std::string kind = params.get_string("ic.kind");
  SphereSettings sphere;
  sphere.n = static_cast<std::size_t>(params.get_int("ic.particles"));
  sphere.mass = params.get_real("ic.mass");
  sphere.scale_radius = params.get_real("ic.scale_radius");
  sphere.g = physical_units(params).g;
  sphere.seed = static_cast<std::uint64_t>(params.get_int("ic.seed"));
  sphere.r_max = params.get_real("ic.r_max_over_a") * sphere.scale_radius;
  IsolatedSystem system;
  std::string second;
  if (kind == "plummer") {
    system = make_plummer(sphere);
  } else if (kind == "hernquist") {
    system = make_hernquist(sphere);
  } else {
    ParabolicEncounter orbit;
    orbit.separation = params.get_real("ic.separation");
    orbit.pericentre = params.get_real("ic.pericentre");
    orbit.g = sphere.g;
    const IsolatedSystem a = make_hernquist(sphere);
    sphere.seed += 1;
    // The second sphere mass_ratio times the first's mass with as many particles, at the same
    // density scale M / (2 pi a^3): a grows as the mass's cube root, so both spheres have one
    // dynamical time (1 / sqrt(G rho)) and the same [time] max_dt and softening serve both.
    // (A ratio of 1 leaves the settings untouched: the equal merger as it always was.)
    const double ratio = params.get_real("ic.mass_ratio");
    if (ratio != 1) {
      sphere.mass *= ratio;
      sphere.scale_radius *= std::cbrt(ratio);
      sphere.r_max = params.get_real("ic.r_max_over_a") * sphere.scale_radius;
      second = fmt::format("; the second sphere: mass {:.6g}, scale radius {:.6g}", sphere.mass, sphere.scale_radius);
    }
    const IsolatedSystem b = make_hernquist(sphere);
    system = place_on_parabolic_orbit(a, b, orbit);
  }
  Particles particles;
  particles.mass = system.particle_mass;
  particles.masses = std::move(system.masses);
  particles.pos = std::move(system.pos);
  particles.mom = std::move(system.vel);   // p = dx/dt for the Newtonian clock
  particles.id.resize(particles.pos.size());
  for (std::size_t i = 0; i < particles.id.size(); ++i) particles.id[i] = i + 1;
  log::info("initial conditions: {} ({} particles of {} {:.6g}, scale radius {:.6g}, G = {:.6g}{})", kind,
            particles.size(), particles.has_individual_masses() ? "mean mass" : "mass", particles.mass,
            params.get_real("ic.scale_radius"), sphere.g, second);
  return particles;
}

Particles read_isolated_ics(Params& params) {
  check_isolated_ics(params);
  std::string path = params.get_string("ic.file");
  if (!path.empty() && path[0] != '/') path = join_path(params.directory(), path);
  SystemFile file = read_system_file(path, physical_units(params));
  std::string types;
  for (int t = 0; t < 6; ++t)
    if (file.per_type[t] > 0) types += fmt::format("{}{} of type {}", types.empty() ? "" : ", ", file.per_type[t], t);
  const Particles& p = file.particles;
  log::info("initial conditions from '{}': {} particles ({}), {} {:.6g}; {}", path, p.size(), types,
            p.has_individual_masses() ? "individual masses, mean" : "all of mass", p.mass, file.units);
  if (file.box != 0)
    log::info("'{}' gives BoxSize = {:.6g}: not used (an isolated system has no box; positions are not wrapped)", path,
              file.box);
  if (!params.has("time.t_begin")) {
    params.set("time.t_begin", ParamValue(file.time), fmt::format("'{}' (its Time)", path));
    log::info("the run starts at the file's Time, t = {:.6g} ([time] t_begin not given)", file.time);
  } else if (params.get_real("time.t_begin") != file.time) {
    log::info("the run starts at {} = {:.6g}, not at the file's Time {:.6g}", params.describe("time.t_begin"),
              params.get_real("time.t_begin"), file.time);
  }
  return std::move(file.particles);
}

}  // namespace orbis
