// The CPU P2P evaluator against plain double loops that know nothing of leaves, grouping
// or tables. "Relative difference" is per particle: |a - a_ref| / |a_ref|,
// with a_ref the double all-pairs sum (minimal image, exact erfc/exp) for that particle.
// Particles with a pair within 1e-6 of r_cut are left out of the max (float and double
// may disagree about which side of the cut such a pair falls; T(x_cut) = 0.018 makes that
// a real jump); there must be few of them.
#include <doctest/doctest.h>

#include <omp.h>

#include <cstring>
#include <random>

#include "core/error.hpp"
#include "fmm/p2p_cpu.hpp"
#include "fmm/p2p_kernel.hpp"
#include "unit/test_p2p_fixture.hpp"

using namespace orbis;

namespace {


struct Compared {
  test::RelStats stats;
  std::size_t near_cut = 0;
};

Compared compare(const std::vector<Vec3d>& acc, const test::DirectResult& ref,
                 const std::vector<std::size_t>& targets) {
  std::vector<double> rel;
  Compared c;
  for (std::size_t k = 0; k < targets.size(); ++k) {
    if (ref.near_cut[k]) { ++c.near_cut; continue; }
    const double den = std::sqrt(norm2(ref.acc[k]));
    if (den == 0) continue;
    rel.push_back(std::sqrt(norm2(acc[targets[k]] - ref.acc[k])) / den);
  }
  c.stats = test::relative_stats(rel);
  return c;
}

std::vector<std::size_t> all_indices(std::size_t n) {
  std::vector<std::size_t> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = i;
  return v;
}

// 12000 clustered particles in a 64 Mpc/h box with their double all-pairs reference,
// built once for the tests that share them (the reference is the expensive part).
struct ClusteredCase {
  P2PSettings settings;
  test::P2PScene scene;
  std::vector<std::size_t> targets;
  test::DirectResult ref;
};
const ClusteredCase& clustered_case() {
  static const ClusteredCase c = [] {
    const double box = 64;
    const std::size_t n = 12000;
    ClusteredCase r;
    r.settings = test::settings_for(box, 32, n);
    r.scene = test::make_scene(test::clustered_positions(n, box, 42), box, 32, r.settings.r_cut);
    r.targets = all_indices(n);
    r.ref = test::direct_reference(r.scene.pos, r.targets, r.settings);
    return r;
  }();
  return c;
}

}  // namespace

TEST_CASE("CPU P2P vs a double all-pairs sum on a clustered set") {
  const ClusteredCase& fixture = clustered_case();
  const test::P2PScene& scene = fixture.scene;
  const test::DirectResult& ref = fixture.ref;
  const auto& targets = fixture.targets;
  P2PSettings st = fixture.settings;
  P2PInput in{&scene.pos, &scene.leaves, &scene.tasks};
  CpuP2PEvaluator cpu;
  std::vector<Vec3d> acc;

  SUBCASE("float, Taylor orders 2..4: median < 1e-6, max < 1e-4") {
    for (int order : {2, 3, 4}) {
      st.taylor_order = order;
      const P2PStats ps = cpu.evaluate(st, in, acc);
      const Compared c = compare(acc, ref, targets);
      MESSAGE("float order " << order << ": median " << c.stats.median << " p99 " << c.stats.p99
              << " max " << c.stats.max << " (" << c.stats.n << " particles, " << c.near_cut
              << " near the cut; " << ps.interactions << " pairs in " << ps.seconds << " s, "
              << ps.where << ")");
      CHECK(c.stats.median < 1e-6);
      CHECK(c.stats.max < 1e-4);
      CHECK(c.near_cut < targets.size() / 100);
    }
  }
  SUBCASE("float, exact erfc path") {
    st.taylor_order = -1;
    cpu.evaluate(st, in, acc);
    const Compared c = compare(acc, ref, targets);
    MESSAGE("float exact: median " << c.stats.median << " max " << c.stats.max);
    CHECK(c.stats.median < 1e-6);
    CHECK(c.stats.max < 1e-4);
  }
  SUBCASE("double: exact path to 1e-12, order-4 table to its truncation error") {
    st.double_precision = true;
    st.taylor_order = -1;
    cpu.evaluate(st, in, acc);
    Compared c = compare(acc, ref, targets);
    MESSAGE("double exact: median " << c.stats.median << " max " << c.stats.max);
    CHECK(c.stats.max < 1e-12);
    st.taylor_order = 4;
    cpu.evaluate(st, in, acc);
    c = compare(acc, ref, targets);
    MESSAGE("double order 4 (512 nodes): median " << c.stats.median << " max " << c.stats.max);
    CHECK(c.stats.max < 1e-10);   // table error |dT| ~ 1e-14, relative to small forces
  }
  SUBCASE("low orders are visibly worse (the order parameter is honoured)") {
    st.taylor_order = 0;
    cpu.evaluate(st, in, acc);
    const Compared c0 = compare(acc, ref, targets);
    st.taylor_order = 3;
    cpu.evaluate(st, in, acc);
    const Compared c3 = compare(acc, ref, targets);
    MESSAGE("order 0 median " << c0.stats.median << " vs order 3 " << c3.stats.median);
    CHECK(c0.stats.median > 10 * c3.stats.median);
  }
}

