// The CUDA step engine's ghosts over ranks (issue #29), refreshed on the device: only the
// ghosts' own bytes cross the bus.
//
// At each force computation the own top-tree groups' boxes are computed on the device (a
// segmented min/max over the groups of RankDomains::own_offsets(): exact, so the same bits
// as RankDomains::with_ghosts' host loop) and only they come down (48 bytes a group);
// RankDomains::plan_ghosts decides from them whether the ghost choice stands, or chooses
// again (domain/rank_domains.hpp: the same decision and routes as with_ghosts, one
// implementation). The routes' send list goes up once per choice; at each refresh a kernel
// packs the sent own positions (by destination rank, in the routes' order) into one device
// buffer, the transport moves them to the other ranks, and a kernel writes the received ghosts
// into the forest's sources (x | y | z blocks of n_sources) after the own particles, which
// are copied on the device. The result is with_ghosts()'s, bit for bit.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include "core/comm.hpp"
#include "core/vec3.hpp"
#include "domain/rank_domains.hpp"
#include "gpu/device_alltoallv.cuh"
#include "gpu/device_buffer.cuh"

namespace orbis::gpu {

// How the packed ghost positions go from this rank's device to the others' devices: a
// DeviceAlltoallv (gpu/device_alltoallv.cuh: staged through pinned host memory and MPI, or
// CUDA IPC between the ranks of one node); a CUDA-aware MPI would be another implementation.
class GhostTransport {
 public:
  virtual ~GhostTransport() = default;
  // Collective. send: on the device, sum(send_counts) positions (3 doubles each, x y z),
  // send_counts[r] of them for rank r, in rank order; recv: on the device, room for
  // sum(recv_counts), where rank r's recv_counts[r] arrive, in rank order (the two buffers
  // do not overlap). Work queued on `stream` before the call has written send; work queued
  // after it sees recv.
  virtual void exchange(const double* send, const std::vector<std::size_t>& send_counts, double* recv,
                        const std::vector<std::size_t>& recv_counts, cudaStream_t stream) = 0;
  virtual std::string describe() const = 0;
  // Collective: device room for `doubles` that the next exchange's send may be packed into
  // (it then copies nothing); null: pack anywhere.
  virtual double* send_buffer(std::size_t doubles) { (void)doubles; return nullptr; }
  // The exchange underneath (its times), or null.
  virtual DeviceAlltoallv* alltoallv() { return nullptr; }
  // Device to device (CUDA IPC): the positions do not cross this rank's bus.
  virtual bool peer_to_peer() const { return false; }
  // Device memory it holds outside the pool (CUDA IPC: the exported send buffer).
  virtual std::size_t device_bytes() const { return 0; }
};

// The positions through a DeviceAlltoallv (24 bytes an element).
class AlltoallvGhostTransport : public GhostTransport {
 public:
  explicit AlltoallvGhostTransport(std::unique_ptr<DeviceAlltoallv> exchange) : exchange_(std::move(exchange)) {}
  void exchange(const double* send, const std::vector<std::size_t>& send_counts, double* recv,
                const std::vector<std::size_t>& recv_counts, cudaStream_t stream) override {
    exchange_->exchange(send, send_counts, recv, recv_counts, 3 * sizeof(double), stream);
  }
  std::string describe() const override { return exchange_->describe(); }
  double* send_buffer(std::size_t doubles) override {
    return static_cast<double*>(exchange_->send_buffer(doubles * sizeof(double)));
  }
  DeviceAlltoallv* alltoallv() override { return exchange_.get(); }
  bool peer_to_peer() const override { return exchange_->peer_to_peer(); }
  std::size_t device_bytes() const override { return exchange_->device_bytes(); }

