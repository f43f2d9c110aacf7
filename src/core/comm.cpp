#include "core/comm.hpp"

#include <chrono>
#include <climits>
#include <cstring>
#include <thread>

#include "core/error.hpp"
#include "core/timer.hpp"

#ifdef ORBIS_HAVE_MPI
#include <mpi.h>
#endif

namespace orbis {

struct Comm::Impl {
#ifdef ORBIS_HAVE_MPI
  MPI_Comm comm = MPI_COMM_NULL;
  bool owned = false;   // made by split(): freed with the last copy
  ~Impl() {
    int finalised = 0;
    MPI_Finalized(&finalised);
    if (owned && !finalised && comm != MPI_COMM_NULL) MPI_Comm_free(&comm);
  }
#endif
  mutable CommStats stats;
};

namespace {

// Times one collective into the communicator's stats.
class Timed {
 public:
  Timed(CommStats& stats, std::uint64_t bytes) : stats_(stats) {
    stats_.bytes += bytes;
    ++stats_.calls;
  }
  ~Timed() { stats_.seconds += watch_.seconds(); }

 private:
  CommStats& stats_;
  Stopwatch watch_;
};

#ifdef ORBIS_HAVE_MPI
bool mpi_running() {
  int initialised = 0, finalised = 0;
  MPI_Initialized(&initialised);
  MPI_Finalized(&finalised);
  return initialised && !finalised;
}

int to_int(std::size_t n, const char* what) {
  if (n > static_cast<std::size_t>(INT_MAX))
    fail("MPI: {} = {} elements exceeds what one MPI call can carry ({}); use more ranks", what, n, INT_MAX);
  return static_cast<int>(n);
}

// A contiguous type of `bytes` bytes, so that counts are in elements, not bytes.
class ElementType {
 public:
  explicit ElementType(std::size_t bytes) {
    MPI_Type_contiguous(to_int(bytes, "element size"), MPI_BYTE, &type_);
    MPI_Type_commit(&type_);
  }
  ~ElementType() { MPI_Type_free(&type_); }
  MPI_Datatype get() const { return type_; }

