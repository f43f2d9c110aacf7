// The CUDA step engine (gpu/step_engine_cuda.hpp): the particles on the device, forces,
// kicks and drifts there. Its forces are the host TreePM's (CPU backend) up to the float
// P2P's summation order, with the same error against an exact Ewald sum; its drift is the
// host's bit for bit; two engines given the same particles stay bitwise identical through
// forces, kicks and drifts; and a memory plan that does not fit stops load() with a message
// before anything is allocated; the reductions of the step criteria (rms momentum, the new
// bins and their counts) are the host's; a periodic run refuses individual masses (they are
// for isolated systems) before any work. Returns 77 without a usable GPU.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <random>
#include <string>

#include "core/error.hpp"
#include "core/params.hpp"
#include "gpu/step_engine_cuda.hpp"
#include "integrate/kdk.hpp"
#include "integrate/step_engine.hpp"
#include "support/clustered_particles.hpp"
#include "support/engine_forces.hpp"
#include "support/ewald.hpp"
#include "support/gpu_skip.hpp"

using namespace orbis;

namespace {

constexpr int kSide = 32;
constexpr double kBox = 100.0;

// Unsoftened by default (the Ewald reference is).
Params params_for(const std::string& backend, const std::string& gpu_extra = "",
                  const std::string& gravity_extra = "softening_over_spacing = 0.0\n") {
  return Params::parse("[box]\nsize_mpc_h = " + std::to_string(kBox) + "\nparticles_per_side = " +
                           std::to_string(kSide) + "\n[gpu]\nbackend = \"" + backend + "\"\n" + gpu_extra +
                           "[gravity]\nsolver = \"treepm\"\n" + gravity_extra,
                       "step_engine_cuda.toml");
}

// The clustered set with momenta (a smooth field: what drifts and kicks act on).
Particles moving_particles() {
  Particles p = test::clustered_particle_set(kSide, kBox, 2024);
  p.mom.resize(p.size());
  for (std::size_t i = 0; i < p.size(); ++i) {
    const Vec3d& x = p.pos[i];
    p.mom[i] = Vec3d{300 * std::sin(0.07 * x.y), 250 * std::cos(0.05 * x.z), 200 * std::sin(0.09 * x.x)};
  }
  return p;
}

double max_over_rms(const std::vector<Vec3d>& a, const std::vector<Vec3d>& ref) {
  double rms = 0, worst = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    rms += norm2(ref[i]);
    worst = std::max(worst, std::sqrt(norm2(a[i] - ref[i])));
  }
  return worst / std::sqrt(rms / static_cast<double>(ref.size()));
}

bool same_bits(const std::vector<Vec3d>& a, const std::vector<Vec3d>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(Vec3d)) == 0;
}

}  // namespace

TEST_CASE("GPU step engine: the host TreePM's forces and Ewald error") {
  test::require_gpu_or_skip();
  const Particles p = moving_particles();
  // Double meshes: the cuFFT and FFTW PMs then agree to ~1e-12, and what is left is the
  // float P2P's summation order (the float meshes differ by ~1e-6, the CUDA PM's own test).
  // The run's softening: unsoftened close pairs amplify float rounding (GPU rsqrt vs the
  // CPU's division) to ~1e-5 of the rms force for a few particles.
  const std::string double_mesh = "pm_mesh_precision = \"double\"\n";
  {
    auto host = make_step_engine(params_for("cpu", "", double_mesh));
    ForceStats host_stats;
    const std::vector<Vec3d> ref = test::engine_accelerations(*host, p, host_stats);
    CudaStepEngine engine(params_for("cuda", "", double_mesh));
    engine.load(p);
    ForceStats stats;
    engine.compute_forces(true, 0, stats);
    const double d = max_over_rms(engine.accelerations(), ref);
    MESSAGE("engine vs host TreePM (CPU P2P, double meshes): max |diff| / rms " << d << "; " << stats.p2p_where
            << "; device peak " << engine.peak_device_bytes() / 1048576.0 << " MiB, planned "
            << engine.planned_device_bytes() / 1048576.0 << " MiB");
    CHECK(d < 2e-6);
  }

  // The run's defaults (float meshes): the error against Ewald as the host's.
  auto host = make_step_engine(params_for("cpu"));
  ForceStats host_stats;
  const std::vector<Vec3d> ref = test::engine_accelerations(*host, p, host_stats);
  CudaStepEngine engine(params_for("cuda"));
  engine.load(p);
  ForceStats stats;
  engine.compute_forces(true, 0, stats);
  const std::vector<Vec3d> acc = engine.accelerations();

  const test::EwaldSample reference = test::ewald_sample(p.pos, p.mass, kBox, 23);
  const test::ForceErrors e_cpu = test::relative_force_errors(ref, reference);
  const test::ForceErrors e_gpu = test::relative_force_errors(acc, reference);
  std::printf("TreePM vs Ewald: host median %.3e p99 %.3e max %.3e; GPU engine median %.3e p99 %.3e max %.3e\n",
              e_cpu.median, e_cpu.p99, e_cpu.max, e_gpu.median, e_gpu.p99, e_gpu.max);
  std::fflush(stdout);
  CHECK(std::fabs(e_gpu.median / e_cpu.median - 1) < 0.1);
  CHECK(std::fabs(e_gpu.p99 / e_cpu.p99 - 1) < 0.1);
  CHECK(e_gpu.p99 < 1e-3);
}

