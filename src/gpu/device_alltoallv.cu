#include "gpu/device_alltoallv.cuh"

#include <cstdlib>
#include <cstring>
#include <exception>

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/log.hpp"
#include "core/timer.hpp"
#include "gpu/copy_2d.cuh"
#include "gpu/cuda_check.cuh"

namespace orbis::gpu {
namespace {

// The process-wide mode; -1 (not set) or auto: the environment's, else auto.
int g_mode = -1;

std::string cuda_message(cudaError_t status) {
  return fmt::format("{} ({})", cudaGetErrorName(status), cudaGetErrorString(status));
}

// Exclusive prefix sums of counts times element, in bytes.
std::vector<std::uint64_t> byte_offsets(const std::vector<std::size_t>& counts, std::size_t element) {
  std::vector<std::uint64_t> out(counts.size());
  std::uint64_t at = 0;
  for (std::size_t r = 0; r < counts.size(); ++r) {
    out[r] = at;
    at += static_cast<std::uint64_t>(counts[r]) * element;
  }
  return out;
}

void check_counts(const Comm& comm, const std::vector<std::size_t>& send_counts,
                  const std::vector<std::size_t>& recv_counts) {
  const auto p = static_cast<std::size_t>(comm.size());
  if (send_counts.size() != p || recv_counts.size() != p)
    fail("internal: a device alltoallv over {} ranks given {} send and {} receive counts", p, send_counts.size(),
         recv_counts.size());
}

// One rank alone: its own piece, device to device.
void copy_own(const void* send, void* recv, std::size_t bytes, cudaStream_t stream) {
  if (bytes > 0) ORBIS_CUDA_CHECK(cudaMemcpyAsync(recv, send, bytes, cudaMemcpyDeviceToDevice, stream));
}

// Why this rank cannot map every other rank's device memory ("" when it can).
// Collective: every rank takes part in the one allgather, whatever fails before it.
std::string peer_problem(const Comm& comm) {
  int device = 0;
  cudaDeviceProp prop{};
  cudaError_t status = cudaGetDevice(&device);
  if (status == cudaSuccess) status = cudaGetDeviceProperties(&prop, device);
  const std::vector<cudaUUID_t> uuids = comm.allgather(prop.uuid);
  if (status != cudaSuccess) return "cudaGetDevice or cudaGetDeviceProperties failed: " + cuda_message(status);
  int count = 0;
  status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) return "cudaGetDeviceCount failed: " + cuda_message(status);
  for (int r = 0; r < comm.size(); ++r) {
    const cudaUUID_t& theirs = uuids[static_cast<std::size_t>(r)];
    if (std::memcmp(theirs.bytes, prop.uuid.bytes, sizeof(theirs.bytes)) == 0) continue;   // the same GPU
    int local = -1;   // rank r's device among the ones this process sees
    for (int d = 0; d < count && local < 0; ++d) {
      cudaDeviceProp other{};
      if (cudaGetDeviceProperties(&other, d) == cudaSuccess &&
          std::memcmp(other.uuid.bytes, theirs.bytes, sizeof(theirs.bytes)) == 0)
        local = d;
    }
    if (local < 0) return fmt::format("rank {}'s GPU is not visible to rank {} (CUDA_VISIBLE_DEVICES)", r, comm.rank());
    int can = 0;
    status = cudaDeviceCanAccessPeer(&can, device, local);
    if (status != cudaSuccess) return "cudaDeviceCanAccessPeer failed: " + cuda_message(status);
    if (!can) return fmt::format("rank {}'s device {} cannot access rank {}'s device {} as a peer", comm.rank(), device, r, local);
  }
  return std::string();
}

}  // namespace

RankExchange parse_rank_exchange(const std::string& word, const std::string& where) {
  if (word == "auto") return RankExchange::automatic;
  if (word == "staged") return RankExchange::staged;
  if (word == "ipc") return RankExchange::ipc;
  fail("{} = \"{}\": expected \"auto\", \"staged\" or \"ipc\"", where, word);
}

const char* rank_exchange_name(RankExchange mode) {
  switch (mode) {
    case RankExchange::staged: return "staged";
    case RankExchange::ipc: return "ipc";
    default: return "auto";
  }
}

void set_rank_exchange(RankExchange mode) { g_mode = static_cast<int>(mode); }

