// Benchmark of the energy check's W on one GPU (issue #30): from the CUDA step engine's device
// positions (EnergyCheck::potential(StepEngine&): the pair sum with its chaining mesh sorted
// on the device, the mesh term from the engine's PM) against the path before it (the particles
// downloaded, the pair sum's chaining mesh built on the host and its cells uploaded, the mesh
// term from a CudaPmSolver of the check's own: EnergyCheck::potential(engine.particles())),
// on 2LPT initial conditions at --z (default 0.5: a clustered load of the pair sum; z_init > 0) of
// params/photons_256.toml's box and softening. Prints the medians of --reps timed calls after
// one untimed (plans, tables), and the two W's (their terms should be the same bits).
//
//   bench_energy_cuda [--side=N] [--box=L] [--z=Z] [--reps=R]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/params.hpp"
#include "core/timer.hpp"
#include "cosmology/cosmology.hpp"
#include "cosmology/linear_power.hpp"
#include "ic/initial_conditions.hpp"
#include "integrate/energy.hpp"
#if defined(ORBIS_HAVE_CUDA)
#include "fmm/p2p_cuda_factory.hpp"
#include "gpu/step_engine_cuda.hpp"
#endif

using namespace orbis;

#if defined(ORBIS_HAVE_CUDA)

namespace {

struct Options {
  int side = 256;
  double box = 1000;
  double z = 0.5;
  int reps = 3;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](const char* key) -> const char* {
      const std::size_t len = std::strlen(key);
      return a.compare(0, len, key) == 0 ? a.c_str() + len : nullptr;
    };
    if (const char* v = value("--side=")) o.side = std::atoi(v);
    else if (const char* v = value("--box=")) o.box = std::atof(v);
    else if (const char* v = value("--z=")) o.z = std::atof(v);
    else if (const char* v = value("--reps=")) o.reps = std::max(1, std::atoi(v));
    else {
      std::fprintf(stderr, "unknown option %s (--side=N --box=L --z=Z --reps=R)\n", a.c_str());
      std::exit(2);
    }
  }
  return o;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  std::string why;
  if (!cuda_device_usable(0, &why)) {
    std::printf("no usable GPU: %s\n", why.c_str());
    return 0;
  }
  const Params params = Params::parse(
      "[box]\nsize_mpc_h = " + std::to_string(o.box) + "\nparticles_per_side = " + std::to_string(o.side) +
          "\n[ic]\nz_init = " + std::to_string(o.z) + "\n[gravity]\nsoftening_over_spacing = 0.0256\n"
          "[gpu]\nbackend = \"cuda\"\n",
      "bench_energy_cuda.toml");
  const Cosmology cosmology = Cosmology::from_params(params);
  Particles particles = make_initial_conditions(params, cosmology, LinearPower::from_params(params));
  CudaStepEngine engine(params);
  engine.load(std::move(particles));
  std::printf("# %d^3 particles in %.0f Mpc/h, 2LPT at z = %.3g, on %s\n# %s\n", o.side, o.box, o.z,
              engine.device_name().c_str(), engine.describe().c_str());

  EnergyCheck on_device(params), on_host(params);
  PotentialEnergy device_w, host_w;
  std::vector<double> device_s, host_s, download_s;
  for (int r = 0; r <= o.reps; ++r) {
    Stopwatch device_watch;
    device_w = on_device.potential(engine);
    const double d = device_watch.seconds();
    engine.drift(0.0);   // the positions stay; the host copy is stale, as after a step
    Stopwatch host_watch;
    const Particles& p = engine.particles();
    const double download = host_watch.seconds();
    host_w = on_host.potential(p);
    const double h = host_watch.seconds();
    if (r == 0) continue;   // the first: plans, tables, the evaluator
    device_s.push_back(d);
    host_s.push_back(h);
    download_s.push_back(download);
  }
  std::printf("W from the device positions: %.3f s (median of %d)\n", median(device_s), o.reps);
  std::printf("W from the host copy:        %.3f s (of which the download %.3f s)\n", median(host_s),
              median(download_s));
  std::printf("aW device %.15e (mesh %.15e, pairs %.15e)\naW host   %.15e (mesh %.15e, pairs %.15e)\n",
              device_w.total(), device_w.mesh, device_w.pairs, host_w.total(), host_w.mesh, host_w.pairs);
  std::printf("same bits: mesh %s, pairs %s; speed-up %.1fx\n", device_w.mesh == host_w.mesh ? "yes" : "NO",
              device_w.pairs == host_w.pairs ? "yes" : "NO", median(host_s) / median(device_s));
  return 0;
}

#else

int main() {
  std::printf("bench_energy_cuda: this build has no CUDA\n");
  return 0;
}

#endif