TEST_CASE("GPU step engine: drift as the host's, bitwise; kick as the host's; two engines bitwise alike") {
  test::require_gpu_or_skip();
  const Particles p = moving_particles();
  const double f_drift = 1.7e-3, f_kick = 2.3e-3;

  CudaStepEngine a(params_for("cuda")), b(params_for("cuda"));
  a.load(p);
  a.drift(f_drift);
  std::vector<Vec3d> x = p.pos;
  drift(x, p.mom, f_drift, kBox);
  CHECK(same_bits(a.particles().pos, x));

  ForceStats stats;
  a.compute_forces(true, 0, stats);
  const std::vector<Vec3d> g = a.accelerations();
  KickPlan plan;
  plan.long_range = f_kick;
  plan.min_active_bin = 0;
  plan.short_range.fill(f_kick);
  a.kick(plan);
  std::vector<Vec3d> mom = p.mom;
  kick(plan, std::vector<std::uint8_t>(p.size(), 0), g, nullptr, mom);   // p + (g_long + g_short) f; the engine adds the two kicks apart
  CHECK(max_over_rms(a.particles().mom, mom) < 1e-12);

  // b repeats a's steps: the same bits throughout.
  b.load(p);
  b.drift(f_drift);
  b.compute_forces(true, 0, stats);
  b.kick(plan);
  for (CudaStepEngine* e : {&a, &b}) {
    e->drift(f_drift);
    e->compute_forces(true, 0, stats);
    e->kick(plan);
  }
  CHECK(same_bits(a.particles().pos, b.particles().pos));
  CHECK(same_bits(a.particles().mom, b.particles().mom));
  CHECK(same_bits(a.accelerations(), b.accelerations()));
  CHECK(a.particles().id == p.id);
}

TEST_CASE("GPU step engine: a memory plan beyond [gpu] memory_limit_gib stops load() before any work") {
  test::require_gpu_or_skip();
  CudaStepEngine engine(params_for("cuda", "memory_limit_gib = 0.001\n"));
  std::string message;
  try {
    engine.load(moving_particles());
  } catch (const Error& e) {
    message = e.what();
  }
  MESSAGE(message);
  CHECK(message.find("needs") != std::string::npos);
  CHECK(message.find("memory_limit_gib = 0.001") != std::string::npos);
  CHECK(message.find("max_leaf") != std::string::npos);
  CHECK(engine.peak_device_bytes() == 0);   // no step ran
}