 private:
  std::unique_ptr<DeviceAlltoallv> exchange_;
};

// Through pinned host memory and the communicator's alltoallv with known counts: one copy
// down, the exchange between the ranks, one copy up.
class StagedGhostTransport final : public AlltoallvGhostTransport {
 public:
  explicit StagedGhostTransport(const Comm& comm) : AlltoallvGhostTransport(std::make_unique<StagedAlltoallv>(comm)) {}
};

// Where a rank's ghost refreshes spent their time (wall seconds, summed over the refreshes
// since the last reset). Without ORBIS_TIME_GHOSTS=1 only the synchronisations that are there
// anyway separate the parts: `boxes` then includes the work queued on the stream before the
// refresh (the drift, the kick), the pack ends in the transport's first part (staged: down;
// IPC: fill) and the unpack with the staged copy up in `unpack`. With ORBIS_TIME_GHOSTS=1
// the stream is synchronised between the parts (a little slower): `queued` holds the wait
// for the earlier work and each part is its own.
struct GhostTimes {
  double queued = 0;     // (timed) the stream's earlier work, waited for before the boxes
  double boxes = 0;      // the own groups' boxes: kernel and download
  double plan = 0;       // RankDomains::plan_ghosts (the decision; the routes at a choice)
  double plan_comm = 0;  //   of which inside the communicator's collectives
  double plan_tests = 0;   //   of which the pairs' tests (at a re-choice)
  double plan_routes = 0;  //   of which the routes rebuilt (a pair changed)
  std::uint64_t rechoices = 0;   // refreshes that tested pairs again
  double routes = 0;     // the send list uploaded (at a choice only)
  double pack = 0;       // (timed) the own particles copied and the sent ones packed
  ExchangeTimes transport;   // the exchange's parts (gpu/device_alltoallv.cuh)
  double unpack = 0;     // the ghosts written into the sources, to the end of the refresh
  std::uint64_t refreshes = 0;
  double total() const { return queued + boxes + plan + routes + pack + transport.fill + transport.down +
                                transport.mpi + transport.up + transport.peer + unpack; }
};

// Bytes that crossed this rank's bus (PCIe or the like) at the last refresh.
struct GhostTraffic {
  std::uint64_t boxes_down = 0;       // the own groups' boxes: 6 doubles a group
  std::uint64_t positions_down = 0;   // the ghosts this rank sends (24 bytes each; staged transport)
  std::uint64_t positions_up = 0;     // the ghosts it receives (24 bytes each; staged transport)
  std::uint64_t routes_up = 0;        // the send list (4 bytes a sent particle; at a choice only)
  std::uint64_t total() const { return boxes_down + positions_down + positions_up + routes_up; }
};

// Each own group's tight box (lo then hi, 6 doubles a group, into `boxes` on the device) of
// the particles pos (x | y | z blocks of n), group g = [offsets[g], offsets[g + 1]) (device
// array of groups + 1); an empty group's is lo = +inf, hi = -inf.
void own_group_boxes(const double* pos, std::size_t n, const std::uint32_t* offsets, std::size_t groups,
                     double* boxes, cudaStream_t stream);

class DeviceGhosts {
 public:
  // transport: null for the one of [gpu] rank_exchange (make_device_alltoallv, chosen
  // collectively at the first refresh: CUDA IPC on one node, else staged). ORBIS_TIME_GHOSTS=1
  // in the environment: the parts of each refresh timed apart (GhostTimes).
  explicit DeviceGhosts(const Comm& comm, std::unique_ptr<GhostTransport> transport = nullptr);

  // Collective, several ranks, after domains.update() (the particles in its order, moved
  // since). pos: the rank's particles on the device (x | y | z blocks of n). Fills `sources`
  // (grown as needed) with RankDomains::with_ghosts()'s result at these positions, as x | y |
  // z blocks of the returned count (own particles first, then the ghosts), and sets the
  // domains' group_offsets(), groups() and report(). *same_set: the ghosts are the last
  // call's (the forest may be refitted). scratch(doubles): device memory the packed ghosts
  // may use during the call (the engine lends its staging). Waits for the stream.
  std::size_t refresh(RankDomains& domains, const double* pos, std::size_t n, double r_cut,
                      DeviceArray<double>& sources, const std::function<double*(std::size_t)>& scratch,
                      bool* same_set, cudaStream_t stream);

  const GhostTraffic& traffic() const { return traffic_; }
  // The own groups' boxes of the last refresh, as they came down.
  const std::vector<Vec3d>& own_lo() const { return lo_; }
  const std::vector<Vec3d>& own_hi() const { return hi_; }
  // Null before the first refresh when the transport is chosen there.
  const GhostTransport* transport() const { return transport_.get(); }
  // The parts' times summed since the last reset_times(), the transport's included.
  GhostTimes times() const;
  void reset_times();
  bool timed() const { return timed_; }

 private:
  Comm comm_;
  std::unique_ptr<GhostTransport> transport_;
  std::vector<std::uint32_t> offsets_host_;   // own_offsets() as last uploaded
  DeviceArray<std::uint32_t> offsets_;
  DeviceArray<double> boxes_;
  PinnedArray<double> host_boxes_;
  DeviceArray<std::uint32_t> sent_;           // the routes' send list, uploaded at each choice
  bool sent_current_ = false;
  std::vector<Vec3d> lo_, hi_;
  GhostTraffic traffic_;
  GhostTimes times_;   // the transport's apart: transport_->alltoallv()->times()
  bool timed_ = false;
};

}  // namespace orbis::gpu
