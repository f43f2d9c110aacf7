// CPU P2P. Float with the Taylor table (orders 0-4) or the Newtonian kernel (T = 1) on
// x86-64-v3/v4 CPUs runs the tiled kernels (p2p_cpu_tiled.hpp: the group's sources in the
// SIMD lanes, ~5x faster); the exact path, double precision, the baseline level and other
// compilers run the generic loop below, which is also the reference the tiled kernels are
// tested against.
//
// Generic loop: OpenMP over target-leaf groups (dynamic schedule: leaves differ in work by
// orders of magnitude in clustered regions); inside a group, the target leaf's particles
// sit in small SoA arrays and each source particle is broadcast against all of them, so
// the inner loop runs over targets with no reduction and vectorises without fast-math
// (gathers for the T/E table). Per task the float sums go into double accumulators (cheap:
// once per target per task), which keeps float results at ~1e-7 even for 10^4 neighbours.
//
// The generic loop is compiled three times, for x86-64-v4 (AVX-512), x86-64-v3 (AVX2+FMA)
// and the baseline, and the CPU picks one at run time (CpuP2POptions can force a lower
// level), so one binary is fast on the build machine and still runs everywhere. This file
// is built with -fno-math-errno and -fno-trapping-math (src/CMakeLists.txt): without them
// GCC keeps sqrt's errno branch and will not if-convert the cut select, and vectorises
// nothing (checked with -fopt-info-vec).
#include "fmm/p2p_cpu.hpp"

#include <omp.h>

#include <cstdint>

#include <fmt/format.h>

#include "core/timer.hpp"
#include "fmm/p2p_grouping.hpp"
#include "fmm/p2p_cpu_tiled.hpp"
#include "fmm/p2p_kernel.hpp"

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define ORBIS_P2P_MULTIVERSION 1
#define ORBIS_ALWAYS_INLINE [[gnu::always_inline]] inline
#else
#define ORBIS_P2P_MULTIVERSION 0
#define ORBIS_ALWAYS_INLINE inline
#endif

