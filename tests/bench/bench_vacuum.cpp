// Benchmark of the vacuum-boundary tree gravity (ShortRangeSolver with Boundary::vacuum:
// ORB tree, multipoles, the walk by the opening angle alone, Newtonian M2L/L2L/L2P and P2P)
// on isolated systems in N-body units (tests/support/vacuum_scenes.hpp), with its force
// error against the exact direct sum on a subsample. Per N and theta: the median of --reps
// timed evaluations after a warm-up, the phases, interactions per particle, and the
// median / 99th percentile / max relative error of the sampled particles' forces.
//
//   bench_vacuum [--p2p=cpu|cuda|engine] [--scene=plummer|hernquist|halo_bulge] [--theta=T[,T...]]
//                [--order=P] [--max-leaf=L] [--softening=EPS] [--double] [--tree-on-host]
//                [--no-leaf-cell] [--reps=R] [--sample=S] [N ...]
//
// Defaults: cpu, plummer, theta 0.5, p = 4, max_leaf 32, softening 0 (the reference is
// unsoftened then), float P2P, 3 reps, 1000 sampled particles, N = 100000 300000 1000000.
// --p2p=cuda (a CUDA build on a machine with a GPU): P2P on the GPU, with the tree and the
// walk on the device too unless --tree-on-host; the far field on the host.
// --p2p=engine: the CUDA step engine with vacuum boundaries (gpu/step_engine_cuda.hpp), the
// particles resident on the device and everything there, the far field included; a force
// evaluation is compute_forces() with a new tree each time ([gpu] tree_rebuild_every = 1),
// timed from the host (its end waits for the device); "refit" repeats it on the last tree. --theta=0: direct summation (all N^2 pairs
// in P2P: small N only). --no-leaf-cell: the walk without leaf-cell pairs (P2L/M2P,
// fmm/walk_pair.hpp; the walk of phase A), host solver only. P2L/pt and M2P/pt: source
// particles expanded into a node (P2L) and nodes evaluated at a particle (M2P), per particle.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/timer.hpp"
#include "fmm/p2p_cpu.hpp"
#include "fmm/short_range.hpp"
#include "support/vacuum_scenes.hpp"
#if defined(ORBIS_HAVE_CUDA)
#include "core/params.hpp"
#include "fmm/p2p_cuda_factory.hpp"
#include "gpu/p2p_cuda.hpp"
#include "gpu/step_engine_cuda.hpp"
#endif

using namespace orbis;

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

#if defined(ORBIS_HAVE_CUDA)
// One evaluation row of the CUDA step engine: median wall time of compute_forces() over reps
// (a new tree each, then on the last tree refitted), its phases, and the errors of acc.
struct EngineRow {
  double build = 0, refit = 0, tree = 0, walk = 0, m2l = 0, p2p = 0, p2p_pairs = 0, m2l_tasks = 0;
};

