// The device all-to-all between ranks (gpu/device_alltoallv.cuh): CUDA IPC and the staged
// path against an independent reference, the pieces every rank knows it should receive
// (each element's bytes a function of sender, receiver and index), bit for bit. Counts are
// drawn at random from one seed on every rank: zero counts, a rank that sends nothing, a
// round where nobody sends, element sizes of 24 (the ghosts) and 40 bytes, and rounds large
// enough that the exported buffers grow (reallocated and re-exported between calls, the
// peers remapping them), with the send side packed into the IPC buffer itself or copied
// from the caller's memory, and the callers' buffers themselves reallocated each round. Two
// IPC exchanges live side by side (the ghosts' and the PM's in the engine), and one is made
// and destroyed while the other stays (its mappings closed before the buffer is freed).
// On one node with the ranks sharing one GPU (the CI's and the device machine's case) auto
// must choose IPC. The IPC exchange's pull (the receivers copying pitched rows out of every
// rank's exported buffer, buffers of different sizes, growing) against the bytes each buffer
// was filled with, and a pull past a buffer's end an error on every rank. Returns 77 (skipped) unless every rank has a usable GPU.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include <cuda_runtime.h>

#include "core/comm.hpp"
#include "core/error.hpp"
#include "gpu/cuda_check.cuh"
#include "gpu/device_alltoallv.cuh"
#include "support/gpu_ranks.hpp"

using orbis::Comm;
using namespace orbis::gpu;

namespace {

// Element k of what rank s sends to rank r, byte b: distinct for every (s, r, k, b).
unsigned char byte_of(int s, int r, std::size_t k, std::size_t b) {
  const std::uint64_t h = (static_cast<std::uint64_t>(s) * 1000003u + static_cast<std::uint64_t>(r) * 7919u + k) *
                              2654435761u + b * 97u;
  return static_cast<unsigned char>(h ^ (h >> 13) ^ (h >> 29));
}

struct Round {
  std::size_t element;
  std::vector<std::vector<std::size_t>> counts;   // [sender][receiver]
  bool pack_in_place;                             // IPC: the caller fills send_buffer()
};

// The same round on every rank (one seed).
Round make_round(int round, int ranks) {
  std::mt19937_64 rng(1234 + static_cast<unsigned>(round));
  Round out;
  out.element = round % 2 ? 40 : 24;
  out.pack_in_place = round % 3 == 1;
  const std::size_t scale = round == 4 || round == 9 ? 200000 : (round == 6 ? 0 : 3000);
  out.counts.assign(static_cast<std::size_t>(ranks), std::vector<std::size_t>(static_cast<std::size_t>(ranks), 0));
  for (int s = 0; s < ranks; ++s)
    for (int r = 0; r < ranks; ++r) {
      const std::uint64_t draw = rng();
      std::size_t c = scale == 0 ? 0 : draw % (scale + 1);
      if (draw % 5 == 0) c = 0;                        // zero counts
      if (round % 4 == 2 && s == round % ranks) c = 0;   // a rank that sends nothing
      out.counts[static_cast<std::size_t>(s)][static_cast<std::size_t>(r)] = c;
    }
  return out;
}

// One exchange of round `round` through `x`; returns what arrived (bytes, on the host).
std::vector<unsigned char> run_round(DeviceAlltoallv& x, const Round& round, const Comm& world, cudaStream_t stream) {
  const int me = world.rank(), ranks = world.size();
  std::vector<std::size_t> send_counts(static_cast<std::size_t>(ranks)), recv_counts(static_cast<std::size_t>(ranks));
  for (int r = 0; r < ranks; ++r) {
    send_counts[static_cast<std::size_t>(r)] = round.counts[static_cast<std::size_t>(me)][static_cast<std::size_t>(r)];
    recv_counts[static_cast<std::size_t>(r)] = round.counts[static_cast<std::size_t>(r)][static_cast<std::size_t>(me)];
  }
  std::vector<unsigned char> host;
  for (int r = 0; r < ranks; ++r)
    for (std::size_t k = 0; k < send_counts[static_cast<std::size_t>(r)]; ++k)
      for (std::size_t b = 0; b < round.element; ++b) host.push_back(byte_of(me, r, k, b));
  const std::size_t recv_bytes = Comm::total(recv_counts) * round.element;
  // The caller's buffers, new each round (+1: never a null pointer).
  void* own_send = nullptr;
  void* recv = nullptr;
  ORBIS_CUDA_CHECK(cudaMalloc(&own_send, host.size() + 1));
  ORBIS_CUDA_CHECK(cudaMalloc(&recv, recv_bytes + 1));
  // On the exchange's stream: a non-blocking stream does not wait for the legacy default
  // stream, so a plain cudaMemset could land after (or under) the exchange's writes.
  ORBIS_CUDA_CHECK(cudaMemsetAsync(recv, 0xab, recv_bytes + 1, stream));
  void* send = x.send_buffer(host.size());   // collective
  if (!round.pack_in_place || !send) send = own_send;
  // On the exchange's stream too: a cudaMemcpy from pageable memory may return before its DMA
  // ends, and the non-blocking stream would not wait for it.
  if (!host.empty()) {
    ORBIS_CUDA_CHECK(cudaMemcpyAsync(send, host.data(), host.size(), cudaMemcpyHostToDevice, stream));
    ORBIS_CUDA_CHECK(cudaStreamSynchronize(stream));
  }
  x.exchange(send, send_counts, recv, recv_counts, round.element, stream);
  std::vector<unsigned char> got(recv_bytes + 1);
  ORBIS_CUDA_CHECK(cudaMemcpyAsync(got.data(), recv, got.size(), cudaMemcpyDeviceToHost, stream));
  ORBIS_CUDA_CHECK(cudaStreamSynchronize(stream));
  CHECK(got.back() == 0xab);   // nothing written past the pieces
  got.pop_back();
  ORBIS_CUDA_CHECK(cudaFree(own_send));
  ORBIS_CUDA_CHECK(cudaFree(recv));
  return got;
}

std::vector<unsigned char> expected_of(const Round& round, int me, int ranks) {
  std::vector<unsigned char> out;
  for (int s = 0; s < ranks; ++s)
    for (std::size_t k = 0; k < round.counts[static_cast<std::size_t>(s)][static_cast<std::size_t>(me)]; ++k)
      for (std::size_t b = 0; b < round.element; ++b) out.push_back(byte_of(s, me, k, b));
  return out;
}

// Byte b of rank s's exported buffer in pull round `round`.
unsigned char buffer_byte(int s, int round, std::size_t b) { return byte_of(s, 1000 + round, b, 3); }

}  // namespace

