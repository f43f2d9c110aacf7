// Benchmark of the GPU-resident step (issue #12): the CUDA step engine's step (kick, drift,
// forces, kick) per phase on one GPU, with the device and host peak memory and the bytes per
// particle. Scenes:
//   ics       2LPT initial conditions at --z (default 99): the early, nearly uniform state;
//   evolved   2LPT ICs at --z-start (default 9) run to z = 0 by the engine itself in coarse
//             global steps of --coarse-dln in ln a (default 0.1): a clustered z = 0 state
//             with haloes (coarse steps: its haloes are not converged, its cost per step is
//             that of a clustered state);
//   clustered the test suite's clustered set (sheets, filaments, two Plummer haloes).
// Each timed step is kick(half) + drift + compute_forces(long and short range) + kick(half),
// ended by the step criterion's reduction (max |g|, a wait for the device); the phases are
// the engine's (device times for tree, walk, P2P and far field; wall time for the PM and
// what is left, "kick, drift and rest"). Every timed step is a long-range step, under the
// tree policy (tree/tree_reuse.hpp): --reps cycles of K steps after one warm-up step, each
// cycle begun by a step that builds the tree (asked for) followed by K - 1 that reuse it
// (refit, unless the P2P pairs grew by 10%); the medians of the building and of the reusing
// steps are printed apart, and their average over a cycle (what a run pays per PM step).
//
//   bench_step_cuda [--scene=ics|evolved|clustered] [--side=N] [--box=L] [--z=Z]
//                   [--z-start=Z] [--coarse-dln=D] [--reps=R] [--precision=float|double]
//                   [--max-leaf=L] [--rebuild-every=K] [--chunk-tasks=T] [--memory-limit-gib=G]
// --rebuild-every: [gpu] tree_rebuild_every (default 4; 1: every step builds);
// --chunk-tasks: at most T P2P tasks sorted at once (default 0: as memory allows); a list
// T1,T2,... times the steps for each in turn on the same state (the memory peak is the
// largest so far: list the smaller chunks first);
// --memory-limit-gib: [gpu] memory_limit_gib (the step then chunks its tasks to fit).
#include <sys/resource.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "core/params.hpp"
#include "core/timer.hpp"
#include "cosmology/cosmology.hpp"
#include "cosmology/linear_power.hpp"
#include "ic/initial_conditions.hpp"
#include "support/clustered_particles.hpp"
#if defined(ORBIS_HAVE_CUDA)
#include "fmm/p2p_cuda_factory.hpp"
#include "gpu/step_engine_cuda.hpp"
#endif

using namespace orbis;

#if defined(ORBIS_HAVE_CUDA)

namespace {

struct Options {
  std::string scene = "evolved";
  int side = 256;
  double box = 1000;
  double z = 99;
  double z_start = 9;
  double coarse_dln = 0.1;
  int reps = 3;
  std::string precision = "float";
  int max_leaf = 32;
  int rebuild_every = 4;
  std::vector<std::size_t> chunk_tasks{0};
  double memory_limit_gib = 0;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](const char* key) -> const char* {
      const std::size_t len = std::strlen(key);
      return a.compare(0, len, key) == 0 ? a.c_str() + len : nullptr;
    };
    if (const char* v = value("--scene=")) o.scene = v;
    else if (const char* v = value("--side=")) o.side = std::atoi(v);
    else if (const char* v = value("--box=")) o.box = std::atof(v);
    else if (const char* v = value("--z=")) o.z = std::atof(v);
    else if (const char* v = value("--z-start=")) o.z_start = std::atof(v);
    else if (const char* v = value("--coarse-dln=")) o.coarse_dln = std::atof(v);
    else if (const char* v = value("--reps=")) o.reps = std::atoi(v);
    else if (const char* v = value("--precision=")) o.precision = v;
    else if (const char* v = value("--max-leaf=")) o.max_leaf = std::atoi(v);
    else if (const char* v = value("--rebuild-every=")) o.rebuild_every = std::atoi(v);
    else if (const char* v = value("--chunk-tasks=")) {
      o.chunk_tasks.clear();
      for (const char* c = v; *c;) {
        char* end = nullptr;
        o.chunk_tasks.push_back(std::strtoull(c, &end, 10));
        c = *end == ',' ? end + 1 : end;
      }
    }
    else if (const char* v = value("--memory-limit-gib=")) o.memory_limit_gib = std::atof(v);
    else {
      std::fprintf(stderr, "unknown argument %s\n", argv[i]);
      std::exit(2);
    }
  }
  return o;
}

Params params_for(const Options& o, double z_init) {
  return Params::parse("[box]\nsize_mpc_h = " + std::to_string(o.box) + "\nparticles_per_side = " +
                           std::to_string(o.side) + "\n[ic]\nz_init = " + std::to_string(z_init) +
                           "\n[gpu]\nbackend = \"cuda\"\np2p_precision = \"" + o.precision +
                           "\"\nmemory_limit_gib = " + std::to_string(o.memory_limit_gib) +
                           "\n[gravity]\nmax_leaf = " + std::to_string(o.max_leaf) + "\n",
                       "bench_step_cuda.toml");
}

double host_peak_gib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / (1024.0 * 1024.0);   // ru_maxrss: KiB
}