TEST_CASE("CPU P2P in a 1 Gpc/h box: leaf-relative float positions stay accurate") {
  // 12000 particles in a 4 Mpc/h region straddling the corner of a 1000 Mpc/h box (so
  // periodic images are exercised); absolute float coordinates would carry 6e-5 Mpc/h
  // errors, 4% of the mean spacing here.
  const double box = 1000;
  const std::size_t n = 12000;
  P2PSettings st = test::settings_for(box, 4096, n);
  st.softening = 0.002;
  auto pos = test::clustered_positions(n, box, 7, 6, 0.5, 0.1, 0.5, {998, 998, 998}, 4);
  test::P2PScene scene = test::make_scene(std::move(pos), box, 32, st.r_cut);
  const auto targets = all_indices(n);
  const test::DirectResult ref = test::direct_reference(scene.pos, targets, st);
  P2PInput in{&scene.pos, &scene.leaves, &scene.tasks};
  CpuP2PEvaluator cpu;
  std::vector<Vec3d> acc;
  cpu.evaluate(st, in, acc);
  const Compared c = compare(acc, ref, targets);
  MESSAGE("1 Gpc/h float order 3: median " << c.stats.median << " p99 " << c.stats.p99 << " max "
          << c.stats.max << " (" << c.near_cut << " near the cut)");
  CHECK(c.stats.median < 1e-6);
  CHECK(c.stats.max < 1e-4);
  // The test can tell: absolute float coordinates (positions rounded to float, then the
  // same double sum) are far off here.
  std::vector<Vec3d> rounded(scene.pos);
  for (auto& p : rounded) p = {double(float(p.x)), double(float(p.y)), double(float(p.z))};
  const test::DirectResult absolute = test::direct_reference(rounded, targets, st);
  const Compared a = compare(absolute.acc, ref, targets);
  MESSAGE("absolute float coordinates would give: median " << a.stats.median << " max " << a.stats.max);
  CHECK(a.stats.median > 1e-5);
}