TEST_CASE("device alltoallv: CUDA IPC and staged deliver every piece, bit for bit, through buffer growth") {
  const Comm world = Comm::world();
  const int device = orbis::test::rank_gpu_or_skip(world);
  ORBIS_CUDA_CHECK(cudaSetDevice(device));
  cudaStream_t stream = nullptr;
  ORBIS_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  {
    // auto on one node: IPC (unless the environment forces staged).
    const std::unique_ptr<DeviceAlltoallv> chosen = make_device_alltoallv(world, RankExchange::automatic, "test");
    if (rank_exchange() != RankExchange::staged) CHECK(chosen->peer_to_peer());
    std::unique_ptr<DeviceAlltoallv> ipc = make_device_alltoallv(world, RankExchange::ipc, "test");
    REQUIRE(ipc->peer_to_peer());
    StagedAlltoallv staged(world);
    auto* raw = dynamic_cast<IpcAlltoallv*>(ipc.get());
    REQUIRE(raw != nullptr);
    int mismatched_ipc = 0, mismatched_staged = 0;
    for (int r = 0; r < 12; ++r) {
      const Round round = make_round(r, world.size());
      INFO(world.size() << " ranks, round " << r << ", element " << round.element);
      const std::uint64_t generation = raw->generation();
      const std::vector<unsigned char> want = expected_of(round, world.rank(), world.size());
      const std::vector<unsigned char> by_ipc = run_round(*ipc, round, world, stream);
      const std::vector<unsigned char> by_staged = run_round(staged, round, world, stream);
      // The other IPC exchange, alive beside the first, on the same round.
      const std::vector<unsigned char> by_chosen = run_round(*chosen, round, world, stream);
      CHECK(by_ipc.size() == want.size());
      mismatched_ipc += by_ipc != want;
      mismatched_staged += by_staged != want;
      CHECK(by_ipc == want);
      CHECK(by_staged == want);
      CHECK(by_chosen == want);
      CHECK(by_ipc == by_staged);
      // The large rounds outgrow the buffers (1 MiB at first) of the ranks that send much.
      if (r == 4) CHECK(world.any(raw->generation() > generation));
      // A third exchange made and destroyed while the others stay mapped.
      if (r == 7) {
        std::unique_ptr<DeviceAlltoallv> brief = make_device_alltoallv(world, RankExchange::ipc, "test");
        CHECK(run_round(*brief, round, world, stream) == want);
      }
    }
    CHECK(world.sum(mismatched_ipc) == 0);
    CHECK(world.sum(mismatched_staged) == 0);
    const ExchangeTimes& t = ipc->times();
    CHECK(t.calls >= 12);
    MESSAGE(world.size() << " ranks: " << ipc->describe() << "; IPC times fill " << t.fill << " s, peer " << t.peer
                         << " s, mpi " << t.mpi << " s; staged down " << staged.times().down << " s, mpi "
                         << staged.times().mpi << " s");
  }   // destroyed collectively, before MPI_Finalize
  ORBIS_CUDA_CHECK(cudaStreamDestroy(stream));
}

