// `orbis ic FILE` end to end on a 16^3 box: the files it writes, read back by read_snapshot
// and Params::load, against what the IC generator makes in memory; its errors; the plot
// script on its self-test table.
#include <doctest/doctest.h>

#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "core/params.hpp"
#include "cosmology/cosmology.hpp"
#include "cosmology/linear_power.hpp"
#include "ic/initial_conditions.hpp"
#include "io/snapshot.hpp"

namespace fs = std::filesystem;

namespace {

fs::path fresh_folder(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("orbis_test_ic_command_" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// Runs a shell command; returns its exit status and leaves its output in `log`.
int run(const std::string& command, const fs::path& log) {
  const int status = std::system((command + " > '" + log.string() + "' 2>&1").c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

const char* kParameters = R"([cosmology]
omega_m = 0.3
omega_b = 0.045
h = 0.7
sigma8 = 0.8
[box]
size_mpc_h = 32.0
particles_per_side = 16
[ic]
z_init = 9.0
seed = 4242
power_spectrum = "eisenstein_hu_nowiggle"
[output]
directory = "{OUT}"
)";

}  // namespace

TEST_CASE("orbis ic writes ics.hdf5, used_parameters.toml and ic_power.txt that read back") {
  const fs::path dir = fresh_folder("run");
  std::string text = kParameters;
  text.replace(text.find("{OUT}"), 5, (dir / "out").string());
  std::ofstream(dir / "ics.toml") << text;
  const int status = run(std::string(ORBIS_BINARY) + " ic '" + (dir / "ics.toml").string() + "' --set ic.lpt_order=2",
                         dir / "log.txt");
  INFO(read_file(dir / "log.txt"));
  REQUIRE(status == 0);
  CHECK(read_file(dir / "log.txt").find("chi^2/dof") != std::string::npos);

  const orbis::Snapshot snap = orbis::read_snapshot((dir / "out" / "ics.hdf5").string());
  CHECK(snap.header.num_total == 4096);
  CHECK(snap.header.a == doctest::Approx(0.1).epsilon(1e-14));
  CHECK(snap.header.redshift == doctest::Approx(9.0).epsilon(1e-14));
  CHECK(snap.header.box_mpc_h == 32.0);
  const double rho_crit = 3.0 * 100.0 * 100.0 / (8.0 * M_PI * 43.0071);
  CHECK(snap.particles.mass == doctest::Approx(0.3 * rho_crit * 32.0 * 32.0 * 32.0 / 4096.0).epsilon(1e-12));
  REQUIRE(snap.particles.size() == 4096);

  // The same ICs made in memory: the file holds them (momenta through u = p / a^1.5 and back).
  const orbis::Params params = orbis::Params::load((dir / "out" / "used_parameters.toml").string());
  CHECK(params.get_int("ic.seed") == 4242);
  CHECK(params.get_int("ic.lpt_order") == 2);
  const orbis::Cosmology cosmology = orbis::Cosmology::from_params(params);
  const orbis::LinearPower power = orbis::LinearPower::from_params(params);
  const orbis::Particles expected = orbis::make_initial_conditions(params, cosmology, power);
  double pos_err = 0, mom_err = 0, mom_max = 0;
  bool ids_ok = true;
  for (std::size_t i = 0; i < 4096; ++i) {
    const std::size_t j = snap.particles.id[i] - 1;   // the file need not keep the order
    ids_ok = ids_ok && j < 4096;
    if (!ids_ok) break;
    for (int d = 0; d < 3; ++d) {
      pos_err = std::max(pos_err, std::abs(snap.particles.pos[i][d] - expected.pos[j][d]));
      mom_err = std::max(mom_err, std::abs(snap.particles.mom[i][d] - expected.mom[j][d]));
      mom_max = std::max(mom_max, std::abs(expected.mom[j][d]));
    }
  }
  std::vector<std::uint64_t> ids = snap.particles.id;
  std::sort(ids.begin(), ids.end());
  for (std::size_t i = 0; i < ids.size(); ++i) ids_ok = ids_ok && ids[i] == i + 1;
  CHECK(ids_ok);
  CHECK(pos_err < 1e-12);
  CHECK(mom_err < 1e-12 * mom_max);
  CHECK(mom_max > 0);

  // The self-test table: one header line, 8 columns, P_input = P_lin D^2 > 0.
  std::ifstream table(dir / "out" / "ic_power.txt");
  std::string header, line;
  std::getline(table, header);
  CHECK(header.rfind("# k_mean", 0) == 0);
  int rows = 0;
  while (std::getline(table, line)) {
    std::istringstream in(line);
    double v[8];
    for (double& x : v) in >> x;
    CHECK(!in.fail());
    CHECK(v[2] > 0);
    CHECK(v[0] == v[4]);
    ++rows;
  }
  CHECK(rows > 10);

  // The README's plot command works on it (numpy + matplotlib in ORBIS_PYTHON).
  const fs::path png = dir / "out" / "ic_power.png";
  const int plot = run(std::string(ORBIS_PYTHON) + " '" ORBIS_SOURCE_DIR "/analysis/python/plot_ic_power.py' '" +
                           (dir / "out" / "ic_power.txt").string() + "' -o '" + png.string() + "'",
                       dir / "plot.txt");
  INFO(read_file(dir / "plot.txt"));
  CHECK(plot == 0);
  CHECK(fs::exists(png));
}

TEST_CASE("orbis ic stops before any work on bad parameters") {
  const fs::path dir = fresh_folder("bad");
  std::string text = kParameters;
  text.replace(text.find("{OUT}"), 5, (dir / "out").string());
  std::ofstream(dir / "ics.toml") << text;
  const std::string cmd = std::string(ORBIS_BINARY) + " ic '" + (dir / "ics.toml").string() + "'";
  CHECK(run(cmd + " --set box.particles_per_side=15", dir / "odd.txt") == 1);
  CHECK(read_file(dir / "odd.txt").find("particles_per_side") != std::string::npos);
  CHECK(run(cmd + " --set ic.power_spectrum=table", dir / "table.txt") == 1);
  CHECK(read_file(dir / "table.txt").find("ic.power_file") != std::string::npos);
  CHECK(!fs::exists(dir / "out" / "ics.hdf5"));
}