TEST_CASE("CPU P2P on a random subset of tasks vs a per-task double loop") {
  const double box = 40;
  const std::size_t n = 6000;
  P2PSettings st = test::settings_for(box, 16, n);
  test::P2PScene scene = test::make_scene(test::clustered_positions(n, box, 3), box, 24, st.r_cut);
  std::mt19937_64 rng(5);
  std::vector<InteractionTask> subset;
  for (const auto& t : scene.tasks)   // every 5th leaf is no target at all
    if (t.target % 5 != 2 && rng() % 3 == 0) subset.push_back(t);
  std::shuffle(subset.begin(), subset.end(), rng);
  // Reference: each task's pairs in double, the source at x_j + image * box, exact T.
  std::vector<Vec3d> ref(n);
  for (const auto& t : subset) {
    const Leaf& li = scene.leaves[t.target];
    const Leaf& lj = scene.leaves[t.source];
    for (std::uint32_t i = li.first; i < li.first + li.count; ++i)
      for (std::uint32_t j = lj.first; j < lj.first + lj.count; ++j) {
        const Vec3d d{scene.pos[j].x + t.image[0] * box - scene.pos[i].x,
                      scene.pos[j].y + t.image[1] * box - scene.pos[i].y,
                      scene.pos[j].z + t.image[2] * box - scene.pos[i].z};
        const double r2 = norm2(d);
        if (!(r2 > 0 && r2 < st.r_cut * st.r_cut)) continue;
        const double s2 = r2 + st.softening * st.softening, s = std::sqrt(s2);
        ref[i] += d * (st.g_mass * test::exact_truncation(s / (2 * st.r_s)) / (s2 * s));
      }
  }
  std::vector<char> is_target(n, 0);
  for (const auto& t : subset)
    for (std::uint32_t i = 0; i < scene.leaves[t.target].count; ++i)
      is_target[scene.leaves[t.target].first + i] = 1;
  P2PInput in{&scene.pos, &scene.leaves, &subset};
  CpuP2PEvaluator cpu;
  std::vector<Vec3d> acc(n, Vec3d{1e30, 1e30, 1e30});   // poisoned: evaluate must overwrite
  st.double_precision = true;
  st.taylor_order = -1;
  cpu.evaluate(st, in, acc);
  REQUIRE(acc.size() == n);
  double worst = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (!is_target[i]) {
      CHECK(norm2(acc[i]) == 0.0);   // particles in no target leaf get zero
      continue;
    }
    const double den = std::sqrt(norm2(ref[i]));
    if (den > 0) worst = std::max(worst, std::sqrt(norm2(acc[i] - ref[i])) / den);
  }
  const auto n_targets = std::count(is_target.begin(), is_target.end(), 1);
  CHECK(n_targets < static_cast<long>(n * 9 / 10));   // the zero check above is not vacuous
  MESSAGE("random subset, double exact: max " << worst << " (" << n - n_targets << " particles in no target leaf)");
  CHECK(worst < 1e-12);
}

TEST_CASE("CPU P2P is bitwise reproducible, across runs and thread counts") {
  const double box = 50;
  const std::size_t n = 8000;
  P2PSettings st = test::settings_for(box, 24, n);
  test::P2PScene scene = test::make_scene(test::clustered_positions(n, box, 11), box, 32, st.r_cut);
  P2PInput in{&scene.pos, &scene.leaves, &scene.tasks};
  CpuP2PEvaluator cpu;
  std::vector<Vec3d> a, b, c;
  cpu.evaluate(st, in, a);
  cpu.evaluate(st, in, b);
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  CpuP2PEvaluator single;
  single.evaluate(st, in, c);
  omp_set_num_threads(threads);
  REQUIRE(a.size() == n);
  CHECK(std::memcmp(a.data(), b.data(), n * sizeof(Vec3d)) == 0);
  CHECK(std::memcmp(a.data(), c.data(), n * sizeof(Vec3d)) == 0);
}

namespace {
// The SIMD levels this CPU runs (the dispatcher picks the best; tests force the others).
std::vector<int> runnable_levels() {
  std::vector<int> levels;
  for (int level : {0, 3, 4})
    if (level <= CpuP2PEvaluator::cpu_simd_level()) levels.push_back(level);
  return levels;
}
}  // namespace

TEST_CASE("CPU P2P at every SIMD level this CPU runs, tiled and generic kernels") {
  const ClusteredCase& fixture = clustered_case();
  const test::P2PScene& scene = fixture.scene;
  const test::DirectResult& ref = fixture.ref;
  const auto& targets = fixture.targets;
  P2PSettings st = fixture.settings;
  P2PInput in{&scene.pos, &scene.leaves, &scene.tasks};
  for (int level : runnable_levels()) {
    std::vector<Vec3d> generic, tiled;
    for (int order : {0, 1, 2, 3, 4}) {
      st.taylor_order = order;
      CpuP2POptions go;
      go.simd_level = level;
      go.tiled_kernel = false;
      CpuP2PEvaluator g(go);
      CpuP2PEvaluator t(CpuP2POptions{level, true});
      const P2PStats gs = g.evaluate(st, in, generic);
      const P2PStats ts = t.evaluate(st, in, tiled);
      CHECK(gs.where.find("generic") != std::string::npos);
      const Compared cg = compare(generic, ref, targets);
      const Compared ct = compare(tiled, ref, targets);
      MESSAGE("level " << level << " order " << order << ": generic median " << cg.stats.median
              << " max " << cg.stats.max << " (" << gs.seconds << " s); " << ts.where << " median "
              << ct.stats.median << " max " << ct.stats.max << " (" << ts.seconds << " s)");
      if (order >= 2) {   // the table's truncation error is below float rounding
        CHECK(ct.stats.median < 1e-6);
        CHECK(ct.stats.max < 1e-4);
      } else {            // the same truncation error as the generic loop's
        CHECK(ct.stats.median < 1.2 * cg.stats.median);
      }
      // Where a tiled kernel exists (x86-64-v3 and v4 builds with GCC) it is used.
      if (level >= 3 && t.variant(order, false).find("tiled") != std::string::npos)
        CHECK(ts.where.find("tiled") != std::string::npos);
    }
  }
}