EngineRow engine_forces(const test::VacuumScene& scene, double theta, int order, int max_leaf, double softening,
                        bool dbl, int reps, std::vector<Vec3d>& acc) {
  const Params params = Params::parse(
      fmt::format("[ic]\nkind = \"plummer\"\nparticles = 1000\n[units]\nsystem = \"nbody\"\n"
                  "[gravity]\nboundary = \"vacuum\"\nsolver = \"{}\"\ntheta = {}\nmultipole_order = {}\n"
                  "max_leaf = {}\nsoftening = {}\n[time]\nt_end = 1.0\nmax_dt = 0.01\n"
                  "[gpu]\nbackend = \"cuda\"\np2p_precision = \"{}\"\ntree_rebuild_every = 1\n",
                  theta == 0 ? "direct" : "fmm", theta == 0 ? 0.5 : theta, order, max_leaf,
                  std::max(softening, 1e-9),   // a run's softening is > 0; 1e-9 moves no force here
                  dbl ? "double" : "float"),
      "bench_vacuum");
  CudaStepEngine engine(params, 0);
  Particles p;
  p.pos = scene.pos;
  p.mom.assign(p.pos.size(), Vec3d{});
  p.id.resize(p.pos.size());
  for (std::size_t i = 0; i < p.id.size(); ++i) p.id[i] = i + 1;
  p.mass = scene.particle_mass;
  p.masses = scene.masses;   // the halo-and-bulge scene's individual masses (else empty)
  engine.load(std::move(p));
  ForceStats stats;
  engine.compute_forces(true, 0, stats);   // warm-up: the pool's first allocations
  std::vector<double> build, refit, tree, walk, m2l, p2p;
  for (int r = 0; r < reps; ++r) {
    ForceStats st;
    Stopwatch watch;
    engine.compute_forces(true, 0, st);   // tree_rebuild_every = 1: a new tree
    build.push_back(watch.seconds());
    tree.push_back(st.times.get("tree"));
    walk.push_back(st.times.get("walk"));
    m2l.push_back(st.times.get("m2l"));
    p2p.push_back(st.times.get("p2p"));
    stats = st;
  }
  for (int r = 0; r < reps; ++r) {
    ForceStats st;
    Stopwatch watch;
    engine.compute_forces(false, 0, st);   // a sub-step: the last tree refitted
    refit.push_back(watch.seconds());
  }
  acc = engine.accelerations();
  return {median(build), median(refit), median(tree), median(walk), median(m2l), median(p2p), stats.p2p_interactions,
          stats.m2l_interactions};
}
#endif