RankExchange rank_exchange() {
  if (g_mode > 0) return static_cast<RankExchange>(g_mode);   // staged or ipc, as set
  const char* env = std::getenv("ORBIS_RANK_EXCHANGE");
  if (env && *env) return parse_rank_exchange(env, "the environment's ORBIS_RANK_EXCHANGE");
  return RankExchange::automatic;
}

// ------------------------------------------------------------------ staged

StagedAlltoallv::StagedAlltoallv(const Comm& comm) : comm_(comm) {}

StagedAlltoallv::~StagedAlltoallv() {
  // A copy up may still read host_recv_; no throw from a destructor.
  if (host_send_ || host_recv_) cudaDeviceSynchronize();
  if (host_send_) cudaFreeHost(host_send_);
  if (host_recv_) cudaFreeHost(host_recv_);
}

namespace {
void grow_pinned(unsigned char*& p, std::size_t& cap, std::size_t bytes) {
  if (bytes <= cap) return;
  if (p) {
    ORBIS_CUDA_CHECK(cudaDeviceSynchronize());   // a queued copy may still use the old buffer
    ORBIS_CUDA_CHECK(cudaFreeHost(p));
  }
  p = nullptr;
  cap = 0;
  const std::size_t want = bytes + bytes / 8 + 1;
  ORBIS_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&p), want));
  cap = want;
}
}  // namespace

void StagedAlltoallv::exchange(const void* send, const std::vector<std::size_t>& send_counts, void* recv,
                               const std::vector<std::size_t>& recv_counts, std::size_t element, cudaStream_t stream) {
  check_counts(comm_, send_counts, recv_counts);
  ++times_.calls;
  if (comm_.size() == 1) {
    copy_own(send, recv, send_counts[0] * element, stream);
    return;
  }
  const std::size_t send_bytes = Comm::total(send_counts) * element, recv_bytes = Comm::total(recv_counts) * element;
  grow_pinned(host_send_, send_cap_, send_bytes);
  grow_pinned(host_recv_, recv_cap_, recv_bytes);
  Stopwatch watch;
  if (send_bytes > 0)
    ORBIS_CUDA_CHECK(cudaMemcpyAsync(host_send_, send, send_bytes, cudaMemcpyDeviceToHost, stream));
  // Also finishes the last call's copy up from host_recv_, which MPI overwrites next.
  ORBIS_CUDA_CHECK(cudaStreamSynchronize(stream));
  times_.down += watch.seconds();
  watch.restart();
  comm_.alltoallv_known(host_send_, send_counts, host_recv_, recv_counts, element);
  times_.mpi += watch.seconds();
  times_.bytes += recv_bytes - recv_counts[static_cast<std::size_t>(comm_.rank())] * element;
  watch.restart();
  if (recv_bytes > 0)
    ORBIS_CUDA_CHECK(cudaMemcpyAsync(recv, host_recv_, recv_bytes, cudaMemcpyHostToDevice, stream));
  if (timed_) {
    ORBIS_CUDA_CHECK(cudaStreamSynchronize(stream));
    times_.up += watch.seconds();
  }
}

// ------------------------------------------------------------------ IPC

IpcAlltoallv::IpcAlltoallv(const Comm& comm, std::size_t initial_bytes)
    : comm_(comm), peers_(static_cast<std::size_t>(comm.size()), nullptr) {
  std::string message;
  cudaIpcMemHandle_t handle{};
  try {
    ORBIS_CUDA_CHECK(cudaGetDevice(&device_));
    reallocate(initial_bytes);
    if (comm_.size() > 1) ORBIS_CUDA_CHECK(cudaIpcGetMemHandle(&handle, buffer_));
  } catch (const Error& e) {
    message = e.what();
  }
  const auto drop_own = [this] {
    if (buffer_) cudaFree(buffer_);
    buffer_ = nullptr;
    capacity_ = 0;
  };
  try {
    comm_.throw_if_any_failed(message);
  } catch (...) {
    drop_own();
    throw;
  }
  capacities_ = comm_.allgather(capacity_);
  if (comm_.size() == 1) return;
  const std::vector<cudaIpcMemHandle_t> handles = comm_.allgather(handle);
  std::vector<int> others;
  for (int r = 0; r < comm_.size(); ++r)
    if (r != comm_.rank()) others.push_back(r);
  open_imports(others, handles);   // throws on every rank when one fails, the mappings closed
}

