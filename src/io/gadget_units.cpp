#include "io/gadget_units.hpp"

#include "io/hdf5_file.hpp"

namespace orbis {

void describe_dataset(H5Writer& file, const std::string& dataset, const GadgetUnit& u,
                      const std::string& description) {
  file.attribute(dataset, "a_scaling", u.a_scaling);
  file.attribute(dataset, "h_scaling", u.h_scaling);
  file.attribute(dataset, "length_scaling", u.length);
  file.attribute(dataset, "mass_scaling", u.mass);
  file.attribute(dataset, "velocity_scaling", u.velocity);
  file.attribute(dataset, "to_cgs", u.to_cgs);
  file.attribute(dataset, "Description", description);
}

std::vector<double> flatten(const std::vector<Vec3d>& v, double scale) {
  std::vector<double> out(3 * v.size());
  for (std::size_t i = 0; i < v.size(); ++i)
    for (int d = 0; d < 3; ++d) out[3 * i + d] = v[i][d] * scale;
  return out;
}

}  // namespace orbis
