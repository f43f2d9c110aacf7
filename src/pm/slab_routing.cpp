#include "pm/slab_routing.hpp"

#include <limits>

#include "core/error.hpp"
#include "pm/fft_mesh.hpp"

namespace orbis {

void SlabRouting::route(const std::vector<Vec3d>& pos, double box_mpc_h, int n, Window window, const Comm& comm,
                        std::vector<Vec3d>& received) {
  comm_ = comm;
  routed_ = true;
  const int ranks = comm.size();
  const std::size_t count = pos.size();
  if (count >= std::numeric_limits<std::uint32_t>::max())
    fail("slab routing: {} particles on one rank; at most 2^32 - 1", count);
  std::vector<std::uint32_t> dest(count);
  send_counts_.assign(ranks, 0);
  const double cells_per_length = n / box_mpc_h;
  for (std::size_t i = 0; i < count; ++i) {
    const int plane = stencil_first_plane(pos[i].x, box_mpc_h, cells_per_length, window, n);
    dest[i] = static_cast<std::uint32_t>(slab_owner(plane, n, ranks));
    ++send_counts_[dest[i]];
  }
  // A stable counting sort by destination.
  std::vector<std::size_t> start(ranks, 0);
  for (int r = 1; r < ranks; ++r) start[r] = start[r - 1] + send_counts_[r - 1];
  order_.resize(count);
  buffer_.resize(count);
  for (std::size_t i = 0; i < count; ++i) {
    const std::size_t slot = start[dest[i]]++;
    order_[slot] = static_cast<std::uint32_t>(i);
    buffer_[slot] = pos[i];
  }
  received = comm.alltoallv(buffer_, send_counts_, &recv_counts_);
}

void SlabRouting::send_back(const std::vector<Vec3d>& values, std::vector<Vec3d>& out) const {
  if (!routed_) fail("SlabRouting::send_back before route");
  if (values.size() != Comm::total(recv_counts_))
    fail("SlabRouting::send_back: {} values for {} received particles", values.size(), Comm::total(recv_counts_));
  buffer_ = comm_.alltoallv(values, recv_counts_);
  out.resize(order_.size());
  for (std::size_t slot = 0; slot < order_.size(); ++slot) out[order_[slot]] = buffer_[slot];
}

}  // namespace orbis
