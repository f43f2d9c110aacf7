// A communicator: the ranks that work on one run (MPI_COMM_WORLD, or a part of it split off
// for a test), with the typed collectives the distributed code needs. Code above core never
// calls MPI itself: it asks a Comm, so a build without MPI (one rank, every collective a
// copy) compiles and runs the same code.
//
// Element types are trivially copyable structs (positions, particle records, counts); they
// travel as bytes between ranks of one machine type. Reductions take the arithmetic types
// listed in Comm::Reducible.
//
// Every collective is timed into the communicator's CommStats (seconds spent inside MPI,
// waiting included, and bytes sent by this rank), which the step log reports.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "core/error.hpp"

namespace orbis {

struct CommStats {
  double seconds = 0;          // wall time inside collectives on this rank
  std::uint64_t bytes = 0;     // bytes this rank sent (alltoallv, gathers, broadcasts)
  std::uint64_t calls = 0;
};

class Comm {
 public:
  enum class Op { sum, max, min };

  // This process alone (as self()).
  Comm() : Comm(self()) {}
  // Every rank of the run (MPI_COMM_WORLD; one rank without MPI).
  static Comm world();
  // This process alone.
  static Comm self();

  int rank() const { return rank_; }
  int size() const { return size_; }
  bool is_root() const { return rank_ == 0; }

  // This rank's index among the communicator's ranks on its node (ranks that share memory,
  // MPI_Comm_split_type); 0 without MPI. Collective.
  int node_rank() const;
  // How many of the communicator's ranks share this rank's node (MPI_Comm_split_type); 1
  // without MPI. Collective.
  int node_size() const;
  // Whether collectives may still be called (MPI initialised and not finalised; always
  // without MPI): a destructor that synchronises the ranks asks first.
  bool active() const;

  // Ranks with the same colour form a new communicator, ordered by key (MPI_Comm_split).
  Comm split(int colour, int key) const;

  void barrier() const;
  // A barrier whose ranks wait asleep, testing every ~0.2 ms, where MPI's own collectives
  // spin: for ranks that may wait long on one rank's file I/O (a snapshot's writer), so that
  // they leave their cores to the threads with work (the run's steps, beside the output
  // thread). Costs up to one poll interval of latency.
  void idle_barrier() const;

  // Reductions over all ranks; every rank gets the result.
  template <typename T> T sum(T value) const { reduce(&value, 1, Op::sum); return value; }
  template <typename T> T max(T value) const { reduce(&value, 1, Op::max); return value; }
  template <typename T> T min(T value) const { reduce(&value, 1, Op::min); return value; }
  template <typename T> void reduce(std::vector<T>& values, Op op) const { reduce(values.data(), values.size(), op); }
  template <typename T> void reduce(T* values, std::size_t count, Op op) const {
    static_assert(std::is_arithmetic_v<T>, "Comm::reduce takes arithmetic types");
    reduce_raw(values, count, type_code<T>(), op);
  }
  bool any(bool flag) const { return max<int>(flag ? 1 : 0) != 0; }
  bool all(bool flag) const { return min<int>(flag ? 1 : 0) != 0; }
  // Sum of value over the ranks before this one (0 on rank 0).
  template <typename T> T exclusive_sum(T value) const {
    static_assert(std::is_arithmetic_v<T>, "Comm::exclusive_sum takes arithmetic types");
    exscan_raw(&value, type_code<T>());
    return rank_ == 0 ? T{} : value;
  }

  // One value per rank, in rank order, on every rank.
  template <typename T> std::vector<T> allgather(const T& value) const {
    check_copyable<T>();
    std::vector<T> out(size_);
    allgather_raw(&value, out.data(), sizeof(T));
    return out;
  }
  // Every rank's vector concatenated in rank order, on every rank.
  template <typename T> std::vector<T> allgatherv(const std::vector<T>& values) const {
    check_copyable<T>();
    const std::vector<std::size_t> counts = allgather(values.size());
    std::vector<T> out(total(counts));
    allgatherv_raw(values.data(), values.size(), counts, out.data(), sizeof(T));
    return out;
  }
  // Every rank's vector concatenated in rank order on `root`; empty elsewhere.
  template <typename T> std::vector<T> gatherv(const std::vector<T>& values, int root = 0) const {
    check_copyable<T>();
    const std::vector<std::size_t> counts = allgather(values.size());
    std::vector<T> out(rank_ == root ? total(counts) : 0);
    gatherv_raw(values.data(), values.size(), counts, out.data(), sizeof(T), root);
    return out;
  }
  // root's value (or vector, resized on the others) on every rank.
  template <typename T> void broadcast(T& value, int root = 0) const {
    check_copyable<T>();
    broadcast_raw(&value, sizeof(T), root);
  }
  template <typename T> void broadcast(std::vector<T>& values, int root = 0) const {
    check_copyable<T>();
    std::size_t n = values.size();
    broadcast(n, root);
    values.resize(n);
    broadcast_raw(values.data(), n * sizeof(T), root);
  }
  void broadcast(std::string& text, int root = 0) const {
    std::vector<char> chars(text.begin(), text.end());
    broadcast(chars, root);
    text.assign(chars.begin(), chars.end());
  }

