// A personalised all-to-all between the ranks' device buffers (issue #29): the ghost refresh
// (gpu/ghost_exchange_cuda.cuh) and the cuFFT slab PM's transposes (gpu/pm_cuda_slabs.cu)
// move their device data between ranks through one of these.
//
//   staged: pinned host buffers and Comm's alltoallv (no CUDA-aware MPI assumed): one copy
//           down, MPI between the ranks, one copy up. Always works.
//   ipc:    ranks of one node whose devices are the same or peer-accessible: each rank's send
//           buffer (plain cudaMalloc, exported with cudaIpcGetMemHandle) is mapped by the
//           others (cudaIpcOpenMemHandle), and each rank copies its incoming pieces device
//           to device from the senders' buffers on its own stream. Nothing crosses the bus
//           or MPI but a few offsets and barriers.
//
// The IPC protocol of one exchange (every step collective, in this order on every rank):
//   1. send_buffer(bytes): a rank whose exported buffer is too small says so (allgather of a
//      flag); the others close their mapping of it, a barrier, it reallocates (1/4 headroom),
//      and the new handle goes to the others (allgather), who map it. Nothing else is
//      exchanged while the buffers keep their size.
//   2. The caller fills the send buffer (or exchange() copies `send` into it) on its stream;
//      the stream is synchronised, so the data is in device memory.
//   3. Each sender tells each receiver where its piece starts in the send buffer (an
//      alltoall of byte offsets). A rank receives a sender's offset only after that sender
//      has finished step 2, so this is also the "data ready" signal.
//   4. Each rank copies its pieces from the peers' mapped buffers into recv on its stream
//      (cudaMemcpyAsync, cudaMemcpyDefault) and synchronises the stream. (pull(): the
//      receivers know where their pieces lie, and a barrier replaces step 3's offsets.)
//   5. A barrier (a reduction of the ranks' failure flags): after it no rank reads anyone's
//      send buffer, so the next exchange may overwrite it.
// The mappings are closed before the exporter frees (steps 1 and the destructor: close the
// imports, a barrier, then free), as CUDA requires (freeing before the importers close is
// undefined behaviour). The destructor's barrier makes the destruction collective: every rank
// destroys its exchanges at the same point (the engines do, before MPI_Finalize). A
// destruction after MPI_Finalize, or while an exception unwinds (one rank's error must reach
// its report, which aborts every rank, not wait in a barrier), skips the barrier and leaves
// the buffer to the process' end rather than free it under a peer's mapping.
//
// The choice (make_device_alltoallv) is collective and made on the first exchange, so every
// rank takes the same one; a fallback to staged logs one line on rank 0 saying why.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include "core/comm.hpp"

namespace orbis::gpu {

// [gpu] rank_exchange: how device data moves between ranks.
enum class RankExchange { automatic, staged, ipc };
// "auto" | "staged" | "ipc"; fails with the accepted words otherwise.
RankExchange parse_rank_exchange(const std::string& word, const std::string& where);
const char* rank_exchange_name(RankExchange mode);
// The process-wide choice the exchanges made from now on follow: set by the CUDA step engine
// from [gpu] rank_exchange; where that is auto (or not set) the environment's
// ORBIS_RANK_EXCHANGE (auto|staged|ipc, for tests and comparisons), else auto.
void set_rank_exchange(RankExchange mode);
RankExchange rank_exchange();

// Where an exchange's time went (wall seconds on this rank, accumulated until reset). With
// `timed` off only what is measured between synchronisations that are there anyway: the
// staged path's copy down (with the work queued before it) and its MPI; the copies up and
// the IPC copies then end on the caller's stream and count nowhere.
struct ExchangeTimes {
  double down = 0;    // staged: the send buffer to the host (with the work queued before it)
  double mpi = 0;     // staged: the alltoallv; ipc: the offsets, growth and barriers
  double up = 0;      // staged: the host to recv (timed only)
  double peer = 0;    // ipc: the pieces copied from the peers' buffers (timed only)
  double fill = 0;    // ipc: `send` copied into the exported buffer with the work queued before it
  std::uint64_t bytes = 0;   // bytes this rank received from the others
  std::uint64_t calls = 0;
};

// Rows to copy out of rank `rank`'s exported buffer (DeviceAlltoallv::pull): `rows` rows of
// `width` bytes, from byte `from` of that buffer a row every `from_pitch` bytes, to byte `to`
// of the receiver's memory a row every `to_pitch`.
struct PeerPull {
  int rank = 0;
  std::size_t from = 0, from_pitch = 0, to = 0, to_pitch = 0, width = 0, rows = 0;
};

class DeviceAlltoallv {
 public:
  virtual ~DeviceAlltoallv() = default;
  // Collective. A device buffer of at least `bytes` that the caller may fill (on its stream,
  // before the next exchange) and pass as that exchange's send, which then copies nothing
  // into its own buffer; null when the implementation has no such buffer (staged: pass any
  // device memory). Valid until the next send_buffer() call.
  virtual void* send_buffer(std::size_t bytes) = 0;
  // Collective: as send_buffer, growing to exactly `bytes` (no headroom) where it grows: for
  // users whose sizes never change (the PM's transposes).
  virtual void reserve_exact(std::size_t bytes) { (void)bytes; }
  // Collective. send: on the device, send_counts[r] elements of `element` bytes for rank r,
  // in rank order; recv: on the device, room for what arrives: recv_counts[r] elements from
  // rank r, in rank order (the two do not overlap). Work queued on `stream` before the call
  // has written send; work queued after it sees recv. Returns with the exchange's data
  // read: send may be overwritten at once.
  virtual void exchange(const void* send, const std::vector<std::size_t>& send_counts, void* recv,
                        const std::vector<std::size_t>& recv_counts, std::size_t element, cudaStream_t stream) = 0;
  // Collective; peer_to_peer() only. Every rank has filled its exported buffer (the one
  // send_buffer() gave, the same size on every call of a round) on `stream`; each rank then
  // copies `pulls` out of the ranks' buffers (its own too) straight into recv, where the
  // receiver knows what lies where in the senders' buffers (the y -> x transpose, whose
  // senders' buffers are their y slabs: the receiver's own planes and its ghost planes, with
  // no landing buffer in between). Returns with the buffers read: the next fill may
  // overwrite them. A pull outside its sender's buffer is an Error on every rank.
  virtual void pull(const std::vector<PeerPull>& pulls, void* recv, cudaStream_t stream);
  virtual std::string describe() const = 0;
  virtual bool peer_to_peer() const = 0;   // the IPC path: nothing crosses the bus
  virtual std::size_t device_bytes() const { return 0; }   // device memory held (IPC: the send buffer)