IpcAlltoallv::~IpcAlltoallv() {
  // No throw from a destructor. Every rank closes its mappings, then (a barrier) frees its
  // buffer, which nobody maps any more. After MPI_Finalize no barrier can be had: the buffer
  // is left to the process' end rather than freed under a peer's mapping.
  for (void*& p : peers_)
    if (p) {
      cudaIpcCloseMemHandle(p);
      p = nullptr;
    }
  if (!buffer_) return;
  if (comm_.size() > 1) {
    // While an exception unwinds, this rank may be the only one failing: it must reach its
    // error report (which aborts every rank), not wait in a barrier the others never enter.
    if (!comm_.active() || std::uncaught_exceptions() > 0) return;
    try {
      comm_.barrier();
    } catch (...) {
      return;
    }
  }
  cudaFree(buffer_);
}

void IpcAlltoallv::reallocate(std::size_t bytes) {
  if (buffer_) {
    ORBIS_CUDA_CHECK(cudaFree(buffer_));   // waits for the device; nobody maps it any more
    buffer_ = nullptr;
    capacity_ = 0;
  }
  // Plain cudaMalloc: pool memory (cudaMallocAsync's default pool) cannot be exported.
  const std::size_t want = bytes < 256 ? 256 : bytes;
  ORBIS_CUDA_CHECK(cudaMalloc(&buffer_, want));
  capacity_ = want;
  ++generation_;
}

void IpcAlltoallv::close_imports(const std::vector<int>& which) {
  for (int r : which) {
    void*& p = peers_[static_cast<std::size_t>(r)];
    if (p) ORBIS_CUDA_CHECK(cudaIpcCloseMemHandle(p));
    p = nullptr;
  }
}

// Maps the buffers of the ranks `which` (not this one); collective. When any rank fails,
// every rank closes what it mapped and throws.
void IpcAlltoallv::open_imports(const std::vector<int>& which, const std::vector<cudaIpcMemHandle_t>& handles) {
  std::string message;
  for (int r : which) {
    if (r == comm_.rank()) continue;
    void* p = nullptr;
    const cudaError_t status =
        cudaIpcOpenMemHandle(&p, handles[static_cast<std::size_t>(r)], cudaIpcMemLazyEnablePeerAccess);
    if (status != cudaSuccess) {
      cudaGetLastError();   // not sticky, but leave no error behind
      message = fmt::format("rank {} could not map rank {}'s device buffer (cudaIpcOpenMemHandle: {})", comm_.rank(),
                            r, cuda_message(status));
      break;
    }
    peers_[static_cast<std::size_t>(r)] = p;
  }
  try {
    comm_.throw_if_any_failed(message);
  } catch (...) {
    for (void*& p : peers_)
      if (p) {
        cudaIpcCloseMemHandle(p);
        p = nullptr;
      }
    comm_.barrier();   // every mapping closed before anyone frees
    if (buffer_) cudaFree(buffer_);
    buffer_ = nullptr;
    capacity_ = 0;
    throw;
  }
}

void* IpcAlltoallv::grow(std::size_t bytes, std::size_t headroom) {
  ORBIS_CUDA_CHECK(cudaSetDevice(device_));   // the buffers are this device's, the mappings made on it
  if (comm_.size() == 1) {
    if (bytes > capacity_) reallocate(bytes + headroom);
    capacities_[0] = capacity_;
    return buffer_;
  }
  Stopwatch watch;
  const bool grow = bytes > capacity_;
  const std::vector<int> flags = comm_.allgather<int>(grow ? 1 : 0);
  std::vector<int> growers;
  for (int r = 0; r < comm_.size(); ++r)
    if (flags[static_cast<std::size_t>(r)]) growers.push_back(r);
  if (!growers.empty()) {
    close_imports(growers);   // this rank's own is never in peers_
    comm_.barrier();          // nobody maps a grower's buffer now: it may free it
    std::string message;
    cudaIpcMemHandle_t handle{};
    if (grow) try {
        reallocate(bytes + headroom);
        ORBIS_CUDA_CHECK(cudaIpcGetMemHandle(&handle, buffer_));
      } catch (const Error& e) {
        message = e.what();
      }
    comm_.throw_if_any_failed(message);
    const std::vector<cudaIpcMemHandle_t> handles = comm_.allgather(handle);
    open_imports(growers, handles);
    capacities_ = comm_.allgather(capacity_);
  }
  times_.mpi += watch.seconds();
  return buffer_;
}

