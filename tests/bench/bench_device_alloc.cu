// Benchmark of what memory costs to take on this machine: the device pool's growth (the
// step engine's arrays all come from it: gpu/device_buffer.cuh), its reuse once grown,
// cudaMalloc, and page-locked host memory (the engine's staging arrays). It says whether a
// run's start pays for its first allocations (issue #29: the stretch's start on one and two
// GPUs). Each row is the median of --reps runs on a fresh pool of its own.
//
//   bench_device_alloc [--reps=R] [GIB ...]   (default: 5 reps, 1 2 6)
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "core/timer.hpp"
#include "gpu/cuda_check.cuh"

using namespace orbis;

namespace {

constexpr std::size_t kGiB = std::size_t{1} << 30;
constexpr std::size_t kPiece = std::size_t{4} << 20;   // the many-allocations rows' piece

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// A pool as device_pool() configures the device's: it keeps what is freed.
cudaMemPool_t keeping_pool(int device) {
  cudaMemPoolProps props = {};
  props.allocType = cudaMemAllocationTypePinned;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = device;
  cudaMemPool_t pool = nullptr;
  ORBIS_CUDA_CHECK(cudaMemPoolCreate(&pool, &props));
  std::uint64_t keep_all = ~std::uint64_t{0};
  ORBIS_CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep_all));
  return pool;
}

// Seconds to take `bytes` from `pool` in pieces of `piece` bytes (all of them at once if 0),
// queued on `stream` and waited for; the pointers go to `out`.
double take(cudaMemPool_t pool, std::size_t bytes, std::size_t piece, cudaStream_t stream, std::vector<void*>& out) {
  Stopwatch watch;
  const std::size_t step = piece == 0 ? bytes : piece;
  for (std::size_t done = 0; done < bytes; done += step) {
    void* p = nullptr;
    ORBIS_CUDA_CHECK(cudaMallocFromPoolAsync(&p, std::min(step, bytes - done), pool, stream));
    out.push_back(p);
  }
  ORBIS_CUDA_CHECK(cudaStreamSynchronize(stream));
  return watch.seconds();
}

void give(std::vector<void*>& ptrs, cudaStream_t stream) {
  for (void* p : ptrs) ORBIS_CUDA_CHECK(cudaFreeAsync(p, stream));
  ORBIS_CUDA_CHECK(cudaStreamSynchronize(stream));
  ptrs.clear();
}

struct Row {
  std::string what;
  double seconds;
  std::size_t bytes;
};

}  // namespace

int main(int argc, char** argv) {
  int reps = 5;
  std::vector<double> sizes;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--reps=", 7) == 0) reps = std::max(1, std::atoi(argv[i] + 7));
    else sizes.push_back(std::atof(argv[i]));
  }
  if (sizes.empty()) sizes = {1, 2, 6};
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("bench_device_alloc: no CUDA device, nothing to measure\n");
    return 0;
  }
  ORBIS_CUDA_CHECK(cudaSetDevice(0));
  ORBIS_CUDA_CHECK(cudaFree(nullptr));   // the context, outside the timings
  cudaDeviceProp prop{};
  ORBIS_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  cudaStream_t stream = nullptr;
  ORBIS_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

  std::vector<Row> rows;
  for (const double gib : sizes) {
    const auto bytes = static_cast<std::size_t>(gib * static_cast<double>(kGiB));
    std::vector<double> grow_one, grow_many, reuse, trim, plain, pinned;
    for (int r = 0; r < reps; ++r) {
      std::vector<void*> ptrs;
      cudaMemPool_t pool = keeping_pool(0);
      grow_one.push_back(take(pool, bytes, 0, stream, ptrs));
      give(ptrs, stream);
      reuse.push_back(take(pool, bytes, kPiece, stream, ptrs));   // served by what the pool keeps
      give(ptrs, stream);
      Stopwatch watch;
      ORBIS_CUDA_CHECK(cudaMemPoolTrimTo(pool, 0));
      trim.push_back(watch.seconds());
      grow_many.push_back(take(pool, bytes, kPiece, stream, ptrs));
      give(ptrs, stream);
      ORBIS_CUDA_CHECK(cudaMemPoolDestroy(pool));

      watch.restart();
      void* p = nullptr;
      ORBIS_CUDA_CHECK(cudaMalloc(&p, bytes));
      plain.push_back(watch.seconds());
      ORBIS_CUDA_CHECK(cudaFree(p));

      watch.restart();
      ORBIS_CUDA_CHECK(cudaHostAlloc(&p, bytes, cudaHostAllocDefault));
      pinned.push_back(watch.seconds());
      ORBIS_CUDA_CHECK(cudaFreeHost(p));
    }
    rows.push_back({"pool grows, one allocation", median(grow_one), bytes});
    rows.push_back({"pool grows, 4 MiB pieces", median(grow_many), bytes});
    rows.push_back({"grown pool serves 4 MiB pieces", median(reuse), bytes});
    rows.push_back({"pool trimmed to 0", median(trim), bytes});
    rows.push_back({"cudaMalloc", median(plain), bytes});
    rows.push_back({"cudaHostAlloc (page-locked host)", median(pinned), bytes});
  }

  std::printf("%s, medians of %d runs\n\n", prop.name, reps);
  std::printf("| what | GiB | ms | ms per GiB |\n| --- | --- | --- | --- |\n");
  for (const Row& row : rows) {
    const double gib = static_cast<double>(row.bytes) / static_cast<double>(kGiB);
    std::printf("| %s | %.2f | %.2f | %.2f |\n", row.what.c_str(), gib, 1e3 * row.seconds, 1e3 * row.seconds / gib);
  }
  ORBIS_CUDA_CHECK(cudaStreamDestroy(stream));
  return 0;
}