  // Synchronise the stream between the parts (ORBIS_TIME_GHOSTS): each part's time is then
  // its own, at the cost of the synchronisations.
  void set_timed(bool timed) { timed_ = timed; }
  const ExchangeTimes& times() const { return times_; }
  void reset_times() { times_ = ExchangeTimes{}; }

 protected:
  bool timed_ = false;
  ExchangeTimes times_;
};

// Through pinned host memory and Comm's alltoallv with known counts.
class StagedAlltoallv final : public DeviceAlltoallv {
 public:
  explicit StagedAlltoallv(const Comm& comm);
  ~StagedAlltoallv() override;
  void* send_buffer(std::size_t) override { return nullptr; }
  void exchange(const void* send, const std::vector<std::size_t>& send_counts, void* recv,
                const std::vector<std::size_t>& recv_counts, std::size_t element, cudaStream_t stream) override;
  std::string describe() const override { return "pinned host staging and MPI"; }
  bool peer_to_peer() const override { return false; }

 private:
  Comm comm_;
  unsigned char* host_send_ = nullptr;
  unsigned char* host_recv_ = nullptr;
  std::size_t send_cap_ = 0, recv_cap_ = 0;
};

// CUDA IPC between the ranks of one node (the protocol above). Build it through
// make_device_alltoallv, which checks that every pair of ranks can map each other's memory.
class IpcAlltoallv final : public DeviceAlltoallv {
 public:
  // Collective: allocates, exports and maps the first buffers; throws orbis::Error on every
  // rank when any rank fails (the mappings made are closed again first).
  IpcAlltoallv(const Comm& comm, std::size_t initial_bytes);
  ~IpcAlltoallv() override;
  void* send_buffer(std::size_t bytes) override { return grow(bytes, bytes / 4); }
  void reserve_exact(std::size_t bytes) override { grow(bytes, 0); }
  void exchange(const void* send, const std::vector<std::size_t>& send_counts, void* recv,
                const std::vector<std::size_t>& recv_counts, std::size_t element, cudaStream_t stream) override;
  void pull(const std::vector<PeerPull>& pulls, void* recv, cudaStream_t stream) override;
  std::string describe() const override;
  bool peer_to_peer() const override { return true; }
  std::size_t device_bytes() const override { return capacity_; }
  // Times this rank's exported buffer was (re)allocated (tests).
  std::uint64_t generation() const { return generation_; }

 private:
  void close_imports(const std::vector<int>& which);
  void open_imports(const std::vector<int>& which, const std::vector<cudaIpcMemHandle_t>& handles);
  void reallocate(std::size_t bytes);
  void* grow(std::size_t bytes, std::size_t headroom);   // collective (the protocol's step 1)
  // The protocol, with rank s's piece (`bytes` at `from`, in its exported buffer or this
  // rank's own) copied on `stream` by copy(s, from, bytes).
  template <typename Copy>
  void run(const void* send, const std::vector<std::size_t>& send_counts, const std::vector<std::size_t>& recv_counts,
           std::size_t element, cudaStream_t stream, Copy&& copy);

  Comm comm_;
  int device_ = 0;
  void* buffer_ = nullptr;            // this rank's exported send buffer
  std::size_t capacity_ = 0;
  std::uint64_t generation_ = 0;
  std::vector<void*> peers_;          // the others' buffers, mapped here (own: buffer_)
  std::vector<std::size_t> capacities_;   // every rank's buffer capacity (pull()'s bounds)
};

// Collective (comm's ranks on their current devices): IPC when `mode` allows it, comm's
// ranks share one node and every pair of devices is the same or peer-accessible, and the
// buffers could be exported and mapped; else staged, with the reason logged once on rank 0
// (mode ipc then fails instead, with the reason). `what` names the user in the log line.
std::unique_ptr<DeviceAlltoallv> make_device_alltoallv(const Comm& comm, RankExchange mode, const std::string& what);

}  // namespace orbis::gpu