template <typename Copy>
void IpcAlltoallv::run(const void* send, const std::vector<std::size_t>& send_counts,
                       const std::vector<std::size_t>& recv_counts, std::size_t element, cudaStream_t stream,
                       Copy&& copy) {
  check_counts(comm_, send_counts, recv_counts);
  ++times_.calls;
  const std::size_t send_bytes = Comm::total(send_counts) * element;
  if (comm_.size() == 1) {
    if (send_bytes > 0) copy(0, send, send_bytes);
    return;
  }
  // 1-2: the data in the exported buffer, on the device. send_buffer() is collective, so
  // every rank calls it, whether its send is the buffer already or not.
  if (send == buffer_ && send_bytes > capacity_)
    fail("internal: {} bytes sent from a device alltoallv buffer of {}", send_bytes, capacity_);
  send_buffer(send_bytes);
  Stopwatch watch;
  if (send != buffer_ && send_bytes > 0)
    ORBIS_CUDA_CHECK(cudaMemcpyAsync(buffer_, send, send_bytes, cudaMemcpyDeviceToDevice, stream));
  ORBIS_CUDA_CHECK(cudaStreamSynchronize(stream));
  times_.fill += watch.seconds();
  watch.restart();
  // 3: where each receiver's piece starts in this rank's buffer, and its size: arriving, it
  // also says the sender's data is ready.
  const auto p = static_cast<std::size_t>(comm_.size());
  const std::vector<std::uint64_t> starts = byte_offsets(send_counts, element);
  std::vector<std::uint64_t> mine(2 * p), theirs(2 * p);
  for (std::size_t r = 0; r < p; ++r) {
    mine[2 * r] = starts[r];
    mine[2 * r + 1] = static_cast<std::uint64_t>(send_counts[r]) * element;
  }
  const std::vector<std::size_t> pairs(p, 1);
  comm_.alltoallv_known(mine.data(), pairs, theirs.data(), pairs, 2 * sizeof(std::uint64_t));
  times_.mpi += watch.seconds();
  watch.restart();
  // 4: the pieces, device to device, from the senders' buffers.
  const std::size_t me = static_cast<std::size_t>(comm_.rank());
  std::string message;
  for (std::size_t s = 0; s < p; ++s) {
    const std::uint64_t bytes = static_cast<std::uint64_t>(recv_counts[s]) * element;
    if (theirs[2 * s + 1] != bytes) {
      message = fmt::format("internal: rank {} expects {} bytes from rank {}, which sends {}", me, bytes, s,
                            theirs[2 * s + 1]);
      break;
    }
    if (bytes == 0) continue;
    const auto* from = static_cast<const unsigned char*>(s == me ? buffer_ : peers_[s]);
    copy(s, from + theirs[2 * s], bytes);
    if (s != me) times_.bytes += bytes;
  }
  ORBIS_CUDA_CHECK(cudaStreamSynchronize(stream));
  times_.peer += watch.seconds();
  watch.restart();
  // 5: nobody reads a send buffer any more. The failure check is the barrier: its reduction
  // completes on no rank before every rank has entered it.
  comm_.throw_if_any_failed(message);
  times_.mpi += watch.seconds();
}

void IpcAlltoallv::exchange(const void* send, const std::vector<std::size_t>& send_counts, void* recv,
                            const std::vector<std::size_t>& recv_counts, std::size_t element, cudaStream_t stream) {
  const std::vector<std::uint64_t> at = byte_offsets(recv_counts, element);
  run(send, send_counts, recv_counts, element, stream, [&](std::size_t s, const void* from, std::size_t bytes) {
    ORBIS_CUDA_CHECK(cudaMemcpyAsync(static_cast<unsigned char*>(recv) + at[s], from, bytes, cudaMemcpyDefault, stream));
  });
}

