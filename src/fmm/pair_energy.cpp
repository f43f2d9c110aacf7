#include "fmm/pair_energy.hpp"

#include <cmath>

#include "core/error.hpp"
#include "core/units.hpp"

namespace orbis {
namespace {

// erfc on [0, x_max] by cubic Hermite interpolation between nodes where erfc and its
// derivative -2 exp(-x^2)/sqrt(pi) are exact: the error, ~ h^4 max|d4 erfc/dx4| / 384, is below
// 1e-13 with these nodes, and it costs several times less than erfc() in the pair loop.
class ErfcTable {
 public:
  explicit ErfcTable(double x_max) : h_(x_max / (kNodes - 1)), inv_h_(1 / h_), value_(kNodes), slope_(kNodes) {
    for (int i = 0; i < kNodes; ++i) {
      const double x = i * h_;
      value_[i] = std::erfc(x);
      slope_[i] = -2 / std::sqrt(units::pi) * std::exp(-x * x) * h_;   // per unit of t
    }
  }
  double operator()(double x) const {
    const double u = x * inv_h_;
    const int i = std::min(static_cast<int>(u), kNodes - 2);
    const double t = u - i, t2 = t * t, t3 = t2 * t;
    return (2 * t3 - 3 * t2 + 1) * value_[i] + (t3 - 2 * t2 + t) * slope_[i] + (3 * t2 - 2 * t3) * value_[i + 1] +
           (t3 - t2) * slope_[i + 1];
  }

 private:
  static constexpr int kNodes = 8192;
  double h_, inv_h_;
  std::vector<double> value_, slope_;
};

}  // namespace

ChainingShape chaining_mesh_shape(double box, double cut) {
  if (!(cut > 0 && cut < 0.5 * box)) fail("pair energy: the cut {} must be in (0, box/2 = {})", cut, 0.5 * box);
  ChainingShape shape;
  for (int r : {2, 1}) {
    const int fit = static_cast<int>(std::floor(box * r / cut));
    if (fit >= 2 * r + 1) {
      shape.side = std::min(fit, 512);
      shape.reach = r;
      break;
    }
  }
  return shape;
}

ChainingMesh::ChainingMesh(const std::vector<Vec3d>& pos, double box, double cut) {
  if (pos.size() >= (std::size_t{1} << 32)) fail("pair energy: {} particles (at most 2^32 - 1)", pos.size());
  const ChainingShape shape = chaining_mesh_shape(box, cut);
  side = shape.side;
  reach = shape.reach;
  const std::size_t cells = static_cast<std::size_t>(side) * side * side;
  std::vector<std::uint32_t> cell_of(pos.size());
  start.assign(cells + 1, 0);
  for (std::size_t i = 0; i < pos.size(); ++i) {
    const int ci = chaining_cell(pos[i].x, box, side), cj = chaining_cell(pos[i].y, box, side),
              ck = chaining_cell(pos[i].z, box, side);
    cell_of[i] = static_cast<std::uint32_t>((static_cast<std::size_t>(ci) * side + cj) * side + ck);
    ++start[cell_of[i] + 1];
  }
  for (std::size_t c = 0; c < cells; ++c) start[c + 1] += start[c];
  order.resize(pos.size());
  std::vector<std::uint32_t> fill(start.begin(), start.end() - 1);
  for (std::size_t i = 0; i < pos.size(); ++i) order[fill[cell_of[i]]++] = static_cast<std::uint32_t>(i);
}

CutShiftTerms cut_shift_terms(const PairPotentialInput& in) {
  CutShiftTerms t;
  if (in.cut_shift == 0) return t;
  const double s_c = std::sqrt(in.cut * in.cut + in.softening * in.softening);
  t.a = in.cut_shift;
  t.offset = std::erfc(s_c * 0.5 / in.r_s) / s_c + t.a * s_c;
  return t;
}

double pair_potential_sum_cpu(const PairPotentialInput& in) {
  const std::vector<Vec3d>& pos = *in.positions;
  const double box = in.box;
  if (in.ghosts > pos.size()) fail("internal: pair energy: {} ghosts among {} positions", in.ghosts, pos.size());
  const std::size_t own_count = pos.size() - in.ghosts;
  const bool ghosts = in.ghosts > 0;
  const ChainingMesh mesh(pos, box, in.cut);
  const double cut2 = in.cut * in.cut, eps2 = in.softening * in.softening, inv_two_rs = 0.5 / in.r_s;
  const ErfcTable erfc_table(std::sqrt(cut2 + eps2) * inv_two_rs);
  const CutShiftTerms shift = cut_shift_terms(in);
  const int reach = mesh.reach, side = mesh.side;
  // psi[q]: the sum of the particle at mesh.order[q], so the total runs in cell order.
  std::vector<double> psi(pos.size(), 0.0);
  const auto n = static_cast<std::ptrdiff_t>(pos.size());
#pragma omp parallel for schedule(dynamic, 256)
  for (std::ptrdiff_t q = 0; q < n; ++q) {
    const std::uint32_t i = mesh.order[static_cast<std::size_t>(q)];
    if (i >= own_count) continue;   // a ghost: its pairs with this rank's particles are theirs
    const Vec3d& x = pos[i];
    const int ci = chaining_cell(x.x, box, side), cj = chaining_cell(x.y, box, side), ck = chaining_cell(x.z, box, side);
    double sum = 0;
    for (int di = -reach; di <= reach; ++di)
      for (int dj = -reach; dj <= reach; ++dj)
        for (int dk = -reach; dk <= reach; ++dk) {
          // This rank's partners in the half stencil (in the own cell: those after it), ghosts
          // in every cell of the stencil (the ghost's own rank never takes the pair from here).
          const bool own = di == 0 && dj == 0 && dk == 0;
          const bool forward = own || chaining_forward(di, dj, dk);
          if (!forward && !ghosts) continue;
          double sx, sy, sz;
          const int ni = chaining_neighbour(ci + di, side, box, sx), nj = chaining_neighbour(cj + dj, side, box, sy),
                    nk = chaining_neighbour(ck + dk, side, box, sz);
          const std::size_t c = (static_cast<std::size_t>(ni) * side + nj) * side + nk;
          const double ox = sx - x.x, oy = sy - x.y, oz = sz - x.z;
          const auto after = static_cast<std::uint32_t>(q) + 1;
          for (std::uint32_t at = own && !ghosts ? after : mesh.start[c]; at < mesh.start[c + 1]; ++at) {
            const std::uint32_t j = mesh.order[at];
            double weight = 1;
            if (j >= own_count) weight = ghost_pair_weight(x, pos[j]);
            else if (!(own ? at >= after : forward)) continue;
            if (weight == 0) continue;
            double dx = pos[j].x + ox, dy = pos[j].y + oy, dz = pos[j].z + oz;
            if (side == 1) dx = periodic_wrap_delta(dx, box), dy = periodic_wrap_delta(dy, box), dz = periodic_wrap_delta(dz, box);
            const double r2 = dx * dx + dy * dy + dz * dz;
            if (r2 >= cut2) continue;
            const double s = std::sqrt(r2 + eps2);
            if (s > 0) {
              double term = erfc_table(s * inv_two_rs) / s;
              if (shift.a != 0) term += shift.a * s - shift.offset;
              sum += weight * term;
            }
          }
        }
    psi[static_cast<std::size_t>(q)] = sum;
  }
  double total = 0;
  for (double p : psi) total += p;
  return total;
}

}  // namespace orbis
