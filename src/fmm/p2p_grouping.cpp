// Stable counting sort by target, in parallel. Three passes over pieces of at most kPiece
// tasks and buckets of W consecutive targets (both fixed by the input sizes, never by the
// thread count): count per (piece, bucket); exclusive prefix in bucket-major order, so
// bucket b's tasks land in [start_b, end_b) in piece order; scatter; then each bucket is
// sorted by target inside its own range (a small counting sort that stays in cache). A
// piece is a run of consecutive spans (or of one long span's tasks) filled up to kPiece
// tasks: the walk hands over thousands of spans, most of a few tasks, and a piece per span
// made the count and cursor tables (pieces x buckets) far larger than the tasks.
#include "fmm/p2p_grouping.hpp"

#include <algorithm>
#include <atomic>

#include "core/error.hpp"

namespace orbis {
namespace {

constexpr std::size_t kPiece = std::size_t{1} << 16;
constexpr std::size_t kMaxBuckets = 1024;

// Room for the list to grow a little from one step to the next without reallocating (a
// reallocation copies and first-touches the whole list, serially).
template <typename T>
void resize_with_headroom(std::vector<T>& v, std::size_t n) {
  if (v.capacity() < n) v.reserve(n + n / 8);
  v.resize(n);
}

// The canonical order of one target's tasks: by source rank, then image (lexicographic).
// A task less its target (the same for the whole run) packs into 64 bits that compare in
// that order: rank, image + 128 per axis, flags. Sorting those plain integers is ~2x
// faster than sorting the 12-byte tasks with a comparator.
std::uint64_t pack_task(const InteractionTask& t, const std::uint32_t* rank) {
  const std::uint64_t r = rank ? rank[t.source] : t.source;
  return r << 32 | std::uint64_t{static_cast<std::uint8_t>(t.image[0] + 128)} << 24 |
         std::uint64_t{static_cast<std::uint8_t>(t.image[1] + 128)} << 16 |
         std::uint64_t{static_cast<std::uint8_t>(t.image[2] + 128)} << 8 | static_cast<std::uint8_t>(t.flags);
}
InteractionTask unpack_task(std::uint64_t v, std::uint32_t target, const std::uint32_t* source_of) {
  const auto r = static_cast<std::uint32_t>(v >> 32);
  InteractionTask t;
  t.target = target;
  t.source = source_of ? source_of[r] : r;
  t.image[0] = static_cast<std::int8_t>(static_cast<int>((v >> 24) & 0xff) - 128);
  t.image[1] = static_cast<std::int8_t>(static_cast<int>((v >> 16) & 0xff) - 128);
  t.image[2] = static_cast<std::int8_t>(static_cast<int>((v >> 8) & 0xff) - 128);
  t.flags = static_cast<std::int8_t>(v & 0xff);
  return t;
}

void sort_by_source(InteractionTask* first, InteractionTask* last, const std::uint32_t* rank,
                    const std::uint32_t* source_of, std::vector<std::uint64_t>& packed) {
  const std::size_t n = static_cast<std::size_t>(last - first);
  if (n < 2) return;
  packed.resize(n);
  for (std::size_t q = 0; q < n; ++q) packed[q] = pack_task(first[q], rank);
  std::sort(packed.begin(), packed.end());
  const std::uint32_t target = first->target;
  for (std::size_t q = 0; q < n; ++q) first[q] = unpack_task(packed[q], target, source_of);
}

}  // namespace

void group_spans_by_target(const std::vector<TaskSpan>& spans, std::size_t n_targets,
                           std::size_t source_limit, std::vector<std::size_t>& offsets,
                           std::vector<InteractionTask>& out, std::vector<InteractionTask>& scratch,
                           bool canonical, const std::uint32_t* source_rank, const std::uint32_t* rank_source) {
  // Pieces: parts[piece_start[p] .. piece_start[p + 1]) are piece p's runs of tasks, in
  // input order, at most kPiece tasks in all.
  std::vector<TaskSpan> parts;
  std::vector<std::size_t> piece_start{0};
  std::size_t total = 0, fill = 0;
  for (const TaskSpan& s : spans) {
    for (std::size_t a = 0; a < s.size;) {
      if (fill == kPiece) {
        piece_start.push_back(parts.size());
        fill = 0;
      }
      const std::size_t take = std::min(kPiece - fill, s.size - a);
      parts.push_back({s.data + a, take});
      fill += take;
      a += take;
    }
    total += s.size;
  }
  piece_start.push_back(parts.size());
  const std::size_t n_piece = piece_start.size() - 1;
  offsets.assign(n_targets + 1, 0);
  resize_with_headroom(out, total);
  if (total == 0) return;
  if (n_targets == 0) fail("task grouping: {} tasks but no targets", total);

  std::size_t width = 1;   // targets per bucket, a power of two
  while ((n_targets + width - 1) / width > kMaxBuckets) width *= 2;
  const std::size_t n_buckets = (n_targets + width - 1) / width;
  const auto n_pieces = static_cast<std::int64_t>(n_piece);
  std::vector<std::uint32_t> counts(n_piece * n_buckets, 0);   // [piece][bucket]
  std::atomic<bool> bad{false};

#pragma omp parallel for schedule(dynamic, 4)
  for (std::int64_t p = 0; p < n_pieces; ++p) {
    std::uint32_t* c = counts.data() + static_cast<std::size_t>(p) * n_buckets;
    bool ok = true;
    for (std::size_t k = piece_start[static_cast<std::size_t>(p)]; k < piece_start[static_cast<std::size_t>(p) + 1]; ++k)
      for (std::size_t q = 0; q < parts[k].size; ++q) {
        const InteractionTask& t = parts[k].data[q];
        ok &= t.target < n_targets && (source_limit == 0 || t.source < source_limit);
        ++c[std::min<std::size_t>(t.target, n_targets - 1) / width];
      }
    if (!ok) bad = true;
  }
  if (bad) {
    for (const TaskSpan& part : parts)
      for (std::size_t q = 0; q < part.size; ++q) {
        const InteractionTask& t = part.data[q];
        if (t.target >= n_targets || (source_limit > 0 && t.source >= source_limit))
          fail("task grouping: task ({}, {}) refers to a leaf/node beyond the {} targets{}", t.target,
               t.source, n_targets,
               source_limit > 0 ? fmt::format(" or {} sources", source_limit) : std::string());
      }
  }

  // Bucket starts: per-bucket totals (columns), then a prefix over buckets; each column
  // then becomes the pieces' write cursors, in piece order.
  std::vector<std::size_t> bucket_start(n_buckets + 1, 0);
  const auto nb = static_cast<std::int64_t>(n_buckets);
  std::vector<std::size_t> cursor(n_piece * n_buckets);
#pragma omp parallel for schedule(static)
  for (std::int64_t b = 0; b < nb; ++b) {
    std::size_t sum = 0;
    for (std::size_t p = 0; p < n_piece; ++p) sum += counts[p * n_buckets + static_cast<std::size_t>(b)];
    bucket_start[static_cast<std::size_t>(b) + 1] = sum;
  }
  for (std::size_t b = 0; b < n_buckets; ++b) bucket_start[b + 1] += bucket_start[b];
#pragma omp parallel for schedule(static)
  for (std::int64_t b = 0; b < nb; ++b) {
    std::size_t at = bucket_start[static_cast<std::size_t>(b)];
    for (std::size_t p = 0; p < n_piece; ++p) {
      cursor[p * n_buckets + static_cast<std::size_t>(b)] = at;
      at += counts[p * n_buckets + static_cast<std::size_t>(b)];
    }
  }

  resize_with_headroom(scratch, total);
#pragma omp parallel for schedule(dynamic, 4)
  for (std::int64_t p = 0; p < n_pieces; ++p) {
    std::size_t* c = cursor.data() + static_cast<std::size_t>(p) * n_buckets;
    for (std::size_t k = piece_start[static_cast<std::size_t>(p)]; k < piece_start[static_cast<std::size_t>(p) + 1]; ++k)
      for (std::size_t q = 0; q < parts[k].size; ++q) scratch[c[parts[k].data[q].target / width]++] = parts[k].data[q];
  }

#pragma omp parallel
  {
    std::vector<std::size_t> local(width + 1);
    std::vector<std::uint64_t> packed;
#pragma omp for schedule(dynamic, 1)
    for (std::int64_t b = 0; b < nb; ++b) {
      const std::size_t lo = bucket_start[static_cast<std::size_t>(b)], hi = bucket_start[static_cast<std::size_t>(b) + 1];
      const std::size_t t0 = static_cast<std::size_t>(b) * width;
      const std::size_t nt = std::min(width, n_targets - t0);
      std::fill(local.begin(), local.begin() + static_cast<std::ptrdiff_t>(nt) + 1, 0);
      for (std::size_t q = lo; q < hi; ++q) ++local[scratch[q].target - t0 + 1];
      for (std::size_t i = 0; i < nt; ++i) local[i + 1] += local[i];
      for (std::size_t i = 0; i < nt; ++i) offsets[t0 + i] = lo + local[i];
      for (std::size_t q = lo; q < hi; ++q) out[lo + local[scratch[q].target - t0]++] = scratch[q];
      if (canonical)   // each target's run, while the bucket is in cache
        for (std::size_t i = 0; i < nt; ++i) {
          const std::size_t a = offsets[t0 + i], z = i + 1 < nt ? offsets[t0 + i + 1] : hi;
          sort_by_source(out.data() + a, out.data() + z, source_rank, rank_source, packed);
        }
    }
  }
  offsets[n_targets] = total;
}

GroupedTasks group_tasks_by_target(const std::vector<InteractionTask>& tasks,
                                   std::size_t n_leaves) {
  if (tasks.size() >= (std::size_t{1} << 32))
    fail("P2P grouping: {} tasks exceed the 32-bit task index", tasks.size());
  if (n_leaves == 0 && !tasks.empty())
    fail("P2P grouping: task ({}, {}) refers to a leaf beyond the 0 leaves", tasks[0].target, tasks[0].source);
  GroupedTasks out;
  const auto n = static_cast<std::int64_t>(tasks.size());
  // Already grouped (the walk's list): a parallel check and copy instead of the sort.
  bool sorted = true, in_range = true;
#pragma omp parallel for schedule(static) reduction(&& : sorted, in_range)
  for (std::int64_t q = 0; q < n; ++q) {
    const InteractionTask& t = tasks[static_cast<std::size_t>(q)];
    sorted = sorted && (q == 0 || tasks[static_cast<std::size_t>(q) - 1].target <= t.target);
    in_range = in_range && t.target < n_leaves && t.source < n_leaves;
  }
  if (sorted && in_range) {
    out.tasks.resize(tasks.size());
#pragma omp parallel for schedule(static)
    for (std::int64_t q = 0; q < n; ++q) out.tasks[static_cast<std::size_t>(q)] = tasks[static_cast<std::size_t>(q)];
    std::vector<std::size_t> start(n_leaves + 1);
    auto less = [](const InteractionTask& t, std::size_t l) { return t.target < l; };
#pragma omp parallel for schedule(static)
    for (std::int64_t l = 0; l <= static_cast<std::int64_t>(n_leaves); ++l)
      start[static_cast<std::size_t>(l)] = static_cast<std::size_t>(
          std::lower_bound(tasks.begin(), tasks.end(), static_cast<std::size_t>(l), less) - tasks.begin());
    for (std::size_t l = 0; l < n_leaves; ++l)
      if (start[l + 1] > start[l])
        out.groups.push_back({static_cast<std::uint32_t>(l), static_cast<std::uint32_t>(start[l]),
                              static_cast<std::uint32_t>(start[l + 1] - start[l])});
    return out;
  }
  std::vector<std::size_t> offsets;
  std::vector<InteractionTask> scratch;
  group_spans_by_target({TaskSpan{tasks.data(), tasks.size()}}, n_leaves, std::max<std::size_t>(n_leaves, 1),
                        offsets, out.tasks, scratch);
  for (std::size_t l = 0; l < n_leaves; ++l)
    if (offsets[l + 1] > offsets[l])
      out.groups.push_back({static_cast<std::uint32_t>(l), static_cast<std::uint32_t>(offsets[l]),
                            static_cast<std::uint32_t>(offsets[l + 1] - offsets[l])});
  return out;
}

}  // namespace orbis
