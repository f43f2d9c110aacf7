// The short-range solver (tree + walk + M2L/L2L/L2P + P2P) against the exact truncated
// direct sum on a clustered set: g_i = sum_{r_ij < r_cut} m (x_j - x_i)/r^3 T(r/2r_s),
// minimal image, exact erfc. Errors are relative to each particle's exact short-range
// force. Also: Newton's third law, independence of the particle order and thread count,
// and the r_cut < L/2 requirement. P2P runs in the test-only exact evaluator, so the
// errors measured are those of the FMM (expansions and walk) alone.
#include <doctest/doctest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>

#include "core/error.hpp"
#include "core/log.hpp"
#include "core/params.hpp"
#include "fmm/p2p_cpu.hpp"
#include "fmm/short_range.hpp"
#include "support/clustered_particles.hpp"
#include "support/reference_p2p.hpp"

using namespace orbis;

namespace {

constexpr double kBox = 100.0;   // Mpc/h
constexpr int kSide = 32;        // 32^3 particles

ShortRangeSettings default_settings(int n_side) {
  ShortRangeSettings s;
  s.box_mpc_h = kBox;
  s.r_s = 1.2 * kBox / n_side;   // schema defaults: rs_over_cell 1.2, N_pm = N_side
  s.r_cut = 4.5 * s.r_s;         // r_cut_over_rs 4.5
  s.theta = 0.5;
  s.multipole_order = 4;
  s.max_leaf = 32;
  s.softening = 0;               // the reference is unsoftened
  s.g_mass = 1.0;
  return s;
}

struct ErrorStats {
  double median = 0, p99 = 0, max = 0;
};

ErrorStats stats_of(std::vector<double> e) {
  std::sort(e.begin(), e.end());
  ErrorStats s;
  s.median = e[e.size() / 2];
  s.p99 = e[static_cast<std::size_t>(0.99 * static_cast<double>(e.size() - 1))];
  s.max = e.back();
  return s;
}

struct Fixture {
  std::vector<Vec3d> pos = test::clustered_particles(kSide, kBox, 2024);
  std::vector<std::size_t> sample;
  std::vector<Vec3d> exact;
  explicit Fixture(int stride) {
    const ShortRangeSettings s = default_settings(kSide);
    for (std::size_t i = 0; i < pos.size(); i += static_cast<std::size_t>(stride)) sample.push_back(i);
    exact.resize(sample.size());
#pragma omp parallel for schedule(dynamic, 16)
    for (long q = 0; q < static_cast<long>(sample.size()); ++q)
      exact[static_cast<std::size_t>(q)] =
          test::direct_short_range(pos, sample[static_cast<std::size_t>(q)], kBox, s.r_s, s.r_cut, s.g_mass);
  }
  std::vector<double> errors(const std::vector<Vec3d>& acc) const {
    std::vector<double> e(sample.size());
    for (std::size_t q = 0; q < sample.size(); ++q) e[q] = norm(acc[sample[q]] - exact[q]) / norm(exact[q]);
    return e;
  }
};

// P2P does not depend on p, only on the walk (theta): a wrapper that returns the previous
// result when the positions, leaves and tasks are bitwise the same saves the table most of
// its P2P time. Anything different is evaluated afresh.
class CachingP2P final : public P2PEvaluator {
 public:
  P2PStats evaluate(const P2PSettings& s, const P2PInput& in, std::vector<Vec3d>& acc) override {
    const bool same = in.tasks->size() == tasks_.size() && in.positions->size() == pos_.size() &&
                      in.leaves->size() == leaves_.size() && s.r_cut == r_cut_ &&
                      std::memcmp(in.tasks->data(), tasks_.data(), tasks_.size() * sizeof(InteractionTask)) == 0 &&
                      std::memcmp(in.positions->data(), pos_.data(), pos_.size() * sizeof(Vec3d)) == 0 &&
                      std::memcmp(in.leaves->data(), leaves_.data(), leaves_.size() * sizeof(Leaf)) == 0;
    if (!same) {
      stats_ = inner_.evaluate(s, in, acc_);
      tasks_ = *in.tasks;
      pos_ = *in.positions;
      leaves_ = *in.leaves;
      r_cut_ = s.r_cut;
    }
    acc = acc_;
    return stats_;
  }
  std::string name() const override { return "cached " + inner_.name(); }

