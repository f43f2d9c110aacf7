// The CUB wrappers of gpu/cub_counts.cuh with their item limit lowered to a few hundred, so
// that the path a run takes beyond 2^31 items (CUB's 64-bit-count kernels; for run-length
// encoding, a refusal) runs here on small inputs: each result against a host reference. And
// the device grouping's refusals of what its 32-bit task positions cannot hold, and the
// schedule of its groups (heaviest first, stable) against a host reference.
// Without a usable GPU the program prints "SKIPPED" and returns 77 (CTest: skipped).
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>

#include "core/error.hpp"
#include "gpu/cub_counts.cuh"
#include "gpu/device_buffer.cuh"
#include "gpu/p2p_cuda_grouping.cuh"
#include "support/gpu_skip.hpp"

using namespace orbis;

namespace {

constexpr std::size_t kLimit = 300;   // items per CUB call in these tests

template <typename T>
void upload(gpu::DeviceArray<T>& d, const std::vector<T>& h) {
  d.ensure(std::max<std::size_t>(h.size(), 1));
  ORBIS_CUDA_CHECK(cudaMemcpy(d.data(), h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice));
}
template <typename T>
std::vector<T> download(const T* d, std::size_t n) {
  std::vector<T> h(n);
  ORBIS_CUDA_CHECK(cudaMemcpy(h.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost));
  return h;
}

std::vector<std::uint32_t> random_values(std::size_t n, std::uint32_t below, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<std::uint32_t> u(0, below - 1);
  std::vector<std::uint32_t> v(n);
  for (auto& x : v) x = u(rng);
  return v;
}

struct Odd {   // a transform iterator's functor, as the tree build scans flags through one
  const std::uint32_t* v;
  __host__ __device__ std::uint32_t operator()(std::size_t i) const { return v[i] & 1u; }
};

}  // namespace

TEST_CASE("exclusive_sum beyond the item limit: the host's prefix sums, out of place, in place, through an iterator") {
  test::require_gpu_or_skip();
  for (const std::size_t n : {std::size_t{1}, kLimit, kLimit + 1, 7 * kLimit + 13, std::size_t{100000}}) {
    CAPTURE(n);
    const auto in = random_values(n, 1000, n);
    std::vector<std::uint32_t> want(n);
    std::exclusive_scan(in.begin(), in.end(), want.begin(), std::uint32_t{0});
    gpu::DeviceArray<std::uint32_t> din, dout;
    upload(din, in);
    dout.ensure(n);
    gpu::DeviceArray<unsigned char> temp;
    temp.ensure(gpu::exclusive_sum_bytes(din.data(), dout.data(), n, kLimit));
    gpu::exclusive_sum(temp.data(), temp.capacity(), din.data(), dout.data(), n, nullptr, kLimit);
    CHECK(download(dout.data(), n) == want);
    gpu::exclusive_sum(temp.data(), temp.capacity(), din.data(), din.data(), n, nullptr, kLimit);   // in place
    CHECK(download(din.data(), n) == want);

    // The odd flags of `in` through a transform iterator (64-bit positions).
    upload(din, in);
    std::vector<std::uint32_t> flags(n), want_flags(n);
    for (std::size_t i = 0; i < n; ++i) flags[i] = in[i] & 1u;
    std::exclusive_scan(flags.begin(), flags.end(), want_flags.begin(), std::uint32_t{0});
    const thrust::transform_iterator<Odd, thrust::counting_iterator<std::size_t>> odd(
        thrust::counting_iterator<std::size_t>(0), Odd{din.data()});
    temp.ensure(gpu::exclusive_sum_bytes(odd, dout.data(), n, kLimit));
    gpu::exclusive_sum(temp.data(), temp.capacity(), odd, dout.data(), n, nullptr, kLimit);
    CHECK(download(dout.data(), n) == want_flags);
  }
}

TEST_CASE("radix sorts beyond the item limit: stable, the host's order") {
  test::require_gpu_or_skip();
  for (const std::size_t n : {kLimit + 1, std::size_t{50000}}) {
    CAPTURE(n);
    const auto keys = random_values(n, 97, 3 * n);   // many equal keys: stability shows
    std::vector<std::uint32_t> values(n);
    std::iota(values.begin(), values.end(), 0u);
    std::vector<std::uint32_t> order(values);
    std::stable_sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) { return keys[a] < keys[b]; });
    std::vector<std::uint32_t> want_keys(n);
    for (std::size_t i = 0; i < n; ++i) want_keys[i] = keys[order[i]];

    // Double-buffer form.
    gpu::DeviceArray<std::uint32_t> k[2], v[2];
    upload(k[0], keys);
    upload(v[0], values);
    k[1].ensure(n);
    v[1].ensure(n);
    gpu::DeviceArray<unsigned char> temp;
    temp.ensure(gpu::radix_sort_pairs_bytes<std::uint32_t, std::uint32_t>(n, 0, 7, kLimit));
    cub::DoubleBuffer<std::uint32_t> kb(k[0].data(), k[1].data()), vb(v[0].data(), v[1].data());
    gpu::radix_sort_pairs(temp.data(), temp.capacity(), kb, vb, n, 0, 7, nullptr, kLimit);
    CHECK(download(kb.Current(), n) == want_keys);
    CHECK(download(vb.Current(), n) == order);

    // Copy form (inputs left as they are).
    upload(k[0], keys);
    upload(v[0], values);
    temp.ensure(gpu::radix_sort_pairs_copy_bytes<std::uint32_t, std::uint32_t>(n, 0, 7, kLimit));
    gpu::radix_sort_pairs_copy(temp.data(), temp.capacity(), static_cast<const std::uint32_t*>(k[0].data()),
                               k[1].data(), static_cast<const std::uint32_t*>(v[0].data()), v[1].data(), n, 0, 7,
                               nullptr, kLimit);
    CHECK(download(k[1].data(), n) == want_keys);
    CHECK(download(v[1].data(), n) == order);
    CHECK(download(k[0].data(), n) == keys);
  }
}

