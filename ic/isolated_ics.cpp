#include "ic/isolated_ics.hpp"

#include <string>

#include "core/error.hpp"
#include "core/log.hpp"
#include "core/params.hpp"
#include "core/physical_units.hpp"
#include "ic/hernquist.hpp"
#include "ic/parabolic_orbit.hpp"
#include "ic/plummer.hpp"

namespace orbis {

std::uint64_t check_isolated_ics(const Params& params) {
  const auto n = static_cast<std::uint64_t>(params.get_int("ic.particles"));
  if (params.get_string("ic.kind") != "merger") return n;
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
  const std::string kind = params.get_string("ic.kind");
  SphereSettings sphere;
  sphere.n = static_cast<std::size_t>(params.get_int("ic.particles"));
  sphere.mass = params.get_real("ic.mass");
  sphere.scale_radius = params.get_real("ic.scale_radius");
  sphere.g = physical_units(params).g;
  sphere.seed = static_cast<std::uint64_t>(params.get_int("ic.seed"));
  sphere.r_max = params.get_real("ic.r_max_over_a") * sphere.scale_radius;
  IsolatedSystem system;
  if (kind == "plummer") {
    system = make_plummer(sphere);
  } else if (kind == "hernquist") {
    system = make_hernquist(sphere);
  } else {
    check_isolated_ics(params);
    ParabolicEncounter orbit;
    orbit.separation = params.get_real("ic.separation");
    orbit.pericentre = params.get_real("ic.pericentre");
    orbit.g = sphere.g;
    const IsolatedSystem a = make_hernquist(sphere);
    sphere.seed += 1;
    const IsolatedSystem b = make_hernquist(sphere);
    system = place_on_parabolic_orbit(a, b, orbit);
  }
  Particles particles;
  particles.mass = system.particle_mass;
  particles.pos = std::move(system.pos);
  particles.mom = std::move(system.vel);   // p = dx/dt for the Newtonian clock
  particles.id.resize(particles.pos.size());
  for (std::size_t i = 0; i < particles.id.size(); ++i) particles.id[i] = i + 1;
  log::info("initial conditions: {} ({} particles of mass {:.6g}, scale radius {:.6g}, G = {:.6g})", kind,
            particles.size(), particles.mass, sphere.scale_radius, sphere.g);
  return particles;
}

}  // namespace orbis
