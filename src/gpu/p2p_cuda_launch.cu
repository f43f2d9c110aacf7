#include "gpu/p2p_cuda_launch.cuh"

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/error.hpp"
#include "fmm/p2p_prepare.hpp"
#include "fmm/truncation.hpp"
#include "gpu/cuda_check.cuh"

namespace orbis::gpu {
namespace {

template <typename R, bool Coef>
const void* kernel_for(int order) {
  switch (order) {
    case kNoTruncation: return reinterpret_cast<const void*>(&p2p_groups_kernel<kNoTruncation, R, Coef>);
    case kExactTruncation: return reinterpret_cast<const void*>(&p2p_groups_kernel<kExactTruncation, R, Coef>);
    case 0: return reinterpret_cast<const void*>(&p2p_groups_kernel<0, R, Coef>);
    case 1: return reinterpret_cast<const void*>(&p2p_groups_kernel<1, R, Coef>);
    case 2: return reinterpret_cast<const void*>(&p2p_groups_kernel<2, R, Coef>);
    case 3: return reinterpret_cast<const void*>(&p2p_groups_kernel<3, R, Coef>);
    case 4: return reinterpret_cast<const void*>(&p2p_groups_kernel<4, R, Coef>);
    default: fail("P2P: taylor_order = {} is not in -1..4", order);
  }
}

// leaf_relative_positions (fmm/p2p_prepare.hpp) on the device: one warp per leaf, the same
// double arithmetic, rounded to R once.
template <typename R>
__global__ void leaf_relative_kernel(const double* x, const double* y, const double* z, const DeviceLeaf* leaves,
                                     std::size_t n_leaves, std::size_t n, double scale, R* out) {
  const std::size_t warp = (blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x) / 32;
  if (warp >= n_leaves) return;
  const DeviceLeaf leaf = leaves[warp];
  for (std::uint32_t p = leaf.first + threadIdx.x % 32; p < leaf.first + leaf.count; p += 32) {
    out[p] = static_cast<R>((x[p] - leaf.cx) * scale);
    out[n + p] = static_cast<R>((y[p] - leaf.cy) * scale);
    out[2 * n + p] = static_cast<R>((z[p] - leaf.cz) * scale);
  }
}

// Integer sums: exact in any order.
__device__ __forceinline__ unsigned long long leaf_targets(const DeviceLeaf& leaf, const std::uint32_t* prefix) {
  return prefix ? prefix[leaf.first + leaf.count] - prefix[leaf.first] : leaf.count;
}

__global__ void count_pairs_kernel(const std::uint32_t* targets, const std::uint32_t* sources, std::size_t entries,
                                   const DeviceLeaf* leaves, const std::uint32_t* prefix, unsigned long long* pairs) {
  unsigned long long sum = 0;
  for (std::size_t e = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; e < entries;
       e += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const DeviceLeaf lt = leaves[targets[e] & ~kMutualBit], ls = leaves[packed_leaf(sources[e])];
    sum += leaf_targets(lt, prefix) * ls.count;
    if (targets[e] & kMutualBit) sum += leaf_targets(ls, prefix) * lt.count;
  }
  for (int o = 16; o > 0; o /= 2) sum += __shfl_down_sync(0xffffffffu, sum, o);
  if (threadIdx.x % 32 == 0 && sum > 0) atomicAdd(pairs, sum);
}

}  // namespace

template <typename R>
void device_leaf_relative_positions(const double* x, const double* y, const double* z, const DeviceLeaf* leaves,
                                    std::size_t n_leaves, std::size_t n, double scale, R* rel, cudaStream_t stream) {
  if (n_leaves == 0) return;
  const auto grid = static_cast<unsigned>((32 * n_leaves + 255) / 256);
  leaf_relative_kernel<R><<<grid, 256, 0, stream>>>(x, y, z, leaves, n_leaves, n, scale, rel);
  ORBIS_CUDA_CHECK(cudaGetLastError());
}
template void device_leaf_relative_positions<float>(const double*, const double*, const double*, const DeviceLeaf*,
                                                    std::size_t, std::size_t, double, float*, cudaStream_t);
template void device_leaf_relative_positions<double>(const double*, const double*, const double*, const DeviceLeaf*,
                                                     std::size_t, std::size_t, double, double*, cudaStream_t);

void P2PKernelRunner::count_pairs(const std::uint32_t* targets, const std::uint32_t* sources, std::size_t entries,
                                  const DeviceLeaf* leaves, const std::uint32_t* active_prefix, unsigned long long* pairs,
                                  cudaStream_t stream) {
  ORBIS_CUDA_CHECK(cudaMemsetAsync(pairs, 0, sizeof(unsigned long long), stream));
  if (entries == 0) return;
  const auto grid = static_cast<unsigned>(std::min<std::size_t>((entries + 255) / 256, 65535u * 4u));
  count_pairs_kernel<<<grid, 256, 0, stream>>>(targets, sources, entries, leaves, active_prefix, pairs);
  ORBIS_CUDA_CHECK(cudaGetLastError());
}

P2PKernelRunner::P2PKernelRunner(int device) {
  cudaDeviceProp prop{};
  ORBIS_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  sm_count_ = prop.multiProcessorCount;
  smem_optin_ = prop.sharedMemPerBlockOptin;
  next_group_.ensure(1);
}

void P2PKernelRunner::prepare(const P2PSettings& s) {
  if (s.kernel == KernelKind::truncated && (s.taylor_order < -1 || s.taylor_order > 4))
    fail("P2P: taylor_order = {} is not in -1..4", s.taylor_order);
  if (p2p_order_of(s) >= 0 && s.table_size < 2) fail("P2P: a T(x) table needs >= 2 nodes, not {}", s.table_size);
  settings_ = s;
  if (s.double_precision) prepare_as<double>();
  else prepare_as<float>();
  prepared_ = true;
}

template <typename R>
void P2PKernelRunner::prepare_as() {
  using R4 = typename Vec4Of<R>::type;
  const P2PSettings& s = settings_;
  const int order = p2p_order_of(s);   // the Taylor order, or -1 / -2 (no table)
  const bool coef = order >= 0;        // the coefficient form (fewer instructions per pair)
  table_bytes_ = coef ? table_smem_bytes<R>(s.table_size, true, order) : 0;
  kernel_ = coef ? kernel_for<R, true>(order) : kernel_for<R, false>(order);
  cudaFuncAttributes attr{};
  ORBIS_CUDA_CHECK(cudaFuncGetAttributes(&attr, kernel_));
  if (attr.sharedSizeBytes + table_bytes_ > smem_optin_)
    fail("P2P: a T(x) table of {} nodes ({} KB) does not fit in the GPU's shared memory next to the kernel's {} KB "
         "(at most {} KB); lower [gravity] taylor_table_size",
         s.table_size, table_bytes_ / 1024, attr.sharedSizeBytes / 1024, smem_optin_ / 1024);
  if (table_bytes_ > 48 * 1024)
    ORBIS_CUDA_CHECK(cudaFuncSetAttribute(kernel_, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          static_cast<int>(table_bytes_)));
  ORBIS_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm_, kernel_, kBlock, table_bytes_));
  if (per_sm_ < 1) fail("P2P: the kernel cannot run on this GPU (no resident block fits)");
  // Individual masses: the Newtonian kernel's Weighted form (no table: no dynamic shared memory).
  weighted_kernel_ = nullptr;
  weighted_per_sm_ = 0;
  if (order == kNoTruncation) {
    weighted_kernel_ = reinterpret_cast<const void*>(&p2p_groups_kernel<kNoTruncation, R, false, true>);
    ORBIS_CUDA_CHECK(
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&weighted_per_sm_, weighted_kernel_, kBlock, table_bytes_));
    if (weighted_per_sm_ < 1) fail("P2P: the weighted kernel cannot run on this GPU (no resident block fits)");
  }
  const P2PPairConstants<R> k = pair_constants_of<R>(s);
  static_assert(sizeof(k) <= sizeof(constants_), "pair constants fit");
  std::memcpy(constants_, &k, sizeof(k));
  length_scale_ = k.length_scale;
  const bool is_double = std::is_same_v<R, double>;
  if (coef && (table_size_ != s.table_size || table_double_ != is_double)) {
    const TruncationTable<R> table(s.table_size);   // built in double, rounded to R once
    std::vector<R4> c(static_cast<std::size_t>(s.table_size));
    for (int i = 0; i < s.table_size; ++i)
      c[static_cast<std::size_t>(i)] = R4{table.coef(0)[i], table.coef(1)[i], table.coef(2)[i], table.coef(3)[i]};
    coef_.ensure(c.size() * sizeof(R4));
    coef4_.ensure(c.size() * sizeof(R));
    ORBIS_CUDA_CHECK(cudaMemcpy(coef_.data(), c.data(), c.size() * sizeof(R4), cudaMemcpyHostToDevice));
    ORBIS_CUDA_CHECK(cudaMemcpy(coef4_.data(), table.coef(4).data(), c.size() * sizeof(R), cudaMemcpyHostToDevice));
    table_size_ = s.table_size;
    table_double_ = is_double;
  }
}

