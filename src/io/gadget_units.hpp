// GADGET-4's unit metadata on every dataset orbis writes (snapshots, catalogues):
//   value_cgs = stored * a^a_scaling * h^h_scaling * to_cgs
// plus a Description, so that tools convert without knowing orbis.
#pragma once
#include <string>
#include <vector>

#include "core/vec3.hpp"

namespace orbis {

class H5Writer;

inline constexpr double kMpcInCm = 3.085678e24;
inline constexpr double kMassUnitInG = 1.989e43;   // 1e10 Msun
inline constexpr double kKmInCm = 1e5;

struct GadgetUnit {
  double a_scaling, h_scaling, length, mass, velocity, to_cgs;
};
inline constexpr GadgetUnit kUnitLength{1, -1, 1, 0, 0, kMpcInCm};         // comoving Mpc/h
inline constexpr GadgetUnit kUnitMass{0, -1, 0, 1, 0, kMassUnitInG};       // 1e10 Msun/h
inline constexpr GadgetUnit kUnitVelocityU{0.5, 0, 0, 0, 1, kKmInCm};      // u = v_pec/sqrt(a)
inline constexpr GadgetUnit kUnitGroupVelocity{-1, 0, 0, 0, 1, kKmInCm};   // a v_pec = a^2 dx/dt
inline constexpr GadgetUnit kUnitNone{0, 0, 0, 0, 0, 1};

void describe_dataset(H5Writer& file, const std::string& dataset, const GadgetUnit& unit,
                      const std::string& description);

// x0 y0 z0 x1 ... times scale, the row-major (n, 3) layout of HDF5 vector datasets.
std::vector<double> flatten(const std::vector<Vec3d>& v, double scale);

}  // namespace orbis