TEST_CASE("GPU step engine: a periodic run refuses individual masses; the types of one that loads come back") {
  test::require_gpu_or_skip();
  CudaStepEngine engine(params_for("cuda"));
  Particles p = moving_particles();
  p.masses.assign(p.size(), p.mass);   // equal, but given: still refused (the PM and P2P assume one)
  std::string message;
  try {
    engine.load(p);
  } catch (const Error& e) {
    message = e.what();
  }
  MESSAGE(message);
  CHECK(message.find("individual masses") != std::string::npos);
  CHECK(message.find("vacuum") != std::string::npos);
  CHECK(engine.peak_device_bytes() == 0);   // no step ran
  // Without them the same particles load, and their types (all dark matter) come back.
  p.masses.clear();
  p.type.assign(p.size(), 1);
  engine.load(p);
  ForceStats stats;
  engine.compute_forces(true, 0, stats);
  engine.drift(0.0);   // the host copy out of date: particles() downloads
  CHECK(engine.particles().type == p.type);
  CHECK(engine.particles().masses.empty());
}

TEST_CASE("GPU step engine: the memory plan predicts the device peak") {
  test::require_gpu_or_skip();
  // 128^3 particles spread as in the ICs (uniform, the default r_cut over the mean spacing:
  // the task counts per leaf the plan assumes), large enough that the per-particle arrays,
  // not the fixed reserve, make the plan. (A strongly clustered set needs more walk outputs
  // than planned; the walk then grows them, and the peak exceeds the plan: 273 against 258
  // bytes per particle for 256^3 at z = 0 on an H100.)
  const int side = 128;
  const double box = 200;
  const Params params = Params::parse("[box]\nsize_mpc_h = " + std::to_string(box) + "\nparticles_per_side = " +
                                          std::to_string(side) +
                                          "\n[gpu]\nbackend = \"cuda\"\n[gravity]\nsolver = \"treepm\"\n",
                                      "memory_plan.toml");
  Particles p;
  const std::size_t n = static_cast<std::size_t>(side) * side * side;
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> u(0.0, box);
  p.pos.resize(n);
  for (Vec3d& x : p.pos) x = Vec3d{u(rng), u(rng), u(rng)};
  p.mom.assign(n, Vec3d{});
  p.id.resize(n);
  for (std::size_t i = 0; i < n; ++i) p.id[i] = i + 1;
  p.mass = 1.0;
  CudaStepEngine engine(params);
  engine.load(p);
  ForceStats stats;
  engine.compute_forces(true, 0, stats);
  engine.compute_forces(false, 0, stats);
  const double peak = static_cast<double>(engine.peak_device_bytes());
  const double planned = static_cast<double>(engine.planned_device_bytes());
  const double reserve = 256.0 * 1048576.0;
  MESSAGE(n << " particles: device peak " << peak / n << " bytes per particle, planned " << planned / n << " ("
            << (planned - reserve) / n << " without the fixed reserve); " << engine.last_step_details());
  CHECK(peak > 0);
  CHECK(peak <= 1.1 * planned);              // the plan holds what the step uses (to 10%)
  CHECK(peak >= 0.6 * (planned - reserve));   // and is not a loose bound
}