void P2PKernelRunner::relative_positions(const double* x, const double* y, const double* z, const DeviceLeaf* leaves,
                                         std::size_t n_leaves, std::size_t n, void* rel, cudaStream_t stream) const {
  if (!prepared_) fail("P2PKernelRunner: relative_positions() before prepare()");
  if (double_precision())
    device_leaf_relative_positions(x, y, z, leaves, n_leaves, n, length_scale_, static_cast<double*>(rel), stream);
  else
    device_leaf_relative_positions(x, y, z, leaves, n_leaves, n, length_scale_, static_cast<float*>(rel), stream);
}

void P2PKernelRunner::launch(const P2PLaunch& in, cudaStream_t stream) const {
  if (!prepared_) fail("P2PKernelRunner: launch() before prepare()");
  if (double_precision()) launch_as<double>(in, stream);
  else launch_as<float>(in, stream);
}

template <typename R>
void P2PKernelRunner::launch_as(const P2PLaunch& in, cudaStream_t stream) const {
  if (in.n_tasks == 0) return;
  ORBIS_CUDA_CHECK(cudaMemsetAsync(next_group_.data(), 0, sizeof(std::uint32_t), stream));
  P2PKernelArgs<R> a;
  a.groups = in.groups;
  a.n_groups = in.n_groups;
  a.sources = in.sources;
  a.leaves = in.leaves;
  const R* rel = static_cast<const R*>(in.rel);
  a.x = rel;
  a.y = rel + in.n;
  a.z = rel + 2 * in.n;
  a.table = nullptr;
  a.coef = reinterpret_cast<const typename Vec4Of<R>::type*>(coef_.data());
  a.coef4 = reinterpret_cast<const R*>(coef4_.data());
  a.table_size = p2p_order_of(settings_) >= 0 ? settings_.table_size : 0;   // the exact path (and T = 1) stage no table
  std::memcpy(&a.k, constants_, sizeof(a.k));
  a.box = settings_.box_mpc_h;
  a.acc = in.acc;
  a.next_group = next_group_.data();
  a.counters = nullptr;
  a.active_prefix = in.active_prefix;
  a.weights = in.weights;
  if (in.weights && !weighted_kernel_)
    fail("P2P on the GPU: individual masses (weights) need the Newtonian kernel (vacuum boundaries); the periodic "
         "kernels assume one mass");
  const void* kernel = in.weights ? weighted_kernel_ : kernel_;
  const int per_sm = in.weights ? weighted_per_sm_ : per_sm_;
  // Persistent blocks: as many as fit at once, never more than there can be groups.
  const std::size_t grid = std::max<std::size_t>(
      1, std::min(std::min(in.n_leaves, in.n_tasks), static_cast<std::size_t>(per_sm) * sm_count_));
  void* args[] = {&a};
  ORBIS_CUDA_CHECK(cudaLaunchKernel(kernel, dim3(static_cast<unsigned>(grid)), dim3(kBlock), args, table_bytes_,
                                    stream));
}

}  // namespace orbis::gpu
