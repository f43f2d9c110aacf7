// The tiled P2P driver and pair code, written once over a SIMD traits struct S (one per
// instruction set). Included by the per-ISA files (p2p_cpu_tiled_avx512.cpp, ..._avx2.cpp)
// between `#pragma GCC push_options` / `#pragma GCC target(...)` and pop_options, inside an
// ISA-specific anonymous namespace, after defining S. S provides:
//   W, F (W floats), M (a lane mask); set1 zero load(aligned) add sub mul
//   fmadd(a,b,c) = a*b+c, fnmadd(a,b,c) = c-a*b; lt(a,b) -> M, any(M), keep(M, F) (0 where
//   not M); rsqrt(s2, consts) (~1 ulp); gather1(m, r, base, last) / gather2(m, r, base,
//   last, a, b): the node(s) addressed by the bits of r = u + 1.5*2^23 (bases pre-biased,
//   see bias()) for the lanes in m; append(...) (the tile fill, group()); flush(double*, F)
//   (lanes into double lanes); reduce(const double*) (a fixed-order sum of those).
//
// The series per pair (same nearest node and same terms as truncation.hpp):
//   order 0: T = T_i                       (one 32-bit gather)
//   order 1: T = c0 + c1 e                 (one 64-bit gather of {c0, c1})
//   orders 2-4: PhotoNs-GPU eq. 2 in node units, e = u - i, x_i = i h:
//     T = T_i + (E_i h) e [x_i^2 + A e + B e^2 + C e^3],   A = h x_i (1 - x_i^2),
//     B = h^2 (2/3 x_i^4 - 5/3 x_i^2 + 1/3),  C = -h^3 x_i (1/3 x_i^4 - 3/2 x_i^2 + 1)
//   from one 64-bit gather pair of {T_i, E_i h}. The per-node coefficient form (c0..c3)
//   needs a second gather pair at order 3 and a 32-bit gather of all lanes more at orders
//   2 and 4. The loop is bound by its FMA-port operations, which the gathers' own uops,
//   mask moves and the permutes that split pairs share: the 5-8 operations of A, B, C cost
//   less than a second gather pair (measured 6% faster at order 3).

struct Consts {
  F rcut2, eps2, magic, half;
  F shift;            // the shifted cut: T(s) - shift s^2 (p2p_kernel.hpp)
  F h2;               // h^2 (A = i h^2 (1 - x^2))
  F b2, b1, b0;       // h^2 {2/3, -5/3, 1/3}
  F d2, d1, d0;       // -h^4 {1/3, -3/2, 1}  (C = i ((d2 x^2 + d1) x^2 + d0))
  explicit Consts(const P2PPairConstants<float>& k) {
    const double h = k.spacing, hh = h * h;
    rcut2 = S::set1(k.rcut2);
    eps2 = S::set1(k.eps2);
    shift = S::set1(k.shift);
    magic = S::set1(12582912.0f);   // 1.5 * 2^23, as rounded_bits() in truncation.hpp
    half = S::set1(0.5f);
    h2 = S::set1(static_cast<float>(hh));
    b2 = S::set1(static_cast<float>(2.0 / 3.0 * hh));
    b1 = S::set1(static_cast<float>(-5.0 / 3.0 * hh));
    b0 = S::set1(static_cast<float>(1.0 / 3.0 * hh));
    d2 = S::set1(static_cast<float>(-hh * hh / 3.0));
    d1 = S::set1(static_cast<float>(1.5 * hh * hh));
    d0 = S::set1(static_cast<float>(-hh * hh));
  }
};

// Gather bases biased by the rounding constant's bits: r = u + 1.5*2^23 read as an int32 is
// kRoundedBitsZeroF + node, so it is the gather index as it is (64-bit address arithmetic,
// index sign-extended) and no subtract is spent per pair.
inline const void* bias(const float* base, std::size_t elem_bytes) {
  return reinterpret_cast<const void*>(reinterpret_cast<std::uintptr_t>(base) -
                                       std::uintptr_t(kRoundedBitsZeroF) * elem_bytes);
}