TEST_CASE("run-length encoding: the host's runs up to the item limit, a clear refusal beyond it") {
  test::require_gpu_or_skip();
  auto keys = random_values(kLimit, 20, 5);
  std::sort(keys.begin(), keys.end());
  std::vector<std::uint32_t> want_unique, want_counts;
  for (std::uint32_t key : keys) {
    if (want_unique.empty() || want_unique.back() != key) {
      want_unique.push_back(key);
      want_counts.push_back(0);
    }
    ++want_counts.back();
  }
  gpu::DeviceArray<std::uint32_t> in, unique, counts, n_runs;
  upload(in, keys);
  unique.ensure(kLimit);
  counts.ensure(kLimit);
  n_runs.ensure(1);
  gpu::DeviceArray<unsigned char> temp;
  const std::uint32_t* cin = in.data();
  temp.ensure(gpu::run_length_encode_bytes(cin, unique.data(), counts.data(), n_runs.data(), kLimit, kLimit));
  gpu::run_length_encode(temp.data(), temp.capacity(), cin, unique.data(), counts.data(), n_runs.data(), kLimit,
                         nullptr, kLimit);
  const std::uint32_t runs = download(n_runs.data(), 1)[0];
  REQUIRE(runs == want_unique.size());
  CHECK(download(unique.data(), runs) == want_unique);
  CHECK(download(counts.data(), runs) == want_counts);

  std::string message;
  try {
    gpu::run_length_encode(temp.data(), temp.capacity(), cin, unique.data(), counts.data(), n_runs.data(),
                           kLimit + 1, nullptr, kLimit);
  } catch (const Error& e) {
    message = e.what();
  }
  CAPTURE(message);
  CHECK(message.find("301 items") != std::string::npos);
  CHECK(message.find("300") != std::string::npos);
}

TEST_CASE("the device grouping refuses more tasks than its 32-bit positions hold, and upload arrays it did not size") {
  test::require_gpu_or_skip();
  gpu::DeviceGrouping grouping;
  std::string message;
  try {   // refused before anything is allocated
    grouping.run(nullptr, 1000, gpu::DeviceGrouping::kMaxTasks + 1, 64);
  } catch (const Error& e) {
    message = e.what();
  }
  CAPTURE(message);
  CHECK(message.find("2147483648 tasks") != std::string::npos);
  CHECK(message.find("chunks") != std::string::npos);

  message.clear();
  grouping.upload_targets(10);   // room for 10 tasks, run for 20: the data would be lost
  grouping.upload_sources(10);
  try {
    grouping.run(nullptr, 10, 20, 64);
  } catch (const Error& e) {
    message = e.what();
  }
  CAPTURE(message);
  CHECK(message.find("upload_targets() and upload_sources() size them") != std::string::npos);
}

TEST_CASE("the group schedule: every group once, heaviest power-of-two class first, target order within a class") {
  test::require_gpu_or_skip();
  // Task counts from 1 to ~5000 (classes of powers of two), and room for more groups than
  // there are: only the first n_groups count.
  const std::size_t n_groups = 1000, room = 1300;
  const std::vector<std::uint32_t> counts = random_values(room, 5000, 11);
  std::vector<GroupIdx> groups(room);
  for (std::size_t g = 0; g < room; ++g)
    groups[g] = GroupIdx{static_cast<std::uint32_t>(3 * g), static_cast<std::uint32_t>(7 * g), counts[g] + 1};
  auto size_class = [](std::uint32_t count) {   // bit width: larger first
    int w = 0;
    while (count >> w) ++w;
    return w;
  };
  std::vector<GroupIdx> want(groups.begin(), groups.begin() + n_groups);
  std::stable_sort(want.begin(), want.end(),
                   [&](const GroupIdx& a, const GroupIdx& b) { return size_class(a.count) > size_class(b.count); });

  gpu::DeviceArray<GroupIdx> d_groups;
  upload(d_groups, groups);
  gpu::DeviceArray<std::uint32_t> d_n;
  upload(d_n, std::vector<std::uint32_t>{static_cast<std::uint32_t>(n_groups)});
  gpu::GroupSchedule schedule;
  const std::size_t growth = schedule.growth_bytes(room);
  const GroupIdx* ordered = schedule.run(d_groups.data(), d_n.data(), room, nullptr);
  ORBIS_CUDA_CHECK(cudaDeviceSynchronize());
  CHECK(schedule.held_bytes() == growth);   // what it said it would take
  const std::vector<GroupIdx> got = download(ordered, n_groups);
  bool same = true;
  for (std::size_t g = 0; g < n_groups; ++g)
    same = same && got[g].i_leaf == want[g].i_leaf && got[g].start == want[g].start && got[g].count == want[g].count;
  CHECK(same);
  CHECK(size_class(got.front().count) == 13);   // 4097..5000 tasks exist among 1000 draws
  schedule.release();
  CHECK(schedule.held_bytes() == 0);
}