TEST_CASE("Tiled CPU P2P: bitwise reproducible per SIMD level, across runs and thread counts") {
  const double box = 50;
  const std::size_t n = 8000;
  P2PSettings st = test::settings_for(box, 24, n);
  test::P2PScene scene = test::make_scene(test::clustered_positions(n, box, 11), box, 32, st.r_cut);
  P2PInput in{&scene.pos, &scene.leaves, &scene.tasks};
  const int threads = omp_get_max_threads();
  for (int level : runnable_levels()) {
    CpuP2PEvaluator cpu(CpuP2POptions{level, true});
    std::vector<Vec3d> a, b, c;
    cpu.evaluate(st, in, a);
    cpu.evaluate(st, in, b);
    omp_set_num_threads(1);
    CpuP2PEvaluator(CpuP2POptions{level, true}).evaluate(st, in, c);
    omp_set_num_threads(threads);
    CHECK(std::memcmp(a.data(), b.data(), n * sizeof(Vec3d)) == 0);
    CHECK(std::memcmp(a.data(), c.data(), n * sizeof(Vec3d)) == 0);
  }
}

TEST_CASE("Tiled CPU P2P: leaves larger than a tile, a target leaf's sources over several tiles") {
  // max_leaf 1500 > any tile: a tile then holds one whole source leaf. All particles in a
  // 20 Mpc/h region inside the box, so that even such leaves are compact (the fixture's
  // bisection cuts wide nodes at the box middle, which would leave leaves straddling the
  // periodic boundary otherwise).
  const double box = 100;
  const std::size_t n = 6000;
  P2PSettings st = test::settings_for(box, 50, n);
  test::P2PScene scene = test::make_scene(
      test::clustered_positions(n, box, 5, 3, 0.5, 1.0, 2.0, {40, 40, 40}, 20), box, 1500, st.r_cut);
  REQUIRE(max_leaf_count(scene.leaves) > static_cast<std::uint32_t>(p2p_tiled::kTiledMaxSources));
  const auto targets = all_indices(n);
  const test::DirectResult ref = test::direct_reference(scene.pos, targets, st);
  P2PInput in{&scene.pos, &scene.leaves, &scene.tasks};
  for (int level : runnable_levels()) {
    CpuP2PEvaluator cpu(CpuP2POptions{level, true});
    std::vector<Vec3d> acc;
    const P2PStats ps = cpu.evaluate(st, in, acc);
    const Compared c = compare(acc, ref, targets);
    MESSAGE("leaves of up to " << max_leaf_count(scene.leaves) << ": " << ps.where << " median "
            << c.stats.median << " max " << c.stats.max);
    CHECK(c.stats.median < 1e-6);
    CHECK(c.stats.max < 1e-4);
  }
}

TEST_CASE("CPU P2P: a SIMD level this CPU (or build) cannot run is an error") {
  CHECK_THROWS_AS(CpuP2PEvaluator(CpuP2POptions{2, true}), Error);
  if (CpuP2PEvaluator::cpu_simd_level() < 4) CHECK_THROWS_AS(CpuP2PEvaluator(CpuP2POptions{4, true}), Error);
}

