// M2L -> L2L -> L2P between two particle clusters against the direct sum of the truncated
// pair force (no cut-off: the operators approximate the full psi = erfc(r/2r_s)/r) and of
// the Newtonian 1/r^2 (vacuum boundaries), and the exact antisymmetry of the mutual
// interaction (momentum conservation).
#include <doctest/doctest.h>

#include <cmath>
#include <random>
#include <vector>

#include "fmm/expansions.hpp"
#include "fmm/leaf_cell_batch.hpp"
#include "tree/multipoles.hpp"
#include "tree/orb_tree.hpp"

using namespace orbis;

namespace {

std::vector<Vec3d> ball(std::size_t n, const Vec3d& c, double radius, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> uni(-1, 1);
  std::vector<Vec3d> out;
  while (out.size() < n) {
    Vec3d x{uni(rng), uni(rng), uni(rng)};
    if (norm2(x) <= 1) out.push_back(c + radius * x);
  }
  return out;
}

double truncation(double x) { return std::erfc(x) + 2 * x / std::sqrt(M_PI) * std::exp(-x * x); }

// grad phi at each target: sum_j (x_j - x_i) T(r/2r_s) / r^3 (unit masses); T = 1 for the
// Newtonian kernel.
std::vector<Vec3d> direct(const std::vector<Vec3d>& targets, const std::vector<Vec3d>& sources, double r_s,
                          KernelKind kind = KernelKind::truncated) {
  std::vector<Vec3d> out(targets.size());
  for (std::size_t i = 0; i < targets.size(); ++i)
    for (const Vec3d& xj : sources) {
      const Vec3d d = xj - targets[i];
      const double r = norm(d);
      const double t = kind == KernelKind::newtonian ? 1.0 : truncation(r / (2 * r_s));
      out[i] += d * (t / (r * r * r));
    }
  return out;
}

// The field of `sources` at `targets` via one root multipole, M2L at a centre displaced by
// `offset` from the target root's centre, L2L back to that centre, then L2P.
std::vector<Vec3d> via_expansion(const std::vector<Vec3d>& targets, const std::vector<Vec3d>& sources,
                                 int p, double r_s, const Vec3d& offset, KernelKind kind = KernelKind::truncated) {
  OrbTree ts, ss;
  ts.build(targets, static_cast<int>(targets.size()));
  ss.build(sources, static_cast<int>(sources.size()));
  Multipoles ms;
  ms.compute(ss, p);
  FmmOperators ops(p, r_s, kind);
  FmmOperators::Scratch scratch(ops);
  const Vec3d zt = ts.nodes()[0].centre, zs = ss.nodes()[0].centre;
  std::vector<double> la(static_cast<std::size_t>(ops.local_size()), 0.0), lb = la;
  ops.m2l(ms.of(0), (zt + offset) - zs, la.data(), scratch);
  ops.l2l(la.data(), zt - (zt + offset), lb.data());
  std::vector<Vec3d> out(targets.size());
  for (std::size_t t = 0; t < targets.size(); ++t) out[ts.order()[t]] = ops.l2p(lb.data(), ts.positions()[t] - zt);
  return out;
}

double max_rel_error(const std::vector<Vec3d>& a, const std::vector<Vec3d>& ref) {
  double err = 0, scale = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    err = std::max(err, norm(a[i] - ref[i]));
    scale = std::max(scale, norm(ref[i]));
  }
  return err / scale;
}

}  // namespace