struct Bases {
  const void* t;     // T_i, 4-byte elements
  const void* c01;   // {c0, c1}, 8-byte elements
  const void* te;    // {T_i, E_i h}, 8-byte elements
  int last;          // last node
  explicit Bases(const CoefLayout& l)
      : t(bias(l.t.data(), 4)), c01(bias(l.c01.data(), 8)), te(bias(l.te.data(), 8)),
        last(l.size - 1) {}
};

// T at u = s (table units) for the lanes in `inside` (u < u_cut there, within the table);
// the other lanes may carry any u: the gathers load nothing for them (AVX-512 masks) or the
// last node (AVX2 clamps the index), and the caller discards what they return.
// kNoTruncation (the Newtonian kernel): T = 1, no table.
template <int Order>
[[gnu::always_inline]] inline F taylor(F u, M inside, const Consts& c, const Bases& b) {
  if constexpr (Order == kNoTruncation) {
    return S::set1(1.0f);
  } else {
    const F r = S::add(u, c.magic);   // round to nearest: the node in the low mantissa bits
    if constexpr (Order == 0) {
      return S::gather1(inside, r, b.t, b.last);
    } else {
      const F fi = S::sub(r, c.magic);
      const F e = S::sub(u, fi);      // |e| <= 1/2
      F t0, t1;
      if constexpr (Order == 1) {
        S::gather2(inside, r, b.c01, b.last, t0, t1);
        return S::fmadd(t1, e, t0);   // c0 + c1 e
      } else {
        S::gather2(inside, r, b.te, b.last, t0, t1);   // T_i, E_i h
        const F ih2 = S::mul(fi, c.h2);        // i h^2
        const F x2 = S::mul(ih2, fi);          // x_i^2 = i^2 h^2
        const F a = S::fnmadd(ih2, x2, ih2);   // A
        F p;
        if constexpr (Order == 2) {
          p = a;
        } else {
          const F bb = S::fmadd(S::fmadd(c.b2, x2, c.b1), x2, c.b0);
          if constexpr (Order == 3) {
            p = S::fmadd(bb, e, a);
          } else {
            const F cc = S::mul(fi, S::fmadd(S::fmadd(c.d2, x2, c.d1), x2, c.d0));
            p = S::fmadd(S::fmadd(cc, e, bb), e, a);
          }
        }
        p = S::fmadd(p, e, x2);
        return S::fmadd(S::mul(t1, e), p, t0);
      }
    }
  }
}

// W sources against one target: a += g d, g = T(s) / s^3 inside the cut, exactly 0 outside;
// Weighted (the Newtonian kernel of individual masses): g times each source's weight sw.
// r^2 is rounded as nvcc contracts p2p_pair() (two FMAs after a multiply), so the CPU and GPU
// agree on which side of the cut every pair lies (a pair at the cut adds T(x_cut) = 0.018
// of its Newtonian force: a flip would be visible against the other backend). A vector with
// no source inside the cut skips the rest (it would add exactly +0).
template <int Order, bool Weighted>
[[gnu::always_inline]] inline void pair(F sx, F sy, F sz, F sw, F xi, F yi, F zi, const Consts& c,
                                        const Bases& b, F& ax, F& ay, F& az) {
  const F dx = S::sub(sx, xi);
  const F dy = S::sub(sy, yi);
  const F dz = S::sub(sz, zi);
  const F r2 = S::fmadd(dz, dz, S::fmadd(dy, dy, S::mul(dx, dx)));
  const M inside = S::lt(r2, c.rcut2);
  if (!S::any(inside)) return;
  const F s2 = S::add(r2, c.eps2);
  const F sinv = S::rsqrt(s2, c);
  const F t = S::sub(taylor<Order>(S::mul(s2, sinv), inside, c, b), S::mul(c.shift, s2));
  F g = S::keep(inside, S::mul(S::mul(t, sinv), S::mul(sinv, sinv)));
  if constexpr (Weighted) g = S::mul(g, sw);
  else (void)sw;
  ax = S::fmadd(g, dx, ax);
  ay = S::fmadd(g, dy, ay);
  az = S::fmadd(g, dz, az);
}