 private:
  MPI_Datatype type_;
};

std::vector<int> int_counts(const std::vector<std::size_t>& counts, std::vector<int>* displacements) {
  std::vector<int> out(counts.size());
  std::size_t running = 0;
  if (displacements) displacements->resize(counts.size());
  for (std::size_t r = 0; r < counts.size(); ++r) {
    out[r] = to_int(counts[r], "a message");
    if (displacements) (*displacements)[r] = to_int(running, "a message offset");
    running += counts[r];
  }
  return out;
}
#endif

}  // namespace

Comm::Comm(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {
#ifdef ORBIS_HAVE_MPI
  if (impl_->comm != MPI_COMM_NULL) {
    MPI_Comm_rank(impl_->comm, &rank_);
    MPI_Comm_size(impl_->comm, &size_);
  }
#endif
}

Comm Comm::world() {
  auto impl = std::make_shared<Impl>();
#ifdef ORBIS_HAVE_MPI
  if (mpi_running()) impl->comm = MPI_COMM_WORLD;
#endif
  return Comm(impl);
}

Comm Comm::self() {
  auto impl = std::make_shared<Impl>();
#ifdef ORBIS_HAVE_MPI
  if (mpi_running()) impl->comm = MPI_COMM_SELF;
#endif
  return Comm(impl);
}

int Comm::node_rank() const {
#ifdef ORBIS_HAVE_MPI
  if (impl_->comm == MPI_COMM_NULL || !mpi_running()) return 0;
  MPI_Comm node = MPI_COMM_NULL;
  MPI_Comm_split_type(impl_->comm, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node);
  int rank = 0;
  MPI_Comm_rank(node, &rank);
  MPI_Comm_free(&node);
  return rank;
#else
  return 0;
#endif
}

int Comm::node_size() const {
#ifdef ORBIS_HAVE_MPI
  if (impl_->comm == MPI_COMM_NULL || !mpi_running()) return 1;
  MPI_Comm node = MPI_COMM_NULL;
  MPI_Comm_split_type(impl_->comm, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node);
  int size = 1;
  MPI_Comm_size(node, &size);
  MPI_Comm_free(&node);
  return size;
#else
  return 1;
#endif
}

bool Comm::active() const {
#ifdef ORBIS_HAVE_MPI
  return size_ == 1 || (impl_->comm != MPI_COMM_NULL && mpi_running());
#else
  return true;
#endif
}

Comm Comm::split(int colour, int key) const {
  auto impl = std::make_shared<Impl>();
#ifdef ORBIS_HAVE_MPI
  if (impl_->comm != MPI_COMM_NULL) {
    MPI_Comm_split(impl_->comm, colour, key, &impl->comm);
    impl->owned = true;
  }
#else
  (void)colour;
  (void)key;
#endif
  return Comm(impl);
}

void Comm::throw_if_any_failed(const std::string& message) const {
  const int first = min(message.empty() ? size_ : rank_);
  if (first == size_) return;
  std::string theirs = message;
  broadcast(theirs, first);
  if (!message.empty()) throw Error(message);
  throw Error(fmt::format("rank {}: {}", first, theirs));
}

const CommStats& Comm::stats() const { return impl_->stats; }
void Comm::reset_stats() const { impl_->stats = CommStats{}; }

std::intptr_t Comm::native_handle() const {
#ifdef ORBIS_HAVE_MPI
  static_assert(sizeof(MPI_Comm) <= sizeof(std::intptr_t), "MPI_Comm must fit an intptr_t");
  std::intptr_t out = 0;
  std::memcpy(&out, &impl_->comm, sizeof(MPI_Comm));
  return out;
#else
  return 0;
#endif
}

void Comm::barrier() const {
#ifdef ORBIS_HAVE_MPI
  if (size_ > 1) {
    Timed t(impl_->stats, 0);
    MPI_Barrier(impl_->comm);
  }
#endif
}

void Comm::idle_barrier() const {
#ifdef ORBIS_HAVE_MPI
  if (size_ > 1) {
    Timed t(impl_->stats, 0);
    MPI_Request request;
    MPI_Ibarrier(impl_->comm, &request);
    int done = 0;
    MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    while (!done) {
      std::this_thread::sleep_for(std::chrono::microseconds(200));
      MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    }
  }
#endif
}

void Comm::reduce_raw(void* data, std::size_t count, Type type, Op op) const {
  if (size_ == 1 || count == 0) return;
#ifdef ORBIS_HAVE_MPI
  static const MPI_Datatype types[] = {MPI_INT32_T, MPI_INT64_T, MPI_UINT64_T, MPI_FLOAT, MPI_DOUBLE, MPI_UINT32_T};
  static const MPI_Op ops[] = {MPI_SUM, MPI_MAX, MPI_MIN};
  static const std::size_t bytes[] = {4, 8, 8, 4, 8, 4};
  Timed t(impl_->stats, count * bytes[static_cast<int>(type)]);
  MPI_Allreduce(MPI_IN_PLACE, data, to_int(count, "a reduction"), types[static_cast<int>(type)],
                ops[static_cast<int>(op)], impl_->comm);
#else
  (void)data, (void)type, (void)op;
#endif
}

void Comm::exscan_raw(void* value, Type type) const {
  if (size_ == 1) return;
#ifdef ORBIS_HAVE_MPI
  static const MPI_Datatype types[] = {MPI_INT32_T, MPI_INT64_T, MPI_UINT64_T, MPI_FLOAT, MPI_DOUBLE, MPI_UINT32_T};
  Timed t(impl_->stats, 8);
  // MPI_Exscan leaves rank 0's result undefined; the caller sets it to zero.
  MPI_Exscan(MPI_IN_PLACE, value, 1, types[static_cast<int>(type)], MPI_SUM, impl_->comm);
#else
  (void)value, (void)type;
#endif
}

void Comm::allgather_raw(const void* send, void* recv, std::size_t bytes) const {
  if (size_ == 1) {
    std::memcpy(recv, send, bytes);
    return;
  }
#ifdef ORBIS_HAVE_MPI
  Timed t(impl_->stats, bytes * size_);
  MPI_Allgather(send, to_int(bytes, "a gathered value"), MPI_BYTE, recv, static_cast<int>(bytes), MPI_BYTE,
                impl_->comm);
#endif
}

void Comm::allgatherv_raw(const void* send, std::size_t count, const std::vector<std::size_t>& counts, void* recv,
                          std::size_t element) const {
  if (size_ == 1) {
    if (count) std::memcpy(recv, send, count * element);
    return;
  }
  (void)counts;
#ifdef ORBIS_HAVE_MPI
  Timed t(impl_->stats, count * element * size_);
  const ElementType type(element);
  std::vector<int> displacements;
  const std::vector<int> n = int_counts(counts, &displacements);
  MPI_Allgatherv(send, to_int(count, "a message"), type.get(), recv, n.data(), displacements.data(), type.get(),
                 impl_->comm);
#endif
}

void Comm::gatherv_raw(const void* send, std::size_t count, const std::vector<std::size_t>& counts, void* recv,
                       std::size_t element, int root) const {
  if (size_ == 1) {
    if (count) std::memcpy(recv, send, count * element);
    return;
  }
#ifdef ORBIS_HAVE_MPI
  Timed t(impl_->stats, count * element);
  const ElementType type(element);
  std::vector<int> displacements;
  const std::vector<int> n = int_counts(counts, &displacements);
  MPI_Gatherv(send, to_int(count, "a message"), type.get(), recv, n.data(), displacements.data(), type.get(), root,
              impl_->comm);
#else
  (void)counts, (void)root;
#endif
}

void Comm::broadcast_raw(void* data, std::size_t bytes, int root) const {
  if (size_ == 1 || bytes == 0) return;
#ifdef ORBIS_HAVE_MPI
  Timed t(impl_->stats, rank_ == root ? bytes : 0);
  MPI_Bcast(data, to_int(bytes, "a broadcast"), MPI_BYTE, root, impl_->comm);
#else
  (void)data, (void)root;
#endif
}

std::vector<std::size_t> Comm::alltoall_counts(const std::vector<std::size_t>& send_counts,
                                               std::size_t send_total) const {
  if (send_counts.size() != static_cast<std::size_t>(size_))
    fail("Comm::alltoallv: {} send counts for {} ranks", send_counts.size(), size_);
  if (total(send_counts) != send_total)
    fail("Comm::alltoallv: send counts add up to {}, the buffer holds {}", total(send_counts), send_total);
  std::vector<std::size_t> recv(size_);
  if (size_ == 1) {
    recv = send_counts;
    return recv;
  }
#ifdef ORBIS_HAVE_MPI
  static_assert(sizeof(std::size_t) == sizeof(std::uint64_t), "size_t travels as uint64");
  Timed t(impl_->stats, 8 * size_);
  MPI_Alltoall(send_counts.data(), 1, MPI_UINT64_T, recv.data(), 1, MPI_UINT64_T, impl_->comm);
#endif
  return recv;
}

void Comm::alltoallv_raw(const void* send, const std::vector<std::size_t>& send_counts, void* recv,
                         const std::vector<std::size_t>& recv_counts, std::size_t element) const {
  if (size_ == 1) {
    if (send_counts[0]) std::memcpy(recv, send, send_counts[0] * element);
    return;
  }
#ifdef ORBIS_HAVE_MPI
  std::uint64_t sent = 0;
  for (int r = 0; r < size_; ++r)
    if (r != rank_) sent += send_counts[r] * element;
  Timed t(impl_->stats, sent);
  const ElementType type(element);
  std::vector<int> send_displacements, recv_displacements;
  const std::vector<int> ns = int_counts(send_counts, &send_displacements);
  const std::vector<int> nr = int_counts(recv_counts, &recv_displacements);
  MPI_Alltoallv(send, ns.data(), send_displacements.data(), type.get(), recv, nr.data(), recv_displacements.data(),
                type.get(), impl_->comm);
#else
  (void)recv_counts;
#endif
}

}  // namespace orbis