TEST_CASE("GPU step engine: rms momentum is the host engine's, bitwise; bins and counts as bin_for_acceleration's") {
  test::require_gpu_or_skip();
  const Particles p = moving_particles();
  CudaStepEngine engine(params_for("cuda"));
  engine.load(p);
  auto host = make_step_engine(params_for("cpu"));
  host->load(p);
  // The host engine's ordered sum (the same blocks, in the same order): the same bits.
  const double rms = engine.rms_momentum(), rms_host = host->rms_momentum();
  MESSAGE("rms momentum: GPU " << rms << " km/s, host " << rms_host << " km/s");
  CHECK(std::memcmp(&rms, &rms_host, sizeof(double)) == 0);
  CHECK(rms > 100);
  const Vec3d total = engine.total_momentum(), total_host = host->total_momentum();
  MESSAGE("total momentum / particles: GPU " << total.x / p.size() << " " << total.y / p.size() << " "
                                             << total.z / p.size() << " km/s");
  CHECK(std::memcmp(&total, &total_host, sizeof(Vec3d)) == 0);
  CHECK(std::fabs(total.x) > 0);

  ForceStats stats;
  engine.compute_forces(true, 0, stats);
  const std::vector<Vec3d> g = engine.accelerations();
  double g_max = 0;
  for (const Vec3d& a : g) g_max = std::max(g_max, std::sqrt(norm2(a)));
  CHECK(engine.max_acceleration() == doctest::Approx(g_max).epsilon(1e-15));

  // Thresholds that spread the particles over several bins; first every particle (bins
  // 0..6), then only those in bins >= 2 (into 2..5), the others keeping theirs.
  std::vector<std::uint8_t> expected(p.size(), 0);
  BinRule rule;
  rule.acc_bin0 = g_max / 300;
  rule.max_bin = 6;
  for (int pass = 0; pass < 2; ++pass) {
    CAPTURE(pass);
    if (pass == 1) {
      rule.min_active_bin = 2;
      rule.max_bin = 5;
      rule.acc_bin0 = g_max / 40;
    }
    BinCounts counts_expected{};
    for (std::size_t i = 0; i < p.size(); ++i) {
      if (expected[i] >= rule.min_active_bin)
        expected[i] = static_cast<std::uint8_t>(bin_for_acceleration(norm2(g[i]), rule));
      ++counts_expected[expected[i]];
    }
    const BinCounts counts = engine.assign_bins(rule);
    const std::vector<std::uint8_t>& bins = engine.particles().time_bin;
    int used = 0;
    for (std::uint64_t c : counts) used += c > 0;
    MESSAGE("pass " << pass << ": " << used << " bins in use");
    CHECK(used >= 3);
    CHECK(counts == counts_expected);
    CHECK(bins == expected);
  }
}

TEST_CASE("GPU step engine: a step of the active bins gives them the host engine's forces and keeps the others'") {
  test::require_gpu_or_skip();
  // Bins: 2 in a slab and every fifth particle of the next slab (leaves partly active), 1 in
  // a third slab, 0 elsewhere; min_active_bin = 2 makes the first group active.
  Particles p = moving_particles();
  p.time_bin.assign(p.size(), 0);
  std::size_t n_active = 0;
  for (std::size_t i = 0; i < p.size(); ++i) {
    const double x = p.pos[i].x / kBox;
    if (x < 0.25 || (x < 0.5 && i % 5 == 0)) p.time_bin[i] = 2;
    else if (x < 0.75) p.time_bin[i] = 1;
    n_active += p.time_bin[i] >= 2;
  }
  const std::string double_mesh = "pm_mesh_precision = \"double\"\n";   // the PMs agree to ~1e-12
  auto host = make_step_engine(params_for("cpu", "", double_mesh));
  CudaStepEngine subset(params_for("cuda", "", double_mesh)), full(params_for("cuda", "", double_mesh));
  ForceStats stats;
  for (StepEngine* e : std::initializer_list<StepEngine*>{host.get(), &subset, &full}) {
    e->load(p);
    e->compute_forces(true, 0, stats);
  }
  const std::vector<Vec3d> before = subset.accelerations();
  for (StepEngine* e : std::initializer_list<StepEngine*>{host.get(), &subset, &full}) e->drift(2e-3);
  host->compute_forces(false, 2, stats);
  ForceStats subset_stats, full_stats;
  subset.compute_forces(false, 2, subset_stats);
  full.compute_forces(false, 0, full_stats);
  const std::vector<Vec3d>& g_host = host->accelerations();
  const std::vector<Vec3d>& g_subset = subset.accelerations();
  const std::vector<Vec3d>& g_full = full.accelerations();

  std::size_t kept = 0, as_full = 0, moved = 0;
  double rms = 0, worst = 0, worst_full = 0;
  for (std::size_t i = 0; i < p.size(); ++i) {
    if (p.time_bin[i] < 2) {
      kept += std::memcmp(&g_subset[i], &before[i], sizeof(Vec3d)) == 0;
      continue;
    }
    as_full += std::memcmp(&g_subset[i], &g_full[i], sizeof(Vec3d)) == 0;
    moved += std::memcmp(&g_subset[i], &before[i], sizeof(Vec3d)) != 0;
    rms += norm2(g_host[i]);
    worst = std::max(worst, std::sqrt(norm2(g_subset[i] - g_host[i])));
    worst_full = std::max(worst_full, std::sqrt(norm2(g_subset[i] - g_full[i])));
  }
  rms = std::sqrt(rms / static_cast<double>(n_active));
  const double d = worst / rms, d_full = worst_full / rms;
  MESSAGE(n_active << " of " << p.size() << " particles active; GPU vs host engine: max |diff| / rms " << d
                   << "; vs every particle's GPU computation " << d_full << " (" << as_full << " bitwise); P2P pairs "
                   << subset_stats.p2p_interactions << " (subset) vs " << full_stats.p2p_interactions << " (all)");
  CHECK(n_active > p.size() / 5);
  CHECK(n_active < p.size() / 2);
  CHECK(kept == p.size() - n_active);     // the inactive particles keep their forces, bitwise
  CHECK(moved == n_active);               // the active ones got new ones ...
  CHECK(as_full > n_active / 4);          // ... those of every particle's computation: bitwise in
  CHECK(d_full < 2e-6);                   //     wholly active leaves, else up to the float P2P's order
  CHECK(d < 2e-6);                        // ... and the host engine's, up to the float P2P's order
  CHECK(subset_stats.p2p_interactions < 0.8 * full_stats.p2p_interactions);
}