template <typename T>
struct Aligned {   // 64-byte aligned scratch, not zeroed (std::vector would, per thread per call)
  T* p = nullptr;
  explicit Aligned(std::size_t n)
      : p(static_cast<T*>(::operator new[](n * sizeof(T), std::align_val_t(64)))) {}
  ~Aligned() { ::operator delete[](p, std::align_val_t(64)); }
  Aligned(const Aligned&) = delete;
  Aligned& operator=(const Aligned&) = delete;
};

struct Scratch {
  int cap;                     // sources per tile (kTiledLaneTerms vectors), where tiles are cut
  int room;                    // a tile (cap, or one leaf larger) + the leaf that overflows it
  Aligned<float> sx, sy, sz;   // room + 2 W: stores of whole vectors run past the last source
  Aligned<float> sw;           // the sources' weights (weighted jobs only), likewise
  Aligned<double> sums;        // per target particle x, y, z sums, W doubles each (AVX-512
                               // uses 8 of its 16)
  Scratch(int cap_, int room_, std::uint32_t max_count)
      : cap(cap_), room(room_), sx(room_ + 2 * S::W), sy(room_ + 2 * S::W), sz(room_ + 2 * S::W),
        sw(room_ + 2 * S::W),
        sums(3 * S::W * std::size_t(max_count) + S::W) {}
};

// Every target of one leaf against the tile sx/sy/sz[0, m). Float lane sums go into the
// double lanes once per tile. (Two targets per pass, sharing the source loads, measured the
// same: the loop is bound by the FMA ports, not by loads.)
template <int Order, bool Weighted>
[[gnu::always_inline]] inline void tile(const float* xi, const float* yi, const float* zi, const std::uint8_t* wanted,
                                        int ni, const Scratch& sc, int m, const Consts& c_in,
                                        const Bases& b_in, double* sums) {
  const Consts c = c_in;   // local copies: kept in registers, not re-read per pair
  const Bases b = b_in;
  const int nv = (m + S::W - 1) / S::W;
  const float* sx = sc.sx.p;
  const float* sy = sc.sy.p;
  const float* sz = sc.sz.p;
  const float* sw = sc.sw.p;
  for (int i = 0; i < ni; ++i) {
    if (wanted && !wanted[i]) continue;
    const F x = S::set1(xi[i]), y = S::set1(yi[i]), z = S::set1(zi[i]);
    F ax = S::zero(), ay = ax, az = ax;
    for (int v = 0; v < nv; ++v)
      pair<Order, Weighted>(S::load(sx + S::W * v), S::load(sy + S::W * v), S::load(sz + S::W * v),
                            Weighted ? S::load(sw + S::W * v) : S::zero(), x, y, z, c, b, ax, ay, az);
    double* d = sums + 3 * S::W * std::size_t(i);
    S::flush(d, ax);
    S::flush(d + S::W, ay);
    S::flush(d + 2 * S::W, az);
  }
}

