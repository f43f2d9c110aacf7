// Whole runs with the CUDA step engine (make_step_engine picks it for [gpu] backend = "cuda"):
// two runs of the same small configuration write bitwise identical snapshots, and the demo
// (params/demo.toml) run on the GPU and on the CPU (host engine, CPU P2P) ends with the same
// z = 0 power spectrum. The CPU run is the reference: the two differ only in rounding
// (summation order of the float P2P, the far field, the PM's FFTs), which the orbits'
// chaos amplifies. How much rounding alone moves the demo's z = 0 P(k) (measured on an H100
// and 16 cores): the CPU run with float vs double P2P differ by up to 6e-4 for k <= 1 h/Mpc,
// the GPU run with float vs double P2P by up to 1.3e-3, both below 2e-4 for k <= 0.5 h/Mpc.
// So the bars: 0.1% for k <= 0.5 h/Mpc, where that noise is five times smaller, and 0.2% for
// k <= 1 h/Mpc, about the noise itself; a force error of 0.1% on the GPU alone would
// exceed them. And the P(k) the run measures on the device at an output (StepEngine::
// power_spectrum) is the host estimator's of the same output's snapshot. Returns 77 without a
// usable GPU.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "analysis/power_spectrum.hpp"
#include "core/params.hpp"
#include "integrate/simulation.hpp"
#include "io/snapshot.hpp"
#include "support/gpu_skip.hpp"
#include "support/scratch_dir.hpp"

using namespace orbis;

namespace {

template <typename T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

// A small clustered run (2LPT from z = 19 to z = 1, 32^3 particles in 32 Mpc/h, the default
// hierarchical steps), its snapshots at z = 3 and z = 1 in `dir`.
RunSummary small_run(const std::string& dir) {
  const Params params = Params::parse(
      "[box]\nsize_mpc_h = 32.0\nparticles_per_side = 32\n[ic]\nz_init = 19.0\nseed = 77\n"
      "[time]\nz_final = 1.0\noutput_redshifts = [3.0, 1.0]\n"
      "[analysis]\npk = false\nfof = false\n[gpu]\nbackend = \"cuda\"\n"
      "[output]\nsnapshots = true\ndirectory = \"" + dir + "\"\n",
      "run_cuda.toml");
  Simulation sim(params);
  return sim.run();
}

}  // namespace

TEST_CASE("GPU runs: two runs of the same configuration write bitwise identical snapshots") {
  test::require_gpu_or_skip();
  test::ScratchDir a("run_cuda_a"), b("run_cuda_b");
  const RunSummary sa = small_run(a.path());
  const RunSummary sb = small_run(b.path());
  MESSAGE("two GPU runs: " << sa.steps << " and " << sb.steps << " steps, " << sa.seconds << " s and " << sb.seconds
                           << " s");
  CHECK(sa.steps == sb.steps);
  CHECK(sa.steps > 10);
  // Hierarchical steps (the default) with active subsets on the device: fewer force
  // evaluations than sync points times particles.
  MESSAGE("full-step equivalents " << sa.full_step_equivalents << " over " << sa.steps << " sync points");
  CHECK(sa.full_step_equivalents == sb.full_step_equivalents);
  CHECK(sa.full_step_equivalents < 0.9 * static_cast<double>(sa.steps));
  for (const char* name : {"snapshot_000.hdf5", "snapshot_001.hdf5"}) {
    CAPTURE(name);
    const Snapshot x = read_snapshot(a.file(name)), y = read_snapshot(b.file(name));
    REQUIRE(x.particles.size() == 32u * 32u * 32u);
    CHECK(x.header.a == y.header.a);
    CHECK(same_bits(x.particles.pos, y.particles.pos));
    CHECK(same_bits(x.particles.mom, y.particles.mom));
    CHECK(same_bits(x.particles.id, y.particles.id));
  }
  // The particles moved: a run that wrote its ICs twice would pass the checks above.
  const Snapshot z3 = read_snapshot(a.file("snapshot_000.hdf5")), z1 = read_snapshot(a.file("snapshot_001.hdf5"));
  CHECK_FALSE(same_bits(z3.particles.pos, z1.particles.pos));
}