 private:
  test::ReferenceP2P inner_;
  std::vector<InteractionTask> tasks_;
  std::vector<Vec3d> pos_, acc_;
  std::vector<Leaf> leaves_;
  double r_cut_ = 0;
  P2PStats stats_;
};

// Particles (caller order) that receive a far-field (M2L) contribution: those under a node
// that is the target of an M2L task.
std::vector<char> far_field_particles(const ShortRangeSolver& solver) {
  const auto& nodes = solver.tree().nodes();
  std::vector<char> hit(nodes.size(), 0);
  for (const auto& t : solver.tasks().m2l) hit[t.target] = 1;
  for (std::size_t i = 1; i < nodes.size(); ++i) hit[i] |= hit[static_cast<std::size_t>(nodes[i].parent)];
  std::vector<char> out(solver.tree().size(), 0);
  for (const auto& n : nodes)
    if (n.is_leaf() && hit[static_cast<std::size_t>(&n - nodes.data())])
      for (std::uint32_t t = n.first; t < n.first + n.count; ++t) out[solver.tree().order()[t]] = 1;
  return out;
}

// Built once per process: the exact sums take a while and two test cases use them.
const Fixture& fixture() {
  static const Fixture fx(8);
  return fx;
}

}  // namespace

TEST_CASE("short range: accuracy against the exact truncated direct sum (clustered 32^3)") {
  const Fixture& fx = fixture();
  CachingP2P p2p;
  std::vector<Vec3d> acc;
  MESSAGE("relative error |g - g_exact|/|g_exact| (exact short-range force) on " << fx.sample.size() << " of "
          << fx.pos.size() << " particles (Zel'dovich-like field + 2 Plummer haloes); 'far' columns: only "
          << "the particles that receive M2L");
  MESSAGE(" theta  p   median(all)  99%(all)   max(all) | far: frac  median     99%    | M2L/part P2P/part");
  ErrorStats at_default{}, at_high{}, far_default{}, far_high{};
  for (double theta : {0.7, 0.5, 0.4}) {
    for (int p : {2, 4, 6}) {
      ShortRangeSettings s = default_settings(kSide);
      s.theta = theta;
      s.multipole_order = p;
      ShortRangeSolver solver(s);
      const ShortRangeStats st = solver.compute(fx.pos, p2p, acc);
      const auto errors = fx.errors(acc);
      const auto far = far_field_particles(solver);
      std::vector<double> far_errors;
      for (std::size_t q = 0; q < fx.sample.size(); ++q)
        if (far[fx.sample[q]]) far_errors.push_back(errors[q]);
      REQUIRE(far_errors.size() > 20);
      const ErrorStats e = stats_of(errors), f = stats_of(far_errors);
      MESSAGE(fmt::format(" {:5.2f} {:2d} {:10.2e} {:10.2e} {:10.2e} | {:5.3f} {:10.2e} {:10.2e} | {:7.2f} {:8.0f}",
                          theta, p, e.median, e.p99, e.max,
                          static_cast<double>(far_errors.size()) / static_cast<double>(errors.size()), f.median,
                          f.p99, st.m2l_interactions / static_cast<double>(fx.pos.size()),
                          st.p2p_interactions / static_cast<double>(fx.pos.size())));
      if (theta == 0.5 && p == 4) at_default = e, far_default = f;
      if (theta == 0.4 && p == 6) at_high = e, far_high = f;
    }
  }
  // Defaults (theta 0.5, p 4): the TreePM target (99% < 1e-3) on the short-range part alone.
  CHECK(at_default.p99 < 1e-3);
  // High accuracy (theta 0.4, p 6).
  CHECK(at_high.median < 1e-5);
  CHECK(far_high.median < 1e-5);
  CHECK(far_high.p99 < far_default.p99);
}

TEST_CASE("short range: with the production CPU P2P (float, Taylor table) at defaults") {
  // The solver as the run loop uses it: CpuP2PEvaluator in float with the order-3 table.
  const Fixture& fx = fixture();
  CpuP2PEvaluator p2p;
  MESSAGE(" P2P            median      99%        max   (relative to the exact short-range force)");
  for (auto [taylor, dbl] : {std::pair<int, bool>{3, false}, std::pair<int, bool>{-1, true}}) {
    {
      ShortRangeSettings s = default_settings(kSide);
      s.taylor_order = taylor;
      s.p2p_double = dbl;
      ShortRangeSolver solver(s);
      std::vector<Vec3d> acc;
      solver.compute(fx.pos, p2p, acc);
      const ErrorStats e = stats_of(fx.errors(acc));
      MESSAGE(fmt::format(" {:6} {:7} {:10.2e} {:10.2e} {:10.2e}", dbl ? "double" : "float",
                          taylor < 0 ? "exact" : "taylor3", e.median, e.p99, e.max));
      if (taylor == 3 && !dbl) CHECK(e.p99 < 1e-3);   // the run's defaults
      if (dbl) CHECK(e.median < 1e-6);
    }
  }
}

