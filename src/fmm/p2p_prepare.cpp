#include "fmm/p2p_prepare.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>

#include "core/error.hpp"
#include "fmm/truncation.hpp"

namespace orbis {

namespace {

// Pieces of at most kPiece tasks: the unit of the parallel passes over task lists (fixed
// by the input, so sums and positions never depend on the thread count).
constexpr std::size_t kPiece = std::size_t{1} << 16;

struct Piece {
  std::size_t span, offset, size, global;   // span index, offset in it, tasks, index in the whole list
};

// Pieces covering tasks [begin, end) of the concatenation of spans.
std::vector<Piece> pieces_of(const std::vector<TaskSpan>& spans, std::size_t begin, std::size_t end) {
  std::vector<Piece> out;
  std::size_t at = 0;
  for (std::size_t c = 0; c < spans.size() && at < end; ++c) {
    const std::size_t lo = std::max(begin, at), hi = std::min(end, at + spans[c].size);
    for (std::size_t a = lo; a < hi; a += kPiece) out.push_back({c, a - at, std::min(kPiece, hi - a), a});
    at += spans[c].size;
  }
  return out;
}

[[noreturn]] void bad_task(const InteractionTask& t, std::size_t n_leaves) {
  fail("P2P: task ({}, {}, image {} {} {}) refers to a leaf beyond the {} leaves or an image "
       "outside -1..1", t.target, t.source, int(t.image[0]), int(t.image[1]), int(t.image[2]), n_leaves);
}

bool task_ok(const InteractionTask& t, std::size_t n_leaves) {
  bool ok = t.target < n_leaves && t.source < n_leaves;
  for (int d = 0; d < 3; ++d) ok &= t.image[d] >= -1 && t.image[d] <= 1;
  return ok;
}

}  // namespace

void check_p2p_settings(const P2PSettings& s, const P2PInput& in, std::uint32_t max_count) {
  if (!in.positions || !in.leaves || (!in.tasks && !in.task_spans))
    fail("P2P: positions, leaves and tasks must all be given");
  if (s.kernel == KernelKind::newtonian) {
    if (!(s.r_cut > 0) || !std::isfinite(s.r_cut))
      fail("P2P (Newtonian): r_cut = {} must be positive and finite (beyond every pair)", s.r_cut);
  } else {
    if (!(s.box_mpc_h > 0)) fail("P2P: box size {} Mpc/h must be positive", s.box_mpc_h);
    if (!(s.r_s > 0)) fail("P2P: r_s = {} Mpc/h must be positive", s.r_s);
    if (!(s.r_cut > 0) || !(s.r_cut < 0.5 * s.box_mpc_h))
      fail("P2P: r_cut = {} Mpc/h must lie in (0, BoxSize/2 = {})", s.r_cut, 0.5 * s.box_mpc_h);
    if (s.taylor_order < -1 || s.taylor_order > 4)
      fail("P2P: taylor_order = {} is not in 0..4 (or -1 for exact erfc)", s.taylor_order);
    if (s.table_size < 2) fail("P2P: taylor_table_size = {} must be >= 2", s.table_size);
  }
  if (!(s.softening >= 0)) fail("P2P: softening {} Mpc/h must be >= 0", s.softening);
  const std::size_t n = in.positions->size();
  if (in.weights && s.kernel != KernelKind::newtonian)
    fail("P2P: source weights (individual masses) are for the Newtonian kernel of vacuum boundaries only");
  if (in.weights && in.weights->size() != n) fail("P2P: {} source weights for {} particles", in.weights->size(), n);
  if (n >= (std::size_t{1} << 32)) fail("P2P: {} particles exceed 32-bit indices", n);
  for (const Leaf& l : *in.leaves) {
    if (std::size_t{l.first} + l.count > n)
      fail("P2P: leaf [{}, {}) lies outside the {} particles", l.first, l.first + l.count, n);
    if (l.count > max_count)
      fail("P2P: a leaf holds {} particles, more than this backend's {} ([gravity] max_leaf)",
           l.count, max_count);
  }
}

void check_p2p_call(const P2PSettings& s, const P2PInput& in, std::uint32_t max_count) {
  check_p2p_settings(s, in, max_count);
  const std::size_t nl = in.leaves->size();
  const std::vector<TaskSpan> spans = task_spans_of(in);
  const std::vector<Piece> pieces = pieces_of(spans, 0, span_entries(spans));
  bool bad = false;
#pragma omp parallel for schedule(dynamic, 8) reduction(|| : bad)
  for (std::int64_t p = 0; p < static_cast<std::int64_t>(pieces.size()); ++p) {
    const Piece& pc = pieces[static_cast<std::size_t>(p)];
    const InteractionTask* t = spans[pc.span].data + pc.offset;
    for (std::size_t q = 0; q < pc.size; ++q) bad = bad || !(t[q].target < nl && t[q].source < nl);
  }
  if (bad)
    for (const TaskSpan& span : spans)
      for (std::size_t q = 0; q < span.size; ++q)
        if (span.data[q].target >= nl || span.data[q].source >= nl)
          fail("P2P: task ({}, {}) refers to a leaf beyond the {} leaves", span.data[q].target,
               span.data[q].source, nl);
}

std::vector<TaskSpan> task_spans_of(const P2PInput& in) {
  if (in.task_spans) return *in.task_spans;
  if (in.tasks) return {TaskSpan{in.tasks->data(), in.tasks->size()}};
  return {};
}

void check_packed_leaves(std::size_t n_leaves, const char* who) {
  if (n_leaves > kMaxPackedLeaves)
    fail("{}: {} tree leaves, but the GPU's packed P2P tasks hold at most {}: a larger [gravity] max_leaf, fewer "
         "particles per GPU, or [gpu] backend = \"cpu\"", who, n_leaves, kMaxPackedLeaves);
}

std::size_t span_entries(const std::vector<TaskSpan>& spans) {
  std::size_t n = 0;
  for (const TaskSpan& s : spans) n += s.size;
  return n;
}

PackedCount pack_p2p_tasks(const std::vector<TaskSpan>& spans, std::size_t begin, std::size_t end,
                           const std::vector<Leaf>& leaves, std::uint32_t* targets, std::uint32_t* packed) {
  const std::size_t nl = leaves.size();
  check_packed_leaves(nl, "P2P");
  const std::vector<Piece> pieces = pieces_of(spans, begin, end);
  std::uint64_t pairs = 0, tasks = 0;
  bool bad = false;
#pragma omp parallel for schedule(dynamic, 8) reduction(+ : pairs, tasks) reduction(|| : bad)
  for (std::int64_t p = 0; p < static_cast<std::int64_t>(pieces.size()); ++p) {
    const Piece& pc = pieces[static_cast<std::size_t>(p)];
    const InteractionTask* t = spans[pc.span].data + pc.offset;
    std::uint32_t* tg = targets + (pc.global - begin);
    std::uint32_t* pk = packed + (pc.global - begin);
    std::uint64_t sum = 0, mutual = 0;
    bool ok = true;
    for (std::size_t q = 0; q < pc.size; ++q) {
      const InteractionTask& task = t[q];
      const bool good = task_ok(task, nl);
      const std::uint32_t m = (task.flags & kMutualTask) ? 1 : 0;
      ok &= good;
      tg[q] = task.target | (m ? kMutualBit : 0);
      pk[q] = pack_source(task.source, task.image);
      if (good) sum += (1 + m) * (std::uint64_t{leaves[task.target].count} * leaves[task.source].count);
      mutual += m;
    }
    pairs += sum;
    tasks += pc.size + mutual;
    bad = bad || !ok;
  }
  if (bad)
    for (const Piece& pc : pieces)
      for (std::size_t q = 0; q < pc.size; ++q)
        if (!task_ok(spans[pc.span].data[pc.offset + q], nl)) bad_task(spans[pc.span].data[pc.offset + q], nl);
  return {pairs, tasks};
}

std::vector<std::uint64_t> tasks_per_target(const std::vector<TaskSpan>& spans, std::size_t n_leaves) {
  const std::vector<Piece> pieces = pieces_of(spans, 0, span_entries(spans));
  std::vector<std::atomic<std::uint64_t>> count(n_leaves);
  for (auto& c : count) c.store(0, std::memory_order_relaxed);
#pragma omp parallel for schedule(dynamic, 8)
  for (std::int64_t p = 0; p < static_cast<std::int64_t>(pieces.size()); ++p) {
    const Piece& pc = pieces[static_cast<std::size_t>(p)];
    const InteractionTask* t = spans[pc.span].data + pc.offset;
    for (std::size_t q = 0; q < pc.size; ++q) {
      if (t[q].target < n_leaves) count[t[q].target].fetch_add(1, std::memory_order_relaxed);
      if ((t[q].flags & kMutualTask) && t[q].source < n_leaves)
        count[t[q].source].fetch_add(1, std::memory_order_relaxed);
    }
  }
  std::vector<std::uint64_t> out(n_leaves);
  for (std::size_t l = 0; l < n_leaves; ++l) out[l] = count[l].load(std::memory_order_relaxed);
  return out;
}

PackedCount pack_p2p_tasks_chunked(const std::vector<TaskSpan>& spans, const std::vector<Leaf>& leaves,
                                   const std::vector<std::uint32_t>& bounds, std::uint32_t* targets,
                                   std::uint32_t* packed, std::vector<std::size_t>& offsets) {
  const std::size_t nl = leaves.size();
  check_packed_leaves(nl, "P2P");
  if (bounds.size() < 2 || bounds.front() != 0 || bounds.back() < nl)
    fail("internal: P2P chunk bounds must run from 0 to the number of leaves");
  const std::size_t n_chunks = bounds.size() - 1;
  const std::vector<Piece> pieces = pieces_of(spans, 0, span_entries(spans));
  const auto np = static_cast<std::int64_t>(pieces.size());
  auto chunk_of = [&](std::uint32_t target) {
    return static_cast<std::size_t>(std::upper_bound(bounds.begin(), bounds.end(), target) - bounds.begin()) - 1;
  };
  // Pass 1: tasks per (piece, chunk), a mutual entry as its two tasks; bad tasks are
  // reported before anything is written.
  std::vector<std::size_t> cursor(pieces.size() * n_chunks, 0);
  bool bad = false;
#pragma omp parallel for schedule(dynamic, 8) reduction(|| : bad)
  for (std::int64_t p = 0; p < np; ++p) {
    const Piece& pc = pieces[static_cast<std::size_t>(p)];
    const InteractionTask* t = spans[pc.span].data + pc.offset;
    std::size_t* c = cursor.data() + static_cast<std::size_t>(p) * n_chunks;
    for (std::size_t q = 0; q < pc.size; ++q) {
      if (!task_ok(t[q], nl)) {
        bad = true;
        continue;
      }
      ++c[chunk_of(t[q].target)];
      if (t[q].flags & kMutualTask) ++c[chunk_of(t[q].source)];
    }
  }
  if (bad)
    for (const Piece& pc : pieces)
      for (std::size_t q = 0; q < pc.size; ++q)
        if (!task_ok(spans[pc.span].data[pc.offset + q], nl)) bad_task(spans[pc.span].data[pc.offset + q], nl);
  // Chunk-major exclusive prefix: chunk k's tasks from piece p start at cursor[p][k].
  offsets.assign(n_chunks + 1, 0);
  std::size_t run = 0;
  for (std::size_t k = 0; k < n_chunks; ++k) {
    offsets[k] = run;
    for (std::size_t p = 0; p < pieces.size(); ++p) {
      const std::size_t c = cursor[p * n_chunks + k];
      cursor[p * n_chunks + k] = run;
      run += c;
    }
  }
  offsets[n_chunks] = run;
  std::uint64_t pairs = 0;
#pragma omp parallel for schedule(dynamic, 8) reduction(+ : pairs)
  for (std::int64_t p = 0; p < np; ++p) {
    const Piece& pc = pieces[static_cast<std::size_t>(p)];
    const InteractionTask* t = spans[pc.span].data + pc.offset;
    std::size_t* c = cursor.data() + static_cast<std::size_t>(p) * n_chunks;
    std::uint64_t sum = 0;
    for (std::size_t q = 0; q < pc.size; ++q) {
      const InteractionTask& task = t[q];
      const std::uint64_t pair = std::uint64_t{leaves[task.target].count} * leaves[task.source].count;
      std::size_t at = c[chunk_of(task.target)]++;
      targets[at] = task.target;
      packed[at] = pack_source(task.source, task.image);
      sum += pair;
      if (task.flags & kMutualTask) {   // the reverse task, right after in expanded order
        const std::int8_t back[3] = {static_cast<std::int8_t>(-task.image[0]), static_cast<std::int8_t>(-task.image[1]),
                                     static_cast<std::int8_t>(-task.image[2])};
        at = c[chunk_of(task.source)]++;
        targets[at] = task.source;
        packed[at] = pack_source(task.target, back);
        sum += pair;
      }
    }
    pairs += sum;
  }
  return {pairs, run};
}

template <typename R>
void leaf_relative_positions(const std::vector<Vec3d>& pos, const std::vector<Leaf>& leaves,
                             double scale, R* x, R* y, R* z) {
  const std::int64_t n = static_cast<std::int64_t>(pos.size());
#pragma omp parallel for schedule(static)
  for (std::int64_t p = 0; p < n; ++p) x[p] = y[p] = z[p] = R(0);
  const std::int64_t nl = static_cast<std::int64_t>(leaves.size());
#pragma omp parallel for schedule(static)
  for (std::int64_t l = 0; l < nl; ++l) {
    const Leaf& leaf = leaves[l];
    for (std::uint32_t p = leaf.first; p < leaf.first + leaf.count; ++p) {
      x[p] = static_cast<R>((pos[p].x - leaf.centre.x) * scale);
      y[p] = static_cast<R>((pos[p].y - leaf.centre.y) * scale);
      z[p] = static_cast<R>((pos[p].z - leaf.centre.z) * scale);
    }
  }
}

template <typename R>
void leaf_relative_positions(const std::vector<Vec3d>& pos, const std::vector<Leaf>& leaves,
                             double scale, LeafRelativePositions<R>& out) {
  out.x.resize(pos.size());
  out.y.resize(pos.size());
  out.z.resize(pos.size());
  leaf_relative_positions(pos, leaves, scale, out.x.data(), out.y.data(), out.z.data());
}

template void leaf_relative_positions<float>(const std::vector<Vec3d>&, const std::vector<Leaf>&,
                                             double, LeafRelativePositions<float>&);
template void leaf_relative_positions<double>(const std::vector<Vec3d>&, const std::vector<Leaf>&,
                                              double, LeafRelativePositions<double>&);
template void leaf_relative_positions<float>(const std::vector<Vec3d>&, const std::vector<Leaf>&,
                                             double, float*, float*, float*);
template void leaf_relative_positions<double>(const std::vector<Vec3d>&, const std::vector<Leaf>&,
                                              double, double*, double*, double*);

void copy_accelerations(const double* xyz, std::size_t n, std::vector<Vec3d>& acc) {
  static_assert(sizeof(Vec3d) == 3 * sizeof(double), "Vec3d is three doubles");
  acc.resize(n);
  const std::int64_t chunks = 64;
#pragma omp parallel for schedule(static)
  for (std::int64_t c = 0; c < chunks; ++c) {
    const std::size_t lo = n * c / chunks, hi = n * (c + 1) / chunks;
    if (hi > lo) std::memcpy(static_cast<void*>(&acc[lo]), xyz + 3 * lo, (hi - lo) * sizeof(Vec3d));
  }
}

double p2p_interaction_count(const std::vector<Leaf>& leaves, const std::vector<InteractionTask>& tasks,
                             const std::vector<std::uint8_t>* targets) {
  // Per leaf, the particles evaluated: all, or the flagged ones.
  std::vector<std::uint32_t> wanted;
  if (targets) {
    wanted.resize(leaves.size());
#pragma omp parallel for schedule(static)
    for (std::int64_t l = 0; l < static_cast<std::int64_t>(leaves.size()); ++l) {
      const Leaf& leaf = leaves[static_cast<std::size_t>(l)];
      std::uint32_t c = 0;
      for (std::uint32_t t = leaf.first; t < leaf.first + leaf.count; ++t) c += (*targets)[t] != 0;
      wanted[static_cast<std::size_t>(l)] = c;
    }
  }
  const auto n = static_cast<std::int64_t>(tasks.size());
  std::uint64_t sum = 0;   // integer: exact, so the same for any thread count
#pragma omp parallel for schedule(static) reduction(+ : sum)
  for (std::int64_t q = 0; q < n; ++q)
    sum += std::uint64_t{targets ? wanted[tasks[q].target] : leaves[tasks[q].target].count} *
           leaves[tasks[q].source].count;
  return static_cast<double>(sum);
}

std::uint32_t max_leaf_count(const std::vector<Leaf>& leaves) {
  std::uint32_t m = 0;
  for (const Leaf& l : leaves) m = std::max(m, l.count);
  return m;
}

}  // namespace orbis
