#include "analysis/fof_ghost_cells.hpp"

#include <algorithm>
#include <cmath>

#include "core/error.hpp"

namespace orbis::fof {

GhostCells::GhostCells(double box, double link) : box_(box) {
  if (!(box > 0) || !(link > 0)) fail("internal: GhostCells: box {} and linking length {} must be positive", box, link);
  // Cells a little wider than the reach (l and its margin): a cell two cells away from a
  // position's own is then always out of reach, however the position rounded.
  side_ = static_cast<std::int64_t>(
      std::clamp(std::floor(box / (link * (1 + 1e-5))), 1.0, static_cast<double>(kMaxSide)));
  row_words_ = (side_ + 63) / 64;
  cell_ = box / static_cast<double>(side_);
  inv_cell_ = static_cast<double>(side_) / box;
  const double reach = link * (1 + 1e-6);
  reach2_ = reach * reach;
}

double GhostCells::wrap(double v) const { return v >= 0 && v < box_ ? v : periodic_wrap_position(v, box_); }

std::int64_t GhostCells::axis(double wrapped) const {
  return std::clamp(static_cast<std::int64_t>(wrapped * inv_cell_), std::int64_t{0}, side_ - 1);
}

std::uint64_t GhostCells::cell_of(const Vec3d& x) const {
  return bit_of(axis(wrap(x.x)), axis(wrap(x.y)), axis(wrap(x.z)));
}

std::vector<std::uint64_t> GhostCells::occupancy(const std::vector<Vec3d>& pos) const {
  std::vector<std::uint64_t> bits(words(), 0);
  const auto n = static_cast<std::ptrdiff_t>(pos.size());
  std::uint64_t* out = bits.data();
#pragma omp parallel for schedule(static)
  for (std::ptrdiff_t i = 0; i < n; ++i) {
    const std::uint64_t c = cell_of(pos[static_cast<std::size_t>(i)]);
    const std::uint64_t bit = std::uint64_t{1} << (c & 63);
    std::uint64_t& word = out[c >> 6];
    std::uint64_t seen;
#pragma omp atomic read
    seen = word;
    if (seen & bit) continue;   // mostly set already (several particles a cell): no write then
#pragma omp atomic
    word |= bit;
  }
  return bits;
}

namespace {

// The shortest run of cells on a circle of `side` that holds every used one: it begins after
// the longest run of unused cells. Length 0 when none is used.
void covering_run(const std::vector<char>& used, std::int32_t& first, std::int32_t& length) {
  const auto side = static_cast<std::int64_t>(used.size());
  first = 0, length = 0;
  if (std::none_of(used.begin(), used.end(), [](char u) { return u != 0; })) return;
  std::int64_t best = 0, best_end = 0, run = 0;   // longest unused run, ending before best_end
  for (std::int64_t k = 0; k < 2 * side; ++k) {
    run = used[static_cast<std::size_t>(k % side)] ? 0 : std::min(run + 1, side);
    if (run > best) best = run, best_end = k + 1;
  }
  first = static_cast<std::int32_t>(best_end % side);
  length = static_cast<std::int32_t>(side - best);
}

}  // namespace

GhostCells::Box GhostCells::box_of(const std::vector<std::uint64_t>& bits) const {
  const auto g = static_cast<std::size_t>(side_), w = static_cast<std::size_t>(row_words_);
  std::vector<char> used_x(g, 0), used_y(g, 0), used_z(g, 0);
  std::vector<std::uint64_t> any_row(w, 0);
  for (std::size_t i = 0; i < g; ++i)
    for (std::size_t j = 0; j < g; ++j) {
      const std::uint64_t* row = bits.data() + (i * g + j) * w;
      bool marked = false;
      for (std::size_t k = 0; k < w; ++k) marked |= row[k] != 0, any_row[k] |= row[k];
      if (marked) used_x[i] = used_y[j] = 1;
    }
  for (std::size_t k = 0; k < g; ++k) used_z[k] = static_cast<char>(any_row[k >> 6] >> (k & 63) & 1u);
  Box box;
  covering_run(used_x, box.first[0], box.length[0]);
  covering_run(used_y, box.first[1], box.length[1]);
  covering_run(used_z, box.first[2], box.length[2]);
  return box;
}

bool GhostCells::may_touch(const Box& a, const Box& b) const {
  if (a.empty() || b.empty()) return false;
  const std::int64_t g = side_;
  for (int d = 0; d < 3; ++d) {
    if (a.length[d] == g || b.length[d] == g) continue;
    // b's run relative to a's first cell: [rb, rb + b.length) on the circle; a's is [0, a.length).
    const std::int64_t rb = ((b.first[d] - a.first[d]) % g + g) % g;
    if (rb < a.length[d] || rb + b.length[d] > g) continue;   // they overlap
    const std::int64_t after_a = rb - a.length[d], after_b = g - (rb + b.length[d]);
    if (std::min(after_a, after_b) > 0) return false;   // a whole cell between them, wider than l
  }
  return true;
}

std::vector<std::uint64_t> GhostCells::neighbourhood(const std::vector<const std::uint64_t*>& bits) const {
  const auto g = static_cast<std::size_t>(side_), w = static_cast<std::size_t>(row_words_);
  const std::size_t n = words();
  std::vector<std::uint64_t> all(n), spread(n);
  const auto rows = static_cast<std::ptrdiff_t>(g * g), planes = static_cast<std::ptrdiff_t>(g);
#pragma omp parallel for schedule(static)
  for (std::ptrdiff_t k = 0; k < static_cast<std::ptrdiff_t>(n); ++k) {
    std::uint64_t u = 0;
    for (const std::uint64_t* b : bits) u |= b[k];
    all[static_cast<std::size_t>(k)] = u;
  }
  // Along z, within each row: bit k takes bits k - 1 and k + 1 (across words, and around the
  // circle between cells 0 and g - 1); the padding above cell g - 1 stays clear.
  const unsigned top = static_cast<unsigned>((g - 1) & 63);   // cell g - 1's bit in the row's last word
  const std::uint64_t valid = top == 63 ? ~std::uint64_t{0} : (std::uint64_t{1} << (top + 1)) - 1;
#pragma omp parallel for schedule(static)
  for (std::ptrdiff_t r = 0; r < rows; ++r) {
    const std::uint64_t* in = all.data() + static_cast<std::size_t>(r) * w;
    std::uint64_t* out = spread.data() + static_cast<std::size_t>(r) * w;
    for (std::size_t k = 0; k < w; ++k) {
      const std::uint64_t from_below = in[k] << 1 | (k > 0 ? in[k - 1] >> 63 : 0);
      const std::uint64_t from_above = in[k] >> 1 | (k + 1 < w ? in[k + 1] << 63 : 0);
      out[k] = in[k] | from_below | from_above;
    }
    if (in[w - 1] >> top & 1u) out[0] |= 1u;
    if (in[0] & 1u) out[w - 1] |= std::uint64_t{1} << top;
    out[w - 1] &= valid;
  }
  // Along y, within each plane: row j takes rows j - 1 and j + 1.
#pragma omp parallel for schedule(static)
  for (std::ptrdiff_t x = 0; x < planes; ++x) {
    const std::uint64_t* in = spread.data() + static_cast<std::size_t>(x) * g * w;
    std::uint64_t* out = all.data() + static_cast<std::size_t>(x) * g * w;
    for (std::size_t j = 0; j < g; ++j) {
      const std::uint64_t *a = in + (j + g - 1) % g * w, *b = in + j * w, *c = in + (j + 1) % g * w;
      for (std::size_t k = 0; k < w; ++k) out[j * w + k] = a[k] | b[k] | c[k];
    }
  }
  // Along x: plane i takes planes i - 1 and i + 1.
#pragma omp parallel for schedule(static)
  for (std::ptrdiff_t x = 0; x < planes; ++x) {
    const auto i = static_cast<std::size_t>(x), plane = g * w;
    const std::uint64_t *a = all.data() + (i + g - 1) % g * plane, *b = all.data() + i * plane,
                        *c = all.data() + (i + 1) % g * plane;
    std::uint64_t* out = spread.data() + i * plane;
    for (std::size_t k = 0; k < plane; ++k) out[k] = a[k] | b[k] | c[k];
  }
  return spread;
}

GhostCells::Near GhostCells::near(const Vec3d& x) const {
  // Per axis the neighbour offsets within reach, each with its squared distance from x.
  std::int64_t index[3][3];
  double d2[3][3];
  int count[3];
  for (int a = 0; a < 3; ++a) {
    const double v = wrap(x[a]);
    const std::int64_t i = axis(v);
    const double offset = v - static_cast<double>(i) * cell_;   // in [0, cell) up to rounding
    int k = 0;
    index[a][k] = i, d2[a][k++] = 0;
    const double below = std::max(offset, 0.0), above = std::max(cell_ - offset, 0.0);
    if (below * below <= reach2_) index[a][k] = (i + side_ - 1) % side_, d2[a][k++] = below * below;
    if (above * above <= reach2_) index[a][k] = (i + 1) % side_, d2[a][k++] = above * above;
    count[a] = k;
  }
  Near out;
  for (int i = 0; i < count[0]; ++i)
    for (int j = 0; j < count[1]; ++j)
      for (int k = 0; k < count[2]; ++k)
        if (d2[0][i] + d2[1][j] + d2[2][k] <= reach2_) out.bit[out.count++] = bit_of(index[0][i], index[1][j], index[2][k]);
  return out;
}

}  // namespace orbis::fof