TEST_CASE("short range: Newton's third law, particle order, thread count, overlap") {
  // A smaller clustered set with small leaves and a wide theta, so M2L carries a large
  // share of the pairs.
  const int side = 16;
  const auto pos = test::clustered_particles(side, kBox, 77);
  ShortRangeSettings s = default_settings(side);
  s.theta = 0.7;
  s.max_leaf = 8;
  s.multipole_order = 3;
  test::ReferenceP2P p2p;
  ShortRangeSolver solver(s);
  std::vector<Vec3d> acc;
  const ShortRangeStats st = solver.compute(pos, p2p, acc);
  MESSAGE("16^3 set: M2L tasks " << st.m2l_interactions << ", P2P pairs " << st.p2p_interactions);
  REQUIRE(st.m2l_interactions > 1000);

  Vec3d total{0, 0, 0};
  double sum_abs = 0;
  for (const auto& g : acc) total += g, sum_abs += norm(g);
  MESSAGE("|sum g| / sum |g| = " << norm(total) / sum_abs);
  CHECK(norm(total) < 1e-13 * sum_abs);

  // Permuted input: every particle's force is bitwise the same.
  std::vector<std::size_t> perm(pos.size());
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), std::mt19937_64(1));
  std::vector<Vec3d> shuffled(pos.size()), acc_shuffled;
  for (std::size_t i = 0; i < pos.size(); ++i) shuffled[i] = pos[perm[i]];
  ShortRangeSolver other(s);
  other.compute(shuffled, p2p, acc_shuffled);
  std::size_t differ = 0;
  for (std::size_t i = 0; i < pos.size(); ++i)
    differ += std::memcmp(&acc_shuffled[i], &acc[perm[i]], sizeof(Vec3d)) != 0;
  CHECK(differ == 0);

  // One thread: bitwise the same (no float atomics, fixed summation order). The same solver
  // object is reused, which also exercises its buffer reuse.
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  std::vector<Vec3d> acc_serial;
  solver.compute(pos, p2p, acc_serial);
  omp_set_num_threads(threads);
  CHECK(std::memcmp(acc_serial.data(), acc.data(), acc.size() * sizeof(Vec3d)) == 0);

  // P2P on its own thread, overlapping the far field: bitwise the same.
  ShortRangeSettings overlapped = s;
  overlapped.overlap_p2p = true;
  ShortRangeSolver solver_overlap(overlapped);
  std::vector<Vec3d> acc_overlap;
  solver_overlap.compute(pos, p2p, acc_overlap);
  CHECK(std::memcmp(acc_overlap.data(), acc.data(), acc.size() * sizeof(Vec3d)) == 0);
}

TEST_CASE("short range: settings are checked before any work") {
  ShortRangeSettings s = default_settings(kSide);
  s.r_cut = 0.5 * kBox;
  CHECK_THROWS_AS(ShortRangeSolver{s}, Error);
  s = default_settings(kSide);
  s.multipole_order = 7;
  CHECK_THROWS_AS(ShortRangeSolver{s}, Error);
  s = default_settings(kSide);
  ShortRangeSolver solver(s);
  test::ReferenceP2P p2p;
  std::vector<Vec3d> acc;
  std::vector<Vec3d> outside{{1, 2, 3}, {kBox, 0, 0}};
  CHECK_THROWS_AS(solver.compute(outside, p2p, acc), Error);
}

TEST_CASE("short range: settings from the parameter file") {
  const std::string base = "[box]\nsize_mpc_h = 200.0\nparticles_per_side = 64\n";
  const Params params = Params::parse(base + "[gravity]\nsolver = \"treepm\"\n", "test.toml");
  const ShortRangeSettings s = short_range_settings(params, 2.0);
  CHECK(s.r_s == doctest::Approx(2.4 * 200.0 / 128).epsilon(1e-14));   // N_pm = 2 N_side
  CHECK(s.r_cut == doctest::Approx(6.0 * s.r_s).epsilon(1e-14));
  CHECK(s.shifted_cut);   // the default: the force shifted to zero at the cut
  CHECK(cut_shift_of(s) == doctest::Approx(truncation_exact(3.0) / (s.r_cut * s.r_cut)).epsilon(1e-14));
  CHECK(s.softening == doctest::Approx(0.025 * 200.0 / 64).epsilon(1e-14));
  CHECK(s.g_mass == doctest::Approx(43.0071 * 2.0).epsilon(1e-14));
  CHECK(s.theta == 0.5);
  CHECK(s.multipole_order == 4);
  const Params mesh = Params::parse(base + "[gravity]\npm_grid_side = 128\n", "test.toml");
  CHECK(short_range_settings(mesh, 1.0).r_s == doctest::Approx(2.4 * 200.0 / 128).epsilon(1e-14));
  // r_cut >= L/2: an error naming the key, before any work.
  const Params coarse = Params::parse(
      "[box]\nsize_mpc_h = 10.0\nparticles_per_side = 4\n[gravity]\nrs_over_cell = 2.0\n", "test.toml");
  CHECK_THROWS_WITH_AS(short_range_settings(coarse, 1.0), doctest::Contains("r_cut_over_rs"), Error);
}