TEST_CASE("device alltoallv: pull copies pitched rows out of every rank's exported buffer, bit for bit") {
  const Comm world = Comm::world();
  const int device = orbis::test::rank_gpu_or_skip(world);
  ORBIS_CUDA_CHECK(cudaSetDevice(device));
  cudaStream_t stream = nullptr;
  ORBIS_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const int me = world.rank(), ranks = world.size();
  {
    std::unique_ptr<DeviceAlltoallv> ipc = make_device_alltoallv(world, RankExchange::ipc, "test");
    REQUIRE(ipc->peer_to_peer());
    int mismatched = 0;
    for (int round = 0; round < 4; ++round) {
      // Buffers of different sizes on the ranks, growing past the first 1 MiB in round 2.
      std::vector<std::size_t> sizes(static_cast<std::size_t>(ranks));
      for (int s = 0; s < ranks; ++s)
        sizes[static_cast<std::size_t>(s)] = (round == 2 ? 3000000 : 40000) + 1231 * static_cast<std::size_t>(s + round);
      const std::size_t mine = sizes[static_cast<std::size_t>(me)];
      std::vector<unsigned char> fill(mine);
      for (std::size_t b = 0; b < mine; ++b) fill[b] = buffer_byte(me, round, b);
      auto* out = static_cast<unsigned char*>(ipc->send_buffer(mine));   // collective
      ORBIS_CUDA_CHECK(cudaMemcpyAsync(out, fill.data(), mine, cudaMemcpyHostToDevice, stream));
      // Pulls drawn alike on every rank from one seed, different for each receiver: from every
      // rank (this one too), odd widths and pitches, a pull of no rows, rows up to a buffer's end.
      std::mt19937_64 rng(777 + static_cast<unsigned>(round * 131 + me));
      std::vector<PeerPull> pulls;
      std::size_t at = 0;
      for (int s = 0; s < ranks; ++s)
        for (int k = 0; k < 3; ++k) {
          const std::size_t size = sizes[static_cast<std::size_t>(s)];
          PeerPull q;
          q.rank = s;
          q.width = 1 + rng() % 700;
          q.from_pitch = q.width + rng() % 50;
          q.rows = k == 1 ? 0 : 1 + rng() % 40;
          const std::size_t span = q.rows == 0 ? 0 : (q.rows - 1) * q.from_pitch + q.width;
          q.from = k == 2 ? size - span : rng() % (size - span + 1);
          q.to = at;
          q.to_pitch = q.width + rng() % 9;
          at += q.rows * q.to_pitch + 16;
          pulls.push_back(q);
        }
      unsigned char* recv = nullptr;
      ORBIS_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&recv), at));
      ORBIS_CUDA_CHECK(cudaMemsetAsync(recv, 0xab, at, stream));
      ipc->pull(pulls, recv, stream);
      std::vector<unsigned char> got(at), want(at, 0xab);
      ORBIS_CUDA_CHECK(cudaMemcpyAsync(got.data(), recv, at, cudaMemcpyDeviceToHost, stream));
      ORBIS_CUDA_CHECK(cudaStreamSynchronize(stream));
      ORBIS_CUDA_CHECK(cudaFree(recv));
      for (const PeerPull& q : pulls)
        for (std::size_t row = 0; row < q.rows; ++row)
          for (std::size_t b = 0; b < q.width; ++b)
            want[q.to + row * q.to_pitch + b] = buffer_byte(q.rank, round, q.from + row * q.from_pitch + b);
      INFO(ranks << " ranks, round " << round);
      CHECK(got == want);
      mismatched += got != want;
    }
    CHECK(world.sum(mismatched) == 0);
    // A pull past its sender's buffer (asked on the last rank only) fails on every rank.
    const std::size_t size = 5000;
    ipc->send_buffer(size);
    std::vector<PeerPull> pulls(1);
    pulls[0].rank = 0;
    pulls[0].width = me == ranks - 1 ? 2 * ipc->device_bytes() : 8;
    pulls[0].rows = 1;
    unsigned char* recv = nullptr;
    ORBIS_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&recv), 8));
    CHECK_THROWS_AS(ipc->pull(pulls, recv, stream), orbis::Error);
    ORBIS_CUDA_CHECK(cudaFree(recv));
    // The staged exchange has no buffers to pull from.
    StagedAlltoallv staged(world);
    CHECK_THROWS_AS(staged.pull({}, nullptr, stream), orbis::Error);
  }   // destroyed collectively, before MPI_Finalize
  ORBIS_CUDA_CHECK(cudaStreamDestroy(stream));
}