// One target-leaf group: its tasks' source leaves are appended to the tile (shifted into the
// target frame, as task_shift() and the other evaluators do: double shift, rounded once)
// until the next leaf's kept sources would not fit; then every target runs over the tile.
// Where tiles are cut depends on the group's task list (less the sources out of reach) and
// the SIMD width alone (cap is fixed; a leaf larger than it makes a tile of its own), never
// on the other leaves of the tree: the same list gives the same bits in a rank's forest as
// in the serial tree.
//
// Sources farther than r_cut + R from the target leaf's centre, R the distance of its
// farthest particle, are beyond the cut for every target (|x_j - x_i| >= |x_j| - |x_i|), so
// append() leaves them out: they would add exactly 0. The reach carries a relative margin of
// 1e-5, far above float rounding of the distances, so no pair inside the cut is ever lost.
template <int Order, bool Weighted>
void group(const Job& job, const Bases& b, const Consts& c, const GroupIdx& grp, Scratch& sc) {
  const std::vector<Leaf>& leaves = *job.leaves;
  const Leaf& li = leaves[grp.i_leaf];
  const int ni = static_cast<int>(li.count);
  const float* xi = job.x + li.first;
  const float* yi = job.y + li.first;
  const float* zi = job.z + li.first;
  const std::uint8_t* wanted = job.targets ? job.targets + li.first : nullptr;
  double r_max2 = 0;   // over every particle of the leaf, wanted or not: the same tiles
  for (int i = 0; i < ni; ++i)
    r_max2 = std::max(r_max2, double(xi[i]) * xi[i] + double(yi[i]) * yi[i] + double(zi[i]) * zi[i]);
  const double reach = (std::sqrt(double(job.k.rcut2)) + std::sqrt(r_max2)) * (1 + 1e-5) + 1e-3;
  const float reach2 = static_cast<float>(reach * reach);
  const float pad = static_cast<float>(reach);
  const double scale = job.k.length_scale;
  double* sums = sc.sums.p;
  std::memset(sums, 0, 3 * S::W * sizeof(double) * std::size_t(ni));

  std::uint32_t cursor = grp.start;
  const std::uint32_t end = grp.start + grp.count;
  while (cursor < end) {
    int m = 0;
    while (cursor < end) {
      const InteractionTask& tk = job.grouped->tasks[cursor];
      const Leaf& lj = leaves[tk.source];
      if (m >= sc.cap) break;   // full (or one leaf larger than a tile): nothing more fits
      const Vec3d shift = task_shift(leaves, tk, job.box) * scale;
      const int grown = S::append(sc.sx.p, sc.sy.p, sc.sz.p, sc.sw.p, m, job.x + lj.first, job.y + lj.first,
                                  job.z + lj.first, Weighted ? job.w + lj.first : nullptr,
                                  static_cast<int>(lj.count), static_cast<float>(shift.x),
                                  static_cast<float>(shift.y), static_cast<float>(shift.z), reach2);
      // Tiles are cut by the sources kept: a task whose sources are all out of reach
      // changes nothing (a rank's forest may lack such a task of the serial tree). A leaf
      // that overflows the tile is taken back and starts the next one.
      if (m > 0 && grown > sc.cap) break;
      m = grown;
      ++cursor;
    }
    if (m == 0) continue;
    // Padding of the last vector at (reach, reach, reach): at least sqrt(3) reach - R >
    // r_cut from every target, so the cut drops it; and near enough that 1/s^3 cannot
    // underflow to a denormal (a microcode assist costs ~100 cycles on Intel).
    for (int q = m; q < m + S::W; ++q) sc.sx.p[q] = sc.sy.p[q] = sc.sz.p[q] = pad;
    if constexpr (Weighted)
      for (int q = m; q < m + S::W; ++q) sc.sw.p[q] = 0.0f;
    tile<Order, Weighted>(xi, yi, zi, wanted, ni, sc, m, c, b, sums);
  }
  const double gm = job.k.acc_scale;
  Vec3d* out = job.acc->data() + li.first;
  for (int i = 0; i < ni; ++i) {
    if (wanted && !wanted[i]) continue;
    const double* d = sums + 3 * S::W * std::size_t(i);
    out[i] = Vec3d{gm * S::reduce(d), gm * S::reduce(d + S::W), gm * S::reduce(d + 2 * S::W)};
  }
}

template <int Order, bool Weighted = false>
void run_order(const Job& job) {
  const Bases b(*job.table);
  const Consts c(job.k);
  const int cap = kTiledLaneTerms * S::W;
  const int leaf = (static_cast<int>(job.max_count) + S::W - 1) / S::W * S::W;
  const int room = std::max(cap, leaf) + leaf;
  const std::int64_t n_groups = static_cast<std::int64_t>(job.grouped->groups.size());
#pragma omp parallel
  {
    Scratch sc(cap, room, job.max_count);
#pragma omp for schedule(dynamic, 1)
    for (std::int64_t g = 0; g < n_groups; ++g) group<Order, Weighted>(job, b, c, job.grouped->groups[g], sc);
  }
}

void run_any_order(int taylor_order, const Job& job) {
  if (job.w && taylor_order != kNoTruncation) fail("tiled P2P: source weights are for the Newtonian kernel only");
  switch (taylor_order) {
    case kNoTruncation: return job.w ? run_order<kNoTruncation, true>(job) : run_order<kNoTruncation>(job);
    case 0: return run_order<0>(job);
    case 1: return run_order<1>(job);
    case 2: return run_order<2>(job);
    case 3: return run_order<3>(job);
    case 4: return run_order<4>(job);
    default: fail("tiled P2P: taylor_order = {} is not in 0..4", taylor_order);
  }
}