std::vector<double> parse_list(const std::string& text) {
  std::vector<double> out;
  std::stringstream list(text);
  for (std::string t; std::getline(list, t, ',');) out.push_back(std::stod(t));
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = "cpu", scene_name = "plummer";
  std::vector<double> thetas{0.5};
  std::vector<std::size_t> sizes;
  int order = 4, max_leaf = 32, reps = 3;
  std::size_t n_sample = 1000;
  double softening = 0;
  bool dbl = false, tree_on_host = false, leaf_cell = true;
  for (int a = 1; a < argc; ++a) {
    const std::string arg = argv[a];
    auto value = [&](const char* key) { return arg.substr(std::string(key).size()); };
    if (arg.rfind("--p2p=", 0) == 0) mode = value("--p2p=");
    else if (arg.rfind("--scene=", 0) == 0) scene_name = value("--scene=");
    else if (arg.rfind("--theta=", 0) == 0) thetas = parse_list(value("--theta="));
    else if (arg.rfind("--order=", 0) == 0) order = std::stoi(value("--order="));
    else if (arg.rfind("--max-leaf=", 0) == 0) max_leaf = std::stoi(value("--max-leaf="));
    else if (arg.rfind("--softening=", 0) == 0) softening = std::stod(value("--softening="));
    else if (arg.rfind("--reps=", 0) == 0) reps = std::max(1, std::stoi(value("--reps=")));
    else if (arg.rfind("--sample=", 0) == 0) n_sample = std::stoul(value("--sample="));
    else if (arg == "--double") dbl = true;
    else if (arg == "--tree-on-host") tree_on_host = true;
    else if (arg == "--no-leaf-cell") leaf_cell = false;
    else if (!arg.empty() && arg[0] != '-') sizes.push_back(static_cast<std::size_t>(std::stod(arg)));
    else {
      std::fprintf(stderr, "bench_vacuum: unknown argument '%s' (see the top of bench_vacuum.cpp)\n", arg.c_str());
      return 2;
    }
  }
  if (sizes.empty()) sizes = {100000, 300000, 1000000};
  if (scene_name != "plummer" && scene_name != "hernquist" && scene_name != "halo_bulge") {
    std::fprintf(stderr, "bench_vacuum: --scene is plummer, hernquist or halo_bulge\n");
    return 2;
  }

  std::unique_ptr<P2PEvaluator> p2p;
  if (mode == "engine") {
#if defined(ORBIS_HAVE_CUDA)
    std::string why;
    if (!cuda_device_usable(0, &why)) {
      std::fprintf(stderr, "bench_vacuum: --p2p=engine, but %s\n", why.c_str());
      return 1;
    }
#else
    std::fprintf(stderr, "bench_vacuum: --p2p=engine needs a CUDA build\n");
    return 1;
#endif
  } else if (mode == "cpu") {
    p2p = std::make_unique<CpuP2PEvaluator>();
  } else if (mode == "cuda") {
#if defined(ORBIS_HAVE_CUDA)
    std::string why;
    if (!cuda_device_usable(0, &why)) {
      std::fprintf(stderr, "bench_vacuum: --p2p=cuda, but %s\n", why.c_str());
      return 1;
    }
    p2p = std::make_unique<CudaP2PEvaluator>(0);
#else
    std::fprintf(stderr, "bench_vacuum: --p2p=cuda needs a CUDA build\n");
    return 1;
#endif
  } else {
    std::fprintf(stderr, "bench_vacuum: --p2p is cpu, cuda or engine\n");
    return 2;
  }

  if (!leaf_cell && mode == "engine") {
    std::fprintf(stderr, "bench_vacuum: --no-leaf-cell is for the host solver (--p2p=cpu or cuda)\n");
    return 2;
  }
  std::printf("# vacuum tree gravity: %s, p = %d, max_leaf %d, softening %g, %s P2P on %s%s, %s\n", scene_name.c_str(),
              order, max_leaf, softening, dbl ? "double" : "float", mode.c_str(),
              mode == "cuda" && !tree_on_host && !leaf_cell ? " (tree and walk on the device)" : "",
              leaf_cell ? "leaf-cell pairs (P2L/M2P)" : "no leaf-cell pairs");
  std::printf("# %8s %5s | %7s %7s %7s %7s %7s %8s | %8s %7s %7s %7s | %9s %9s %9s | %s\n", "N", "theta", "tree",
              "mpole", "walk", "M2L", "P2P", "total", "P2P/part", "M2L/pt", "P2L/pt", "M2P/pt", "median", "99%", "max",
              "where");
  for (const std::size_t n : sizes) {
    Stopwatch setup;
    const test::VacuumScene scene = scene_name == "plummer"     ? test::plummer_scene(n, 1)
                                    : scene_name == "hernquist" ? test::hernquist_pair_scene(n, 1)
                                                                : test::halo_bulge_scene(n, 1);
    std::vector<std::size_t> sample;
    const std::size_t stride = std::max<std::size_t>(1, n / std::max<std::size_t>(1, n_sample));
    for (std::size_t i = 0; i < n; i += stride) sample.push_back(i);
    const std::vector<Vec3d> exact = test::direct_newtonian(scene, sample, softening);
    std::printf("# N = %zu: scene and exact forces of %zu particles in %.1f s\n", n, sample.size(), setup.seconds());
    for (const double theta : thetas) {
      const auto errors = [&](const std::vector<Vec3d>& acc) {
        std::vector<double> e;
        for (std::size_t q = 0; q < sample.size(); ++q) e.push_back(norm(acc[sample[q]] - exact[q]) / norm(exact[q]));
        std::sort(e.begin(), e.end());
        return std::vector<double>{e[e.size() / 2], e[static_cast<std::size_t>(0.99 * static_cast<double>(e.size() - 1))],
                                   e.back()};
      };
      const double dn = static_cast<double>(n);
#if defined(ORBIS_HAVE_CUDA)
      if (mode == "engine") {
        std::vector<Vec3d> acc;
        const EngineRow row = engine_forces(scene, theta, order, max_leaf, softening, dbl, reps, acc);
        const std::vector<double> e = errors(acc);
        std::printf("  %8zu %5.2f | %7.4f %7s %7.4f %7.4f %7.4f %8.4f | %8.0f %7.1f %7s %7s | %9.2e %9.2e %9.2e | "
                    "CUDA step engine (device-resident); refit step %.4f s\n",
                    n, theta, row.tree, "-", row.walk, row.m2l, row.p2p, row.build, row.p2p_pairs / dn,
                    row.m2l_tasks / dn, "-", "-", e[0], e[1], e[2], row.refit);
        std::fflush(stdout);
        continue;
      }
#endif
      ShortRangeSettings s;
      s.boundary = Boundary::vacuum;
      s.theta = theta;
      s.multipole_order = order;
      s.max_leaf = max_leaf;
      s.softening = softening;
      s.g_mass = scene.particle_mass;
      s.p2p_double = dbl;
      s.tree_on_device = !tree_on_host;
      s.leaf_cell = leaf_cell;
      ShortRangeSolver solver(s);
      std::vector<double> weights;   // individual masses: each over the mean
      for (double m : scene.masses) weights.push_back(m / scene.particle_mass);
      const std::vector<double>* w = weights.empty() ? nullptr : &weights;
      std::vector<Vec3d> acc;
      solver.compute(scene.pos, *p2p, acc, w);   // warm-up
      std::vector<double> tree, mpole, walk, m2l, p2p_time, total;
      ShortRangeStats st;
      for (int r = 0; r < reps; ++r) {
        st = solver.compute(scene.pos, *p2p, acc, w);
        tree.push_back(st.tree_seconds);
        mpole.push_back(st.multipole_seconds);
        walk.push_back(st.walk_seconds);
        m2l.push_back(st.m2l_seconds);
        p2p_time.push_back(st.p2p_seconds);
        total.push_back(st.total_seconds);
      }
      const std::vector<double> e = errors(acc);
      std::printf("  %8zu %5.2f | %7.3f %7.3f %7.3f %7.3f %7.3f %8.3f | %8.0f %7.1f %7.1f %7.1f | %9.2e %9.2e %9.2e | "
                  "%s\n",
                  n, theta, median(tree), median(mpole), median(walk), median(m2l), median(p2p_time), median(total),
                  st.p2p_interactions / dn, st.m2l_interactions / dn, st.p2l_interactions / dn,
                  st.m2p_interactions / dn, e[0], e[1], e[2], st.p2p_where.c_str());
      if (!solver.tasks().p2l.empty()) {
        // How the leaf-cell work is spread over targets (the device gives each target node's
        // P2L, and each target leaf's M2P, to one warp): the largest per target.
        const auto& tasks = solver.tasks();
        const auto& leaves = solver.tree().leaves();
        const auto& p2l_off = solver.walk().p2l_offsets();
        const auto& m2p_off = solver.walk().m2p_offsets();
        double most_p2l = 0, most_m2p = 0;
        std::size_t p2l_targets = 0, m2p_targets = 0;
        for (std::size_t t = 0; t + 1 < p2l_off.size(); ++t) {
          double particles = 0;
          for (std::size_t q = p2l_off[t]; q < p2l_off[t + 1]; ++q) particles += leaves[tasks.p2l[q].source].count;
          most_p2l = std::max(most_p2l, particles);
          p2l_targets += p2l_off[t + 1] > p2l_off[t];
        }
        for (std::size_t l = 0; l + 1 < m2p_off.size(); ++l) {
          most_m2p = std::max(most_m2p, static_cast<double>((m2p_off[l + 1] - m2p_off[l]) * leaves[l].count));
          m2p_targets += m2p_off[l + 1] > m2p_off[l];
        }
        std::printf("#   leaf-cell: %zu pairs; P2L into %zu nodes, at most %.0f particles into one; M2P onto %zu "
                    "leaves, at most %.0f evaluations on one\n",
                    tasks.p2l.size(), p2l_targets, most_p2l, m2p_targets, most_m2p);
      }
      std::fflush(stdout);
    }
  }
  return 0;
}