TEST_CASE("GPU step engine: the tree policy; a long-range step that builds gives a restart's bits") {
  test::require_gpu_or_skip();
  // A under [gpu] tree_rebuild_every = 3: the first forces build the tree; sub-steps (full
  // short-range steps here) and the next two long-range steps refit it; the third builds
  // (tree/tree_reuse.hpp). B: an engine just loaded with A's particles, as a restart from a
  // checkpoint, whose first forces build. At the long-range step that built, A's forces are
  // B's bit for bit, and A says so (forces_from_fresh_tree: a checkpoint may be written
  // there); at those that refitted, A says not, and its forces are B's to the far field's
  // truncation error.
  const Particles p = moving_particles();
  CudaStepEngine a(params_for("cuda", "tree_rebuild_every = 3\n"));
  a.load(p);
  ForceStats stats;
  a.compute_forces(true, 0, stats);
  CHECK(a.last_step_built_tree());
  CHECK(a.forces_from_fresh_tree());
  std::vector<bool> built, fresh;
  for (int pm = 1; pm <= 4; ++pm) {
    CAPTURE(pm);
    // Small moves (~0.003 Mpc/h): the pairs grow by less than the 10% that would build (at
    // 5e-4, ~0.15 Mpc/h, this clustered set's pairs grew by more at every PM step on an H200).
    a.drift(1e-5);
    a.compute_forces(false, 0, stats);   // a sub-step: refits
    CHECK(!a.last_step_built_tree());
    a.drift(1e-5);
    stats = ForceStats{};
    a.compute_forces(true, 0, stats);
    CHECK(stats.device_bytes > 0);
    built.push_back(a.last_step_built_tree());
    fresh.push_back(a.forces_from_fresh_tree());
    CudaStepEngine b(params_for("cuda", "tree_rebuild_every = 3\n"));
    b.load(a.particles());
    ForceStats b_stats;
    b.compute_forces(true, 0, b_stats);
    const bool same = same_bits(a.accelerations(), b.accelerations());
    const double d = max_over_rms(a.accelerations(), b.accelerations());
    MESSAGE("long-range step " << pm << ": tree " << (built.back() ? "built" : "refitted") << "; vs a fresh engine "
                               << (same ? "bitwise equal" : "max |diff| / rms " + std::to_string(d)) << "; P2P pairs "
                               << stats.p2p_interactions << " vs " << b_stats.p2p_interactions);
    if (fresh.back()) CHECK(same);
    // Another tree: other far-field groupings, so the multipole truncation differs (the
    // TreePM's error against Ewald is ~1e-4 at p99): close, not equal.
    CHECK(d < 5e-3);
  }
  MESSAGE(a.tree_summary());
  CHECK(built == std::vector<bool>{false, false, true, false});   // by age (the summary says if not)
  CHECK(fresh == built);
  CHECK(a.tree_summary().find("tree built at 2 of 5 long-range steps") != std::string::npos);
}