void IpcAlltoallv::pull(const std::vector<PeerPull>& pulls, void* recv, cudaStream_t stream) {
  ++times_.calls;
  const auto p = static_cast<std::size_t>(comm_.size());
  const std::size_t me = static_cast<std::size_t>(comm_.rank());
  std::string message;
  for (const PeerPull& q : pulls) {
    const std::size_t r = static_cast<std::size_t>(q.rank);
    const std::size_t end = q.rows == 0 || q.width == 0 ? 0 : q.from + (q.rows - 1) * q.from_pitch + q.width;
    if (q.rank < 0 || r >= p || end > capacities_[r]) {
      message = fmt::format("internal: rank {} pulls bytes [{}, {}) from rank {}, whose exported buffer holds {}", me,
                            q.from, end, q.rank, q.rank >= 0 && r < p ? capacities_[r] : 0);
      break;
    }
  }
  // Every rank's buffer filled (this rank's: its stream done), then a barrier: past it every
  // buffer holds its data. The bounds' failure goes through it too.
  Stopwatch watch;
  ORBIS_CUDA_CHECK(cudaStreamSynchronize(stream));
  times_.fill += watch.seconds();
  watch.restart();
  comm_.throw_if_any_failed(message);
  times_.mpi += watch.seconds();
  watch.restart();
  // One kernel reads the senders' buffers (mapped here) row by row, over NVLink for another
  // device's, and writes the rows straight into their pitched places: the pieces from the
  // other devices and from this one's own buffer move at once.
  std::vector<Copy2d> copies;
  for (const PeerPull& q : pulls) {
    const std::size_t r = static_cast<std::size_t>(q.rank);
    const auto* from = static_cast<const unsigned char*>(r == me ? buffer_ : peers_[r]) + q.from;
    copies.push_back(Copy2d{static_cast<unsigned char*>(recv) + q.to, from, q.to_pitch, q.from_pitch, q.width, q.rows});
    if (r != me) times_.bytes += q.width * q.rows;
  }
  copy_2d_batch(copies, stream);
  ORBIS_CUDA_CHECK(cudaStreamSynchronize(stream));
  times_.peer += watch.seconds();
  watch.restart();
  comm_.barrier();   // nobody reads a buffer any more: the next fill may overwrite it
  times_.mpi += watch.seconds();
}

std::string IpcAlltoallv::describe() const {
  return fmt::format("CUDA IPC between the {} ranks' devices ({:.1f} MiB exported send buffer)", comm_.size(),
                     static_cast<double>(capacity_) / 1048576.0);
}

void DeviceAlltoallv::pull(const std::vector<PeerPull>&, void*, cudaStream_t) {
  fail("internal: only the CUDA IPC exchange pulls from the other ranks' buffers");
}

// ------------------------------------------------------------------ the choice

std::unique_ptr<DeviceAlltoallv> make_device_alltoallv(const Comm& comm, RankExchange mode, const std::string& what) {
  if (mode == RankExchange::staged) return std::make_unique<StagedAlltoallv>(comm);
  std::string why;
  if (comm.size() > 1) {
    const int node_ranks = comm.node_size();
    if (comm.any(node_ranks != comm.size())) {
      why = "the ranks are on more than one node";
    } else {
      const std::string problem = peer_problem(comm);
      const std::vector<int> failing = comm.allgather<int>(problem.empty() ? 0 : 1);
      for (int r = 0; r < comm.size(); ++r)
        if (failing[static_cast<std::size_t>(r)]) {
          why = problem;
          comm.broadcast(why, r);
          break;
        }
    }
  }
  if (why.empty()) {
    try {
      auto ipc = std::make_unique<IpcAlltoallv>(comm, 1 << 20);
      if (comm.size() > 1 && comm.is_root())
        log::info("{}: CUDA IPC between the {} ranks' devices (device to device, no host staging)", what,
                  comm.size());
      return ipc;
    } catch (const Error& e) {   // thrown on every rank alike
      why = e.what();
    }
  }
  if (mode == RankExchange::ipc)
    fail("[gpu] rank_exchange = \"ipc\" (or ORBIS_RANK_EXCHANGE=ipc) for the {}, but {}", what, why);
  if (comm.is_root())
    log::info("{}: staged through pinned host memory and MPI (no CUDA IPC: {})", what, why);
  return std::make_unique<StagedAlltoallv>(comm);
}

}  // namespace orbis::gpu