// One KDK step of the engine from a to a_next (global, every particle active).
void kdk(CudaStepEngine& engine, const Cosmology& c, double a, double a_next, ForceStats& stats) {
  const double a_half = std::sqrt(a * a_next);
  KickPlan first, second;
  first.long_range = c.kick_factor(a, a_half);
  first.min_active_bin = 0;
  first.short_range.fill(first.long_range);
  second.long_range = c.kick_factor(a_half, a_next);
  second.min_active_bin = 0;
  second.short_range.fill(second.long_range);
  engine.kick(first);
  engine.drift(c.drift_factor(a, a_next));
  engine.compute_forces(true, 0, stats);
  engine.kick(second);
  engine.max_acceleration();   // the step criterion: waits for the device
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  std::string why;
  if (!cuda_device_usable(0, &why)) {
    std::printf("no usable GPU: %s\n", why.c_str());
    return 0;
  }
  const bool from_ics = o.scene != "clustered";
  const double z_init = o.scene == "evolved" ? o.z_start : o.z;
  const Params params = params_for(o, z_init);
  const Cosmology cosmology = Cosmology::from_params(params);
  Stopwatch setup;
  Particles particles = from_ics ? make_initial_conditions(params, cosmology, LinearPower::from_params(params))
                                 : test::clustered_particle_set(o.side, o.box, 2024);
  const std::size_t n = particles.size();
  CudaStepEngine engine(params);
  TreeReuseSettings tree;
  tree.rebuild_every = o.rebuild_every;
  engine.set_tree_policy(tree);
  engine.set_max_chunk_tasks(o.chunk_tasks.front());
  engine.load(std::move(particles));
  ForceStats stats;
  engine.compute_forces(true, 0, stats);
  double a = from_ics ? 1.0 / (1.0 + z_init) : 1.0;
  int coarse = 0;
  if (o.scene == "evolved") {
    const int steps = static_cast<int>(std::ceil(std::log(1.0 / a) / o.coarse_dln));
    const double a0 = a;
    for (int k = 1; k <= steps; ++k) {
      const double a_next = a0 * std::exp(std::log(1.0 / a0) * k / steps);
      ForceStats s;
      kdk(engine, cosmology, a, a_next, s);
      a = a_next;
      ++coarse;
    }
  }
  std::printf("# %s: %d^3 particles in %.0f Mpc/h at z = %.3g (%s; %d coarse steps), %s P2P; setup %.1f s\n",
              o.scene.c_str(), o.side, o.box, 1 / a - 1, engine.device_name().c_str(), coarse, o.precision.c_str(),
              setup.seconds());
  std::printf("# %s\n", engine.describe().c_str());

  // Timed steps at a fixed scale factor range (a tiny step: the state stays the scene's).
  const double dln = 1e-3;
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v[v.size() / 2];
  };
  for (const std::size_t chunk : o.chunk_tasks) {
    engine.set_max_chunk_tasks(chunk);
    std::printf("## P2P tasks per chunk: %s\n", chunk == 0 ? "as memory allows" : std::to_string(chunk).c_str());
    // Per kind of step (tree built, tree reused): phase times, totals, pairs.
    struct Kind {
      std::map<std::string, std::vector<double>> phases;
      std::vector<double> totals, interactions, m2l;
    };
    Kind kinds[2];   // 0: built, 1: reused
    for (int r = 0; r <= o.reps * o.rebuild_every; ++r) {
      // Each cycle of K steps begins with a build (the warm-up step r = 0 too).
      if (r % o.rebuild_every == 1 || o.rebuild_every == 1 || r == 0) engine.rebuild_tree_next();
      ForceStats s;
      Stopwatch watch;
      kdk(engine, cosmology, a, a * std::exp(dln), s);
      const double total = watch.seconds();
      a *= std::exp(dln);
      if (r == 0) continue;   // warm-up
      const bool built = engine.last_step_built_tree();
      Kind& k = kinds[built ? 0 : 1];
      double phases_sum = 0;
      for (const auto& [name, seconds] : s.times.all()) {
        k.phases[name].push_back(seconds);
        phases_sum += seconds;
      }
      k.phases["kick, drift and rest"].push_back(total - phases_sum);
      k.totals.push_back(total);
      k.interactions.push_back(s.p2p_interactions);
      k.m2l.push_back(s.m2l_interactions);
      std::printf("  step %d (%d since the cycle's build): %.4f s; %s\n", r, (r - 1) % o.rebuild_every, total,
                  engine.last_step_details().c_str());
    }
    std::printf("| phase | tree built (%zu steps) | tree reused (%zu steps) |\n| --- | --- | --- |\n",
                kinds[0].totals.size(), kinds[1].totals.size());
    for (const char* name : {"pm", "tree", "walk", "p2p", "m2l", "kick, drift and rest"})
      std::printf("| %s | %.4f | %.4f |\n", name, median(kinds[0].phases[name]), median(kinds[1].phases[name]));
    const double built = median(kinds[0].totals), reused = median(kinds[1].totals);
    std::printf("| **step** | **%.4f** | **%.4f** |\n", built, reused);
    std::printf("| P2P pairs | %.4e | %.4e |\n", median(kinds[0].interactions), median(kinds[1].interactions));
    if (!kinds[1].totals.empty())
      std::printf("per long-range step, one build in %d: %.4f s\n", o.rebuild_every,
                  (built + (o.rebuild_every - 1) * reused) / o.rebuild_every);
    const double dev = static_cast<double>(engine.peak_device_bytes());
    std::printf("M2L tasks %.3e; device peak so far %.2f GiB (%.0f bytes/particle, planned %.0f), host peak %.2f GiB "
                "(%.0f bytes/particle)\n",
                median(kinds[0].m2l), dev / (1 << 30), dev / n, static_cast<double>(engine.planned_device_bytes()) / n,
                host_peak_gib(), host_peak_gib() * (1 << 30) / n);
  }
  std::printf("# %s\n", engine.tree_summary().c_str());
  return 0;
}
#else
int main() {
  std::printf("bench_step_cuda: this build has no CUDA (configure with -DORBIS_CUDA=ON)\n");
  return 0;
}
#endif