TEST_CASE("CPU P2P input checks and the backend factory") {
  std::vector<Vec3d> pos(4);
  std::vector<Leaf> leaves(1);
  leaves[0].count = 4;
  std::vector<InteractionTask> tasks(1);
  P2PSettings st = test::settings_for(100, 64, 4);
  P2PInput in{&pos, &leaves, &tasks};
  std::vector<Vec3d> acc;
  CpuP2PEvaluator cpu;
  CHECK_NOTHROW(cpu.evaluate(st, in, acc));
  P2PSettings bad = st;
  bad.r_cut = 50;   // = BoxSize/2
  CHECK_THROWS_AS(cpu.evaluate(bad, in, acc), Error);
  bad = st;
  bad.taylor_order = 5;
  CHECK_THROWS_AS(cpu.evaluate(bad, in, acc), Error);
  leaves[0].count = 5;   // beyond the particles
  CHECK_THROWS_AS(cpu.evaluate(st, in, acc), Error);

  CHECK(make_p2p_evaluator("cpu", 0)->name() == "cpu");
  CHECK_THROWS_AS(make_p2p_evaluator("gpu", 0), Error);
  const auto automatic = make_p2p_evaluator("auto", 0);
  if (automatic->name() == "cpu") {
    // No usable GPU here: an explicit request must fail before any work, saying why.
    try {
      make_p2p_evaluator("cuda", 0);
      FAIL("backend = cuda without a usable GPU must throw");
    } catch (const Error& e) {
      CHECK(std::string(e.what()).rfind("[gpu] backend = \"cuda\", but ", 0) == 0);
    }
  }
}

TEST_CASE("CPU P2P with the Newtonian kernel (vacuum): every level, tiled and generic, float and double") {
  // 3000 clustered particles moved to negative coordinates, in leaves of at most 24, and a
  // task for every (target, source) leaf pair: the whole Newtonian sum, against a plain
  // double loop over all pairs.
  const std::size_t n = 3000;
  std::vector<Vec3d> pos = test::clustered_positions(n, 10.0, 5);
  for (Vec3d& x : pos) x += Vec3d{-20.0, -5.0, 3.0};
  const test::P2PScene scene = test::make_scene(pos, 1e3, 24, 1.0);   // leaves only (box: no wrap)
  std::vector<InteractionTask> tasks;
  for (std::uint32_t t = 0; t < scene.leaves.size(); ++t)
    for (std::uint32_t s = 0; s < scene.leaves.size(); ++s) tasks.push_back(InteractionTask{t, s, {0, 0, 0}, 0});
  const double softening = 0.01, g_mass = 2.5;
  std::vector<Vec3d> ref(n);
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t j = 0; j < n; ++j) {
      const Vec3d d = scene.pos[j] - scene.pos[i];
      const double s2 = norm2(d) + softening * softening;
      if (j != i) ref[i] += d * (1 / (s2 * std::sqrt(s2)));
    }
    ref[i] = ref[i] * g_mass;
  }
  P2PSettings st;
  st.kernel = KernelKind::newtonian;
  st.r_cut = 2 * 20.0;   // beyond every pair (the set spans ~ 10 * sqrt(3))
  st.softening = softening;
  st.g_mass = g_mass;
  st.taylor_order = 3;   // not read
  const P2PInput in{&scene.pos, &scene.leaves, &tasks};
  for (int level : runnable_levels()) {
    for (bool tiled : {true, false}) {
      for (bool dbl : {false, true}) {
        st.double_precision = dbl;
        CpuP2PEvaluator cpu(CpuP2POptions{level, tiled});
        std::vector<Vec3d> acc;
        const P2PStats stats = cpu.evaluate(st, in, acc);
        std::vector<double> rel;
        for (std::size_t i = 0; i < n; ++i) rel.push_back(norm(acc[i] - ref[i]) / norm(ref[i]));
        const test::RelStats r = test::relative_stats(rel);
        MESSAGE(stats.where << ": median " << r.median << ", max " << r.max);
        CAPTURE(stats.where);
        CHECK(stats.interactions == static_cast<double>(n) * n);
        CHECK(r.median < (dbl ? 1e-14 : 1e-6));
        CHECK(r.max < (dbl ? 1e-12 : 1e-5));
        if (!dbl && level >= 3 && tiled && cpu.variant(kNoTruncation, false).find("tiled") != std::string::npos)
          CHECK(stats.where.find("tiled") != std::string::npos);
      }
    }
  }
  // The Newtonian kernel reads no box, r_s or table, but needs a finite cut beyond the pairs.
  st.r_cut = 0;
  std::vector<Vec3d> acc;
  CHECK_THROWS_AS(CpuP2PEvaluator().evaluate(st, in, acc), Error);
}