namespace {
void check_convergence(KernelKind kind) {
  const double r_s = 1.0;
  const double a = 0.6, b = 0.4;   // cluster radii
  MESSAGE("max relative force error of the expansion (rows theta, columns p = 1..6)");
  for (double theta : {0.7, 0.5, 0.3}) {
    const double sep = (a + b) / theta;
    const Vec3d zs{0.1, 0.2, 0.3};
    const Vec3d zt = zs + Vec3d{0.48, -0.6, 0.64} * (sep / 1.0);
    const auto sources = ball(80, zs, a, 1);
    const auto targets = ball(40, zt, b, 2);
    const auto ref = direct(targets, sources, r_s, kind);
    std::string row = "theta " + std::to_string(theta) + ":";
    double previous = 1;
    for (int p = 1; p <= 6; ++p) {
      const double err =
          max_rel_error(via_expansion(targets, sources, p, r_s, Vec3d{0.05, -0.03, 0.02}, kind), ref);
      row += " " + std::to_string(err);
      // Each order must gain on the last (allowing odd/even plateaus of a factor 1.5).
      CHECK(err < 1.5 * previous);
      previous = std::min(previous, err);
      // Bound of the remainder, order theta^(p+1), with a generous constant.
      CHECK(err < 3 * std::pow(theta, p + 1));
    }
    MESSAGE(row);
  }
}
}  // namespace

TEST_CASE("M2L/L2L/L2P converge to the direct truncated sum as p grows and theta falls") {
  check_convergence(KernelKind::truncated);
}

TEST_CASE("M2L/L2L/L2P converge to the direct Newtonian sum as p grows and theta falls (vacuum)") {
  check_convergence(KernelKind::newtonian);
}

TEST_CASE("M2L applied both ways gives exactly opposite total forces") {
  const double r_s = 0.8;
  const auto A = ball(60, Vec3d{0, 0, 0}, 0.5, 3);
  const auto B = ball(70, Vec3d{1.9, 0.4, -0.6}, 0.7, 4);
  for (KernelKind kind : {KernelKind::truncated, KernelKind::newtonian})
    for (int p = 1; p <= 6; ++p) {
      const auto on_b = via_expansion(B, A, p, r_s, Vec3d{0, 0, 0}, kind);
      const auto on_a = via_expansion(A, B, p, r_s, Vec3d{0, 0, 0}, kind);
      Vec3d total{0, 0, 0};
      double sum_abs = 0;
      for (const auto& g : on_b) total += g, sum_abs += norm(g);
      for (const auto& g : on_a) total += g, sum_abs += norm(g);
      INFO("p = " << p << (kind == KernelKind::newtonian ? ", Newtonian" : ", truncated"));
      CHECK(norm(total) < 1e-13 * sum_abs);
    }
}

namespace {
// The leaf-cell pair (vacuum): a compact cluster C against loose particles L at distance
// d_min >= R_C / theta from C's centre. P2L: L's particles into C's local expansion (about
// C's centre, L2L'd to a displaced centre first, as a subtree's node would get it), read by
// L2P at C's particles; M2P: C's multipoles at L's particles.
struct LeafCell {
  std::vector<Vec3d> on_c, on_l;
};
LeafCell via_leaf_cell(const std::vector<Vec3d>& cluster, const std::vector<Vec3d>& loose, int p,
                       const Vec3d& child_offset) {
  OrbTree ct;
  ct.build(cluster, static_cast<int>(cluster.size()));
  Multipoles mc;
  mc.compute(ct, p);
  FmmOperators ops(p, 0.0, KernelKind::newtonian);
  FmmOperators::Scratch scratch(ops);
  const Vec3d zc = ct.nodes()[0].centre;
  std::vector<double> lc(static_cast<std::size_t>(ops.local_size()), 0.0), child = lc;
  for (const Vec3d& x : loose) ops.p2l(zc - x, lc.data(), scratch);
  ops.l2l(lc.data(), child_offset, child.data());
  LeafCell out;
  out.on_c.resize(cluster.size());
  for (std::size_t t = 0; t < cluster.size(); ++t)
    out.on_c[ct.order()[t]] = ops.l2p(child.data(), ct.positions()[t] - (zc + child_offset));
  for (const Vec3d& x : loose) out.on_l.push_back(ops.m2p(mc.of(0), x - zc, scratch));
  return out;
}
}  // namespace