  // Personalised all-to-all: send[send_offsets(r) .. + send_counts[r]) goes to rank r, the
  // send buffer ordered by destination. Returns what arrived, ordered by source rank;
  // recv_counts (if given) receives the count from each rank.
  template <typename T>
  std::vector<T> alltoallv(const std::vector<T>& send, const std::vector<std::size_t>& send_counts,
                           std::vector<std::size_t>* recv_counts = nullptr) const {
    check_copyable<T>();
    const std::vector<std::size_t> incoming = alltoall_counts(send_counts, send.size());
    std::vector<T> out(total(incoming));
    alltoallv_raw(send.data(), send_counts, out.data(), incoming, sizeof(T));
    if (recv_counts) *recv_counts = incoming;
    return out;
  }
  // As alltoallv, what arrives written into `out` from index `at` on (out resized to `at`
  // plus the arrivals, its first `at` elements kept): a buffer reused from call to call is
  // neither allocated nor faulted in again.
  template <typename T>
  void alltoallv_into(const std::vector<T>& send, const std::vector<std::size_t>& send_counts, std::vector<T>& out,
                      std::size_t at) const {
    check_copyable<T>();
    const std::vector<std::size_t> incoming = alltoall_counts(send_counts, send.size());
    out.resize(at + total(incoming));
    alltoallv_raw(send.data(), send_counts, out.data() + at, incoming, sizeof(T));
  }
  // As alltoallv with both sides' counts known in advance (recv_counts[r]: what rank r sends
  // here), in elements of `element` bytes, between the caller's buffers: no count exchange
  // and no allocation, so pinned host buffers staged to and from a GPU travel as they are,
  // and a large element (a mesh row) keeps MPI's int counts and offsets small
  // (gpu/pm_cuda_slabs.cu).
  void alltoallv_known(const void* send, const std::vector<std::size_t>& send_counts, void* recv,
                       const std::vector<std::size_t>& recv_counts, std::size_t element) const {
    alltoallv_raw(send, send_counts, recv, recv_counts, element);
  }
  // The counts of an alltoallv: recv[r] = what rank r sends to this one.
  std::vector<std::size_t> alltoall_counts(const std::vector<std::size_t>& send_counts,
                                           std::size_t send_total) const;

  // After work that may fail on some ranks only (file I/O): when `message` is non-empty on
  // any rank, every rank throws orbis::Error (its own message, or the lowest failing rank's),
  // so no rank is left waiting in the next collective.
  void throw_if_any_failed(const std::string& message) const;

  const CommStats& stats() const;
  void reset_stats() const;

  // The MPI_Comm of this communicator as an opaque integer (for libraries that take one:
  // FFTW-MPI). Only meaningful in an MPI build.
  std::intptr_t native_handle() const;

  static std::size_t total(const std::vector<std::size_t>& counts) {
    std::size_t n = 0;
    for (std::size_t c : counts) n += c;
    return n;
  }

 private:
  enum class Type { i32, i64, u64, f32, f64, u32 };
  struct Impl;
  explicit Comm(std::shared_ptr<Impl> impl);

  template <typename T> static constexpr Type type_code() {
    if constexpr (std::is_same_v<T, double>) return Type::f64;
    else if constexpr (std::is_same_v<T, float>) return Type::f32;
    else if constexpr (std::is_integral_v<T> && std::is_signed_v<T> && sizeof(T) == 4) return Type::i32;
    else if constexpr (std::is_integral_v<T> && std::is_signed_v<T> && sizeof(T) == 8) return Type::i64;
    else if constexpr (std::is_integral_v<T> && std::is_unsigned_v<T> && sizeof(T) == 8) return Type::u64;
    else if constexpr (std::is_integral_v<T> && std::is_unsigned_v<T> && sizeof(T) == 4) return Type::u32;
    else static_assert(sizeof(T) == 0, "Comm reductions take int32, int64, uint32, uint64, float or double");
  }
  template <typename T> static constexpr void check_copyable() {
    static_assert(std::is_trivially_copyable_v<T>, "Comm moves trivially copyable types only");
  }

  void reduce_raw(void* data, std::size_t count, Type type, Op op) const;
  void exscan_raw(void* value, Type type) const;
  void allgather_raw(const void* send, void* recv, std::size_t bytes) const;
  void allgatherv_raw(const void* send, std::size_t count, const std::vector<std::size_t>& counts, void* recv,
                      std::size_t element) const;
  void gatherv_raw(const void* send, std::size_t count, const std::vector<std::size_t>& counts, void* recv,
                   std::size_t element, int root) const;
  void broadcast_raw(void* data, std::size_t bytes, int root) const;
  void alltoallv_raw(const void* send, const std::vector<std::size_t>& send_counts, void* recv,
                     const std::vector<std::size_t>& recv_counts, std::size_t element) const;

  std::shared_ptr<Impl> impl_;
  int rank_ = 0, size_ = 1;
};

// Runs f on every rank of comm; an orbis::Error on any rank is thrown on all of them
// (Comm::throw_if_any_failed). f itself must not call collectives of comm after a point
// where it can throw.
template <typename F>
void run_collectively(const Comm& comm, F&& f) {
  std::string message;
  try {
    f();
  } catch (const Error& e) {
    message = e.what();
    if (message.empty()) message = "unknown error";
  }
  comm.throw_if_any_failed(message);
}

}  // namespace orbis