TEST_CASE("GPU run of the demo: the z = 0 power spectrum of the CPU run within 0.1% (k <= 0.5 h/Mpc), 0.2% (k <= 1)") {
  test::require_gpu_or_skip();
  test::ScratchDir dir("run_cuda_demo");
  const std::string demo = std::string(ORBIS_SOURCE_DIR) + "/params/demo.toml";
  auto final_power = [&](const std::string& backend, RunSummary& summary) {
    const Params params = Params::load(demo, {"gpu.backend=\"" + backend + "\"", "output.directory=\"" +
                                              dir.file(backend) + "\"", "output.snapshots=false",
                                              "analysis.pk=false", "analysis.fof=false"});
    Simulation sim(params);
    summary = sim.run();
    return measure_power_spectrum(sim.particles().pos, params.get_real("box.size_mpc_h"),
                                  PowerSpectrumSettings::from_params(params));
  };
  RunSummary gpu_run, cpu_run;
  const PowerSpectrum gpu = final_power("cuda", gpu_run);
  const PowerSpectrum cpu = final_power("cpu", cpu_run);
  REQUIRE(gpu.bins.size() == cpu.bins.size());
  std::printf("demo to z = 0: GPU %lld steps (%.1f full-step equivalents) in %.1f s, CPU %lld steps (%.1f) in %.1f s\n"
              "     k [h/Mpc]   P_cpu         P_gpu/P_cpu - 1\n",
              static_cast<long long>(gpu_run.steps), gpu_run.full_step_equivalents, gpu_run.seconds,
              static_cast<long long>(cpu_run.steps), cpu_run.full_step_equivalents, cpu_run.seconds);
  double worst_half = 0, worst = 0;
  int compared = 0;
  for (std::size_t i = 0; i < cpu.bins.size(); ++i) {
    const PowerSpectrumBin &c = cpu.bins[i], &g = gpu.bins[i];
    if (c.k_mean > 1.0) break;
    const double d = std::fabs(g.power / c.power - 1);
    worst = std::max(worst, d);
    if (c.k_mean <= 0.5) worst_half = std::max(worst_half, d);
    ++compared;
    if (i % 2 == 0) std::printf("  %10.4f  %12.5e  %+.3e\n", c.k_mean, c.power, g.power / c.power - 1);
  }
  std::printf("largest |P_gpu/P_cpu - 1|: %.3e for k <= 0.5 h/Mpc, %.3e for k <= 1 h/Mpc (%d bins)\n", worst_half, worst,
              compared);
  std::fflush(stdout);
  // Hierarchical steps: a particle whose |g| sits at a bin threshold may take a neighbouring
  // bin on the other backend (float vs double rounding, and the GPU's 3N mesh against the
  // CPU's 2N). The sync points of a PM step are set by its single deepest particle, so one
  // particle a bin deeper doubles them (1196 against 1381 at the default steps of 2026-11-30);
  // the force evaluations, the steps' work, must agree. Both runs must end at z = 0.
  CHECK(gpu_run.a_final == doctest::Approx(1.0).epsilon(1e-12));
  CHECK(cpu_run.a_final == doctest::Approx(1.0).epsilon(1e-12));
  CHECK(std::abs(gpu_run.full_step_equivalents / cpu_run.full_step_equivalents - 1) < 0.05);
  CHECK(compared > 10);
  CHECK(worst_half < 1e-3);
  CHECK(worst < 2e-3);
}

namespace {

// The rows of a powerspec_NNN.txt: k_mean, P, N_modes, shot noise, P_lin D^2, fold.
std::vector<std::vector<double>> power_spectrum_rows(const std::string& path) {
  std::ifstream in(path);
  REQUIRE(in.good());
  std::vector<std::vector<double>> rows;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    std::vector<double> row(6);
    for (double& v : row) fields >> v;
    REQUIRE(!fields.fail());
    rows.push_back(row);
  }
  return rows;
}

}  // namespace

TEST_CASE("GPU run: the P(k) measured on the device at an output is the host estimator's of its snapshot") {
  test::require_gpu_or_skip();
  test::ScratchDir dir("run_cuda_pk");
  const Params params = Params::parse(
      "[box]\nsize_mpc_h = 32.0\nparticles_per_side = 32\n[ic]\nz_init = 19.0\nseed = 77\n"
      "[time]\nz_final = 1.0\noutput_redshifts = [3.0, 1.0]\n"
      "[analysis]\npk = true\npk_fold_factor = 2\nfof = false\n[gpu]\nbackend = \"cuda\"\n"
      "[output]\nsnapshots = true\ndirectory = \"" + dir.path() + "\"\n",
      "run_cuda_pk.toml");
  Simulation sim(params);
  sim.run();
  for (const char* number : {"000", "001"}) {
    CAPTURE(number);
    const Snapshot snap = read_snapshot(dir.file(std::string("snapshot_") + number + ".hdf5"));
    const PowerSpectrum host = measure_power_spectrum(snap.particles.pos, params.get_real("box.size_mpc_h"),
                                                      PowerSpectrumSettings::from_params(params));
    const auto rows = power_spectrum_rows(dir.file(std::string("powerspec_") + number + ".txt"));
    REQUIRE(rows.size() == host.bins.size());
    REQUIRE(rows.size() > 10);
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const PowerSpectrumBin& h = host.bins[i];
      CAPTURE(h.k_mean);
      CHECK(rows[i][0] == doctest::Approx(h.k_mean).epsilon(1e-11));
      CHECK(rows[i][1] == doctest::Approx(h.power).epsilon(1e-5));
      CHECK(rows[i][2] == static_cast<double>(h.modes));
      CHECK(rows[i][3] == doctest::Approx(h.shot_noise).epsilon(1e-11));
      CHECK(std::isfinite(rows[i][4]));   // the linear column, filled in by the writer
      CHECK(rows[i][5] == h.fold);
    }
  }
}