TEST_CASE("P2L and M2P (leaf-cell pairs) converge to the direct Newtonian sum, and are exactly opposite") {
  const double a = 0.5;   // the cluster's radius
  MESSAGE("max relative force error of P2L / M2P (rows theta, columns p = 1..6)");
  for (double theta : {0.7, 0.5, 0.3}) {
    // The loose particles: a long thin leaf whose nearest member is a / theta from the
    // cluster's centre, the farthest 20 times as far.
    const Vec3d zc{0.3, -0.2, 0.1};
    const auto cluster = ball(50, zc, a, 5);
    std::vector<Vec3d> loose;
    std::mt19937_64 rng(6);
    std::uniform_real_distribution<double> uni(0, 1);
    const Vec3d axis = Vec3d{0.6, 0.0, 0.8};
    for (int k = 0; k < 32; ++k)
      loose.push_back(zc + axis * (1.05 * a / theta * (1 + 19 * uni(rng))) + Vec3d{0.0, 0.02 * uni(rng), 0.0});
    const auto ref_c = direct(cluster, loose, 1.0, KernelKind::newtonian);
    const auto ref_l = direct(loose, cluster, 1.0, KernelKind::newtonian);
    std::string row = "theta " + std::to_string(theta) + ":";
    for (int p = 1; p <= 6; ++p) {
      const LeafCell lc = via_leaf_cell(cluster, loose, p, Vec3d{0.1, -0.05, 0.08});
      const double e_c = max_rel_error(lc.on_c, ref_c), e_l = max_rel_error(lc.on_l, ref_l);
      row += " " + std::to_string(e_c) + "/" + std::to_string(e_l);
      INFO("theta " << theta << ", p " << p);
      CHECK(e_c < 3 * std::pow(theta, p + 1));
      CHECK(e_l < 3 * std::pow(theta, p + 1));
      // Momentum: the cluster's total force from P2L (L2L is exact) and the loose particles'
      // from M2P cancel to rounding.
      Vec3d total{0, 0, 0};
      double sum_abs = 0;
      for (const auto& g : lc.on_c) total += g, sum_abs += norm(g);
      for (const auto& g : lc.on_l) total += g, sum_abs += norm(g);
      CHECK(norm(total) < 1e-13 * sum_abs);
    }
    MESSAGE(row);
  }
}

TEST_CASE("LeafCellBatch (eight lanes) equals FmmOperators::p2l and ::m2p") {
  const auto cluster = ball(60, Vec3d{0.2, 0.1, -0.3}, 0.4, 7);
  const auto points = ball(29, Vec3d{3.0, -1.0, 2.0}, 1.5, 8);   // 29: a last batch of 5 lanes
  for (int p = 1; p <= 6; ++p) {
    OrbTree ct;
    ct.build(cluster, static_cast<int>(cluster.size()));
    Multipoles mc;
    mc.compute(ct, p);
    FmmOperators ops(p, 0.0, KernelKind::newtonian);
    FmmOperators::Scratch scratch(ops);
    const LeafCellBatch batch(p);
    const Vec3d zc = ct.nodes()[0].centre;
    std::vector<Vec3d> R;
    for (const Vec3d& x : points) R.push_back(zc - x);
    std::vector<double> one(static_cast<std::size_t>(ops.local_size()), 0.0), eight = one;
    for (const Vec3d& r : R) ops.p2l(r, one.data(), scratch);
    batch.p2l(R.data(), R.size(), eight.data());
    double worst = 0, scale = 0;
    for (std::size_t k = 0; k < one.size(); ++k) {
      worst = std::max(worst, std::fabs(one[k] - eight[k]));
      scale = std::max(scale, std::fabs(one[k]));
    }
    INFO("p = " << p);
    CHECK(worst < 1e-13 * scale);
    std::vector<Vec3d> field(points.size(), Vec3d{0, 0, 0});
    for (Vec3d& r : R) r = Vec3d{0, 0, 0} - r;   // x - z
    batch.m2p(mc.of(0), R.data(), R.size(), field.data());
    double diff = 0, size = 0;
    for (std::size_t i = 0; i < points.size(); ++i) {
      const Vec3d ref = ops.m2p(mc.of(0), R[i], scratch);
      diff = std::max(diff, norm(field[i] - ref));
      size = std::max(size, norm(ref));
    }
    CHECK(diff < 1e-13 * size);
  }
}