namespace orbis {
namespace {

// Source particles of one task, already shifted into the target leaf's frame, against all
// particles of the target leaf. a* are the task's partial sums (float or double). wj: the
// sources' weights (the Newtonian kernel of individual masses), or null.
template <typename R>
struct LeafPairArgs {
  int ni;
  const R* xi; const R* yi; const R* zi;
  int nj;
  const R* xj; const R* yj; const R* zj;
  const R* wj;
  P2PPairConstants<R> k;
  const R* t; const R* e;
  R* ax; R* ay; R* az;
};

template <int Order, typename R>
ORBIS_ALWAYS_INLINE void leaf_pair_body(const LeafPairArgs<R>& a) {
  const P2PPairConstants<R> k = a.k;   // local copy: provably not aliased by the outputs
  const R* __restrict xi = a.xi; const R* __restrict yi = a.yi; const R* __restrict zi = a.zi;
  // Built once, outside the simd loop (inside, GCC makes it a per-lane array in memory).
  const SplitTableReader<R> table{a.t, a.e};
  R* __restrict ax = a.ax; R* __restrict ay = a.ay; R* __restrict az = a.az;
  const int ni = a.ni;
  for (int j = 0; j < a.nj; ++j) {
    const R sx = a.xj[j], sy = a.yj[j], sz = a.zj[j];
    if constexpr (Order == kNoTruncation) {   // the only kernel with weights (w = 1: the same bits)
      const R w = a.wj ? a.wj[j] : R(1);
#pragma omp simd
      for (int i = 0; i < ni; ++i) {
        R fx = ax[i], fy = ay[i], fz = az[i];
        p2p_pair_weighted<Order>(sx - xi[i], sy - yi[i], sz - zi[i], w, k, table, fx, fy, fz);
        ax[i] = fx; ay[i] = fy; az[i] = fz;
      }
    } else {
#pragma omp simd
      for (int i = 0; i < ni; ++i) {
        R fx = ax[i], fy = ay[i], fz = az[i];
        p2p_pair<Order>(sx - xi[i], sy - yi[i], sz - zi[i], k, table, fx, fy, fz);
        ax[i] = fx; ay[i] = fy; az[i] = fz;
      }
    }
  }
}

template <typename R> using LeafPairFn = void (*)(const LeafPairArgs<R>&);

template <int Order, typename R>
void leaf_pair_base(const LeafPairArgs<R>& a) { leaf_pair_body<Order, R>(a); }
#if ORBIS_P2P_MULTIVERSION
template <int Order, typename R>
[[gnu::target("arch=x86-64-v3")]] void leaf_pair_v3(const LeafPairArgs<R>& a) {
  leaf_pair_body<Order, R>(a);
}
template <int Order, typename R>
[[gnu::target("arch=x86-64-v4")]] void leaf_pair_v4(const LeafPairArgs<R>& a) {
  leaf_pair_body<Order, R>(a);
}
#endif

int cpu_level() {
#if ORBIS_P2P_MULTIVERSION
  if (__builtin_cpu_supports("x86-64-v4")) return 4;
  if (__builtin_cpu_supports("x86-64-v3")) return 3;
#endif
  return 0;
}

template <int Order, typename R>
LeafPairFn<R> select_leaf_pair(int level) {
#if ORBIS_P2P_MULTIVERSION
  switch (level) {
    case 4: return leaf_pair_v4<Order, R>;
    case 3: return leaf_pair_v3<Order, R>;
    default: break;
  }
#else
  (void)level;
#endif
  return leaf_pair_base<Order, R>;
}

template <typename R>
LeafPairFn<R> select_leaf_pair(int order, int level) {
  switch (order) {
    case kNoTruncation: return select_leaf_pair<kNoTruncation, R>(level);
    case kExactTruncation: return select_leaf_pair<kExactTruncation, R>(level);
    case 0: return select_leaf_pair<0, R>(level);
    case 1: return select_leaf_pair<1, R>(level);
    case 2: return select_leaf_pair<2, R>(level);
    case 3: return select_leaf_pair<3, R>(level);
    case 4: return select_leaf_pair<4, R>(level);
    default: fail("P2P: taylor_order = {} is not in -1..4", order);
  }
}

template <typename R>
void evaluate_groups(const GroupedTasks& grouped, const std::vector<Leaf>& leaves,
                     const LeafRelativePositions<R>& rel, double box,
                     const P2PPairConstants<R>& k, const R* t, const R* e, LeafPairFn<R> fn,
                     std::uint32_t max_count, const std::vector<double>* weights, std::vector<Vec3d>& acc) {
  const double scale = k.length_scale, g_mass = k.acc_scale;
  const std::int64_t n_groups = static_cast<std::int64_t>(grouped.groups.size());
#pragma omp parallel
  {
    // Per-thread scratch: target SoA, source SoA, the task's partial sums, double sums.
    std::vector<R> buf(10 * std::size_t{max_count} + 16);
    std::vector<double> sum(3 * std::size_t{max_count});
    R* xi = buf.data(); R* yi = xi + max_count; R* zi = yi + max_count;
    R* xj = zi + max_count; R* yj = xj + max_count; R* zj = yj + max_count;
    R* ax = zj + max_count; R* ay = ax + max_count; R* az = ay + max_count;
    R* wj = az + max_count;
#pragma omp for schedule(dynamic, 1)
    for (std::int64_t g = 0; g < n_groups; ++g) {
      const GroupIdx& group = grouped.groups[g];
      const Leaf& li = leaves[group.i_leaf];
      const int ni = static_cast<int>(li.count);
      for (int i = 0; i < ni; ++i) {
        xi[i] = rel.x[li.first + i]; yi[i] = rel.y[li.first + i]; zi[i] = rel.z[li.first + i];
      }
      std::fill(sum.begin(), sum.begin() + 3 * ni, 0.0);
      for (std::uint32_t task = group.start; task < group.start + group.count; ++task) {
        const InteractionTask& tk = grouped.tasks[task];
        const Leaf& lj = leaves[tk.source];
        const int nj = static_cast<int>(lj.count);
        const Vec3d shift = task_shift(leaves, tk, box) * scale;
        const R sx = static_cast<R>(shift.x), sy = static_cast<R>(shift.y),
                sz = static_cast<R>(shift.z);
        for (int j = 0; j < nj; ++j) {
          xj[j] = rel.x[lj.first + j] + sx;
          yj[j] = rel.y[lj.first + j] + sy;
          zj[j] = rel.z[lj.first + j] + sz;
        }
        if (weights)
          for (int j = 0; j < nj; ++j) wj[j] = static_cast<R>((*weights)[lj.first + j]);
        std::fill(ax, ax + 3 * std::size_t{max_count}, R(0));
        fn(LeafPairArgs<R>{ni, xi, yi, zi, nj, xj, yj, zj, weights ? wj : nullptr, k, t, e, ax, ay, az});
        for (int i = 0; i < ni; ++i) {
          sum[3 * i] += ax[i]; sum[3 * i + 1] += ay[i]; sum[3 * i + 2] += az[i];
        }
      }
      for (int i = 0; i < ni; ++i)
        acc[li.first + i] = Vec3d{g_mass * sum[3 * i], g_mass * sum[3 * i + 1],
                                  g_mass * sum[3 * i + 2]};
    }
  }
}

std::string level_name(int level) {
  switch (level) {
    case 4: return "x86-64-v4 (AVX-512)";
    case 3: return "x86-64-v3 (AVX2+FMA)";
    default: return "baseline";
  }
}

}  // namespace

CpuP2PEvaluator::CpuP2PEvaluator(CpuP2POptions options) : options_(options) {
  const int best = cpu_level();
  if (options.simd_level < 0) {
    level_ = best;
  } else {
    if (options.simd_level != 0 && options.simd_level != 3 && options.simd_level != 4)
      fail("CPU P2P: SIMD level {} is not one of 0, 3, 4", options.simd_level);
    if (options.simd_level > best)
      fail("CPU P2P: SIMD level {} requested, this CPU (or build) runs at most {}",
           options.simd_level, level_name(best));
    level_ = options.simd_level;
  }
}

int CpuP2PEvaluator::cpu_simd_level() { return cpu_level(); }

std::string CpuP2PEvaluator::simd_variant() { return level_name(cpu_level()); }

std::string CpuP2PEvaluator::variant(int taylor_order, bool double_precision) const {
  const bool tiled = options_.tiled_kernel && !double_precision &&
                     p2p_tiled::available(level_, taylor_order);
  return level_name(level_) + (tiled ? ", tiled" : ", generic");
}

template <typename R>
bool CpuP2PEvaluator::run(const P2PSettings& s, const P2PInput& in, std::vector<Vec3d>& acc) {
  const std::vector<Leaf>& leaves = *in.leaves;
  const std::uint32_t max_count = max_leaf_count(leaves);
  const GroupedTasks grouped = group_tasks_by_target(*in.tasks, leaves.size());

  LeafRelativePositions<R>* rel;
  std::unique_ptr<TruncationTable<R>>* table;
  if constexpr (std::is_same_v<R, float>) { rel = &rel_f_; table = &table_f_; }
  else { rel = &rel_d_; table = &table_d_; }
  const int order = p2p_order_of(s);
  const P2PPairConstants<R> k = pair_constants_of<R>(s);
  leaf_relative_positions(*in.positions, leaves, k.length_scale, *rel);
  if (!*table || (*table)->size() != s.table_size) {
    *table = std::make_unique<TruncationTable<R>>(s.table_size);
    if constexpr (std::is_same_v<R, float>) coef_layout_.build(**table);
  }
  if constexpr (std::is_same_v<R, float>) {
    if (options_.tiled_kernel && p2p_tiled::available(level_, order)) {
      p2p_tiled::Job job;
      job.grouped = &grouped;
      job.leaves = &leaves;
      job.x = rel->x.data();
      job.y = rel->y.data();
      job.z = rel->z.data();
      job.box = s.box_mpc_h;
      job.k = k;
      job.table = &coef_layout_;
      job.max_count = max_count;
      job.acc = &acc;
      job.targets = in.targets ? in.targets->data() : nullptr;
      if (in.weights) {   // the sources' weights in float, as the tiles hold them
        weights_f_.resize(in.weights->size());
        for (std::size_t i = 0; i < weights_f_.size(); ++i) weights_f_[i] = static_cast<float>((*in.weights)[i]);
        job.w = weights_f_.data();
      }
      p2p_tiled::run(level_, order, job);
      return true;
    }
  }
  // The generic loop runs every particle of a target leaf (in the SIMD lanes).
  evaluate_groups<R>(grouped, leaves, *rel, s.box_mpc_h, k, (*table)->t().data(),
                     (*table)->e().data(), select_leaf_pair<R>(order, level_),
                     max_count, in.weights, acc);
  return false;
}

P2PStats CpuP2PEvaluator::evaluate(const P2PSettings& settings, const P2PInput& input,
                                   std::vector<Vec3d>& acc) {
  Stopwatch watch;
  check_p2p_call(settings, input, UINT32_MAX);
  acc.assign(input.positions->size(), Vec3d{});
  const bool only_targets = settings.double_precision ? run<double>(settings, input, acc) : run<float>(settings, input, acc);
  P2PStats stats;
  stats.seconds = watch.seconds();
  stats.interactions = p2p_interaction_count(*input.leaves, *input.tasks, only_targets ? input.targets : nullptr);
  stats.where = fmt::format("cpu ({} threads, {}, {})", omp_get_max_threads(),
                            variant(p2p_order_of(settings), settings.double_precision),
                            settings.double_precision ? "double" : "float");
  return stats;
}

}  // namespace orbis
