// The CUDA step engine: the state in device memory as structure-of-arrays blocks (x | y | z
// of positions, momenta and accelerations), every verb queued on one stream. Long-range
// forces from the cuFFT PM (gpu/pm_cuda.hpp), short-range forces from gpu/short_range_cuda
// (tree, walk, P2P and far field on the device, into the state's order): nothing crosses
// the bus during a step but a few counters. Over ranks (step_engine_cuda.hpp) the rank's
// particles, in the rank domains the host decides and the device applies; TreePM's PM from
// the device's positions (gpu/pm_cuda_ranks.hpp). Isolated systems ([gravity] boundary =
// "vacuum", one rank): no PM, the whole force from the short-range step with vacuum boundaries
// (Newtonian P2P and M2L, fmm/short_range.hpp), positions not wrapped; individual masses
// (Particles::masses) as weights m_i / m on the device, in the state's order, which one rank
// never permutes (no domains: the short-range step gathers them into its tree order and
// scatters the forces back), so the host keeps the masses and types as they were loaded.
#include "gpu/step_engine_cuda.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>

#include <fmt/format.h>

#include "analysis/fof.hpp"
#include "core/comm.hpp"
#include "core/error.hpp"
#include "core/gravity_mode.hpp"
#include "core/log.hpp"
#include "core/params.hpp"
#include "core/physical_units.hpp"
#include "core/timer.hpp"
#include "core/units.hpp"
#include "domain/node_domains.hpp"
#include "domain/rank_domains.hpp"
#include "fmm/p2p_cuda_factory.hpp"
#include "fmm/short_range.hpp"
#include "gpu/cuda_check.cuh"
#include "gpu/device_buffer.cuh"
#include "gpu/device_memory_plan.hpp"
#include "gpu/domain_update_cuda.cuh"
#include "gpu/fof_cuda.cuh"
#include "gpu/ghost_exchange_cuda.cuh"
#include "gpu/pair_energy_cuda.cuh"
#include "gpu/particle_kernels.cuh"
#include "gpu/pm_cuda.hpp"
#include "gpu/pm_cuda_ranks.hpp"
#include "gpu/pm_cuda_slabs.hpp"
#include "gpu/pool_phases.cuh"
#include "gpu/power_spectrum_cuda.cuh"
#include "gpu/power_spectrum_cuda_ranks.hpp"
#include "gpu/shared_gpu_memory.hpp"
#include "gpu/short_range_cuda.cuh"
#include "gpu/staged_copy.cuh"
#include "gpu/vacuum_potential_cuda.cuh"
#include "pm/pm_solver.hpp"
#include "tree/tree_reuse.hpp"

namespace orbis {

using gpu::DeviceArray;
using gpu::PinnedArray;

namespace {

// The particle mass a parameter file implies (as the host gravity solver): all matter in N^3
// equal particles; load() takes the particles' own.
double nominal_particle_mass(const Params& params) {
  const double box = params.get_real("box.size_mpc_h");
  const double n = static_cast<double>(params.get_int("box.particles_per_side"));
  return params.get_real("cosmology.omega_m") * units::rho_crit0 * box * box * box / (n * n * n);
}

double gib(std::size_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0); }

constexpr unsigned kThreads = 256;
unsigned grid_for(std::size_t n) { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }

// Over ranks, the forest's targets: 1 for the rank's own particles (the first n_own) with bin
// >= min_active_bin, 0 for the others and the ghosts (their owners compute their forces).
__global__ void target_mask_kernel(const std::uint8_t* bin, std::size_t n_own, std::size_t n, int min_active_bin,
                                   std::uint8_t* target) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  target[i] = i < n_own && bin[i] >= min_active_bin ? 1 : 0;
}

}  // namespace

struct CudaStepEngine::Impl {
  int device = 0;
  std::string name;
  cudaStream_t stream = nullptr;
  TreeReuseSettings tree_settings;   // [gpu] tree_rebuild_every, tree_max_refits
  TreeReusePolicy tree_policy;       // when the short-range step builds its tree (tree/tree_reuse.hpp)
  std::size_t max_chunk_tasks = 0;
  bool treepm = true;
  // Vacuum boundaries: the short-range step is the whole force (treepm stays true for it),
  // there is no PM, box is 0 (nothing wraps), and G is the [units] system's.
  bool vacuum = false;
  double g = units::G;
  PmSettings pm_settings;
  ShortRangeSettings sr;
  double memory_limit_gib = 0;
  double box = 0;
  bool short_double = false;   // short-range accelerations kept in double (double P2P)
  // ORBIS_STEP_DETAILS=1: a log line per force computation with the short-range step's
  // parts (step_details()), for profiling without a profiler.
  bool log_step_details =
      std::getenv("ORBIS_STEP_DETAILS") && std::strcmp(std::getenv("ORBIS_STEP_DETAILS"), "1") == 0;

  std::unique_ptr<gpu::DeviceShortRange> short_range;
  std::unique_ptr<CudaPmSolver> pm;
  std::size_t n = 0;
  double mass = 0;
  DeviceArray<double> pos, mom, acc_long;   // 3n each: x | y | z
  DeviceArray<double> own_staging;          // PM only: the transfers' device staging
  DeviceArray<float> acc_short_f;
  DeviceArray<double> acc_short_d;
  DeviceArray<std::uint64_t> id;
  DeviceArray<std::uint8_t> bin;
  // Vacuum boundaries with individual masses: each particle's weight m_i / mass (G mass being
  // the short range's g_mass), state order; the kernels take them where the masses matter
  // (P2P sources, multipoles, P2L, the pair sum of W, the total momentum). Without: empty.
  DeviceArray<double> weights;
  bool weighted = false;
  const double* weights_or_null() const { return weighted ? weights.data() : nullptr; }
  DeviceArray<double> kick_factors;
  DeviceArray<unsigned long long> reduction;
  DeviceArray<double> norm2_partial;   // total_momentum's block sums
  gpu::StagedCopy host_copy;   // the transfers' host side, through two page-locked chunks
  PinnedArray<double> host_factors;
  PinnedArray<unsigned long long> host_reduction;
  PinnedArray<double> host_partial;

  // The outputs' P(k) on the device (power_spectrum()): one rank's (its cuFFT plan kept), and
  // over ranks the meshes in x slabs over the ranks' GPUs (its cuFFT plans kept).
  std::unique_ptr<gpu::CudaPowerSpectrum> power;
  std::unique_ptr<gpu::CudaPowerSpectrumRanks> power_ranks;
  bool power_fallback_logged = false;

  // Over ranks (comm of more than one): the rank domains (TreePM), the host PM on x slabs,
  // and the short-range forest's arrays: its particles (own, then ghosts: x | y | z blocks
  // of n_sources), the target mask, and its accelerations before the targets' go to the state.
  Comm comm;
  bool ranks = false;
  bool loaded = false;
  std::optional<RankDomains> domains;
  std::unique_ptr<PmSolver> host_pm;       // the fallback: the host PM on x slabs
  std::unique_ptr<CudaPmRanks> pm_ranks;   // TreePM: the PM over ranks on the GPUs, particles and meshes
  std::optional<CudaPmRoutingCounts> pm_routing;   // its routing counts at the last domain update
  PhaseTimes pm_ranks_phases;              // its phases summed over the run (tree_summary())
  int domain_updates = 0;                  // over ranks: the updates and their wall time (tree_summary())
  double domain_update_seconds = 0;
  double work_since_update = 0;   // this rank's interactions since the last domain update
  bool domains_updated = false;   // since load(): the particles are in their domains
  std::size_t n_sources = 0;
  DeviceArray<double> sources;
  bool sources_current = false;   // sources hold the positions now (none drifted since they were refreshed)
  // The energy check's mesh term: asked of the next long-range pass (expect_potential_energy),
  // and that pass's value while the positions stay where it was computed (no drift since).
  bool mesh_energy_expected = false;
  std::optional<double> mesh_energy_now;
  std::optional<gpu::DeviceGhosts> ghosts;   // fills sources: the ghosts refreshed on the device
  DeviceArray<std::uint8_t> target;
  std::vector<Vec3d> host_acc_long;   // the host PM's

  Particles host;                      // particles(): valid while host_current
  // The loaded masses and types (empty: one mass, all type 1), which particles() returns in
  // the state's order: one rank never permutes its state (the vacuum engine's), and over
  // ranks (periodic) there are neither.
  std::vector<double> host_masses;
  std::vector<std::uint8_t> host_type;
  std::vector<Vec3d> host_acc;         // accelerations(): valid while acc_current
  bool host_current = false, acc_current = false;
  std::size_t planned = 0, peak = 0;
  std::size_t baseline = 0;   // device memory in use before the engine allocated any
  cudaEvent_t pm_events[2] = {};   // PM start, end

  const void* short_acc() const {
    return short_double ? static_cast<const void*>(acc_short_d.data()) : static_cast<const void*>(acc_short_f.data());
  }
  // The device side of the transfers (interleaved): TreePM borrows the short-range step's
  // tree-order accelerations, free between steps, so the outputs need no memory of their own.
  double* staging(std::size_t doubles) {
    if (short_range) return short_range->borrow_scratch(doubles);
    own_staging.ensure_exact(doubles);
    return own_staging.data();
  }
  double* staging() { return staging(3 * n); }
  // Interleaved host vectors <-> x | y | z device blocks, through the chunked page-locked
  // copies (gpu/staged_copy.cuh).
  void upload(const Vec3d* from, std::size_t count, double* to) {
    if (count == 0) return;
    double* staging = this->staging(3 * count);
    host_copy.to_device(staging, from, 3 * count * sizeof(double), stream);
    gpu::deinterleave(staging, count, to, stream);
    ORBIS_CUDA_CHECK(cudaStreamSynchronize(stream));   // the borrowed staging is free again
  }
  void upload(const std::vector<Vec3d>& from, double* to) { upload(from.data(), n, to); }
  void download_interleaved(const double* staging, std::vector<Vec3d>& to) {
    to.resize(n);
    if (n == 0) return;   // a rank may hold no particles
    host_copy.to_host(static_cast<void*>(to.data()), staging, 3 * n * sizeof(double), stream);
  }
  void download(const double* from, std::vector<Vec3d>& to) {
    double* staging = this->staging();
    gpu::interleave(from, n, staging, stream);
    download_interleaved(staging, to);
  }
  // The positions on the host are always wrapped into the box (outputs, checkpoints, the
  // domains): the device's may lie outside it since the last tree build (drift()).
  void download_positions(std::vector<Vec3d>& to) {
    double* staging = this->staging();
    gpu::interleave_positions(pos.data(), n, box, staging, stream);
    download_interleaved(staging, to);
  }
  // The same on the device, x | y | z in the borrowed staging (free between steps), for the
  // outputs that bin positions into cells (FoF, the energy check's pair sum).
  const double* wrapped_positions() {
    double* w = staging(3 * n);
    ORBIS_CUDA_CHECK(cudaMemcpyAsync(w, pos.data(), 3 * n * sizeof(double), cudaMemcpyDeviceToDevice, stream));
    gpu::wrap_positions(w, n, box, stream);
    return w;
  }
  static std::size_t used_now() {
    std::size_t free_bytes = 0, total_bytes = 0;
    ORBIS_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    return total_bytes - free_bytes;
  }
  // Over ranks, what the engine holds outside the device pool: the CUDA IPC exchanges'
  // exported buffers (the PM's transposes, the ghosts').
  std::size_t outside_pool_bytes() const {
    return (pm_ranks ? pm_ranks->outside_pool_bytes() : 0) +
           (ghosts && ghosts->transport() ? ghosts->transport()->device_bytes() : 0);
  }
  // The engine's device memory after a step (what the device has in use beyond what it had
  // before the engine), logged when it grows by a tenth.
  std::size_t note_memory() {
    const std::size_t now = used_now();
    std::size_t used = now > baseline ? now - baseline : 0;
    if (ranks) {
      // Ranks may share the GPU, whose use then counts theirs too: what this process's pool
      // reserved at most (the engine's arrays and the PM's slabs at their peak, with the
      // holes between them), and what the engine holds outside it (the CUDA IPC exchanges'
      // exported buffers).
      used = gpu::pool_reserved_most() + outside_pool_bytes();
    }
    if (used > peak + peak / 10)
      log::info("GPU memory held by the step engine: {:.2f} GiB ({:.0f} bytes per particle; planned {:.2f} GiB)", gib(used),
                static_cast<double>(used) / std::max<std::size_t>(n, 1), gib(planned));
    peak = std::max(peak, used);
    return used;
  }

  // The per-particle arrays for `count` particles: exactly that many on one rank (the count
  // never changes); over ranks 1/16 more when they grow (gpu::fit_particles), since migration
  // changes the count at every domain update. Contents are not kept (the callers fill them).
  void reserve_state(std::size_t count) {
    const auto fit = [&](auto& array, std::size_t per) { gpu::fit_particles(array, per, count, ranks); };
    fit(pos, 3);
    fit(mom, 3);
    fit(acc_long, 3);
    fit(id, 1);
    fit(bin, 1);
    if (short_double) fit(acc_short_d, 3);
    else fit(acc_short_f, 3);
  }

  // The whole state on the host (particles()).
  void bring_host_current() {
    if (host_current) return;
    download_positions(host.pos);
    download(mom.data(), host.mom);
    host.id.resize(n);
    host.time_bin.resize(n);
    if (n > 0) {
      ORBIS_CUDA_CHECK(cudaMemcpyAsync(host.id.data(), id.data(), n * sizeof(std::uint64_t), cudaMemcpyDeviceToHost,
                                       stream));
      ORBIS_CUDA_CHECK(cudaMemcpyAsync(host.time_bin.data(), bin.data(), n, cudaMemcpyDeviceToHost, stream));
    }
    ORBIS_CUDA_CHECK(cudaStreamSynchronize(stream));
    host.mass = mass;
    host.masses = host_masses;
    host.type = host_type;
    host_current = true;
  }

  // What a computation beside the steps (the outputs' P(k) and FoF, the energy check's W) may
  // take from the device for itself: the free memory, within what [gpu] memory_limit_gib
  // leaves (as cap_allocation()).
  std::size_t transient_available() const {
    std::size_t available = gpu::device_available_bytes();
    if (memory_limit_gib > 0) {
      const std::size_t limit = usable_device_memory(~std::size_t{0}, memory_limit_gib);
      const std::size_t now = used_now() - std::min(used_now(), gpu::pool_unused_bytes());
      const std::size_t used = now > baseline ? now - baseline : 0;
      available = std::min(available, limit > used ? limit - used : 0);
    }
    return available;
  }
  // The pool's reserved bytes, taken before such a computation: afterwards the pool is trimmed
  // back to them (cudaMemPoolTrimTo), so the steps hold what their plan says, not the
  // computation's high-water mark.
  static std::size_t pool_reserved() {
    std::uint64_t reserved = 0;
    ORBIS_CUDA_CHECK(cudaMemPoolGetAttribute(gpu::device_pool(), cudaMemPoolAttrReservedMemCurrent, &reserved));
    return static_cast<std::size_t>(reserved);
  }

  // Whether this long-range pass sums the energy check's mesh term too (a TreePM box's PM
  // alone has one); the expectation is used up either way.
  bool take_mesh_energy_expectation() {
    const bool wanted = mesh_energy_expected && treepm && !vacuum;
    mesh_energy_expected = false;
    return wanted;
  }

  // What [gpu] memory_limit_gib leaves for the short-range step's task chunks.
  void cap_allocation() {
    if (!(memory_limit_gib > 0)) return;
    const std::size_t limit = usable_device_memory(~std::size_t{0}, memory_limit_gib);
    // In use: what the device holds beyond the baseline less what the pool holds unused.
    const std::size_t now = used_now() - std::min(used_now(), gpu::pool_unused_bytes());
    const std::size_t used = now > baseline ? now - baseline : 0;
    short_range->set_allocation_cap(limit > used ? limit - used : 1);
  }

  void forces_over_ranks(bool long_range, int min_active_bin, ForceStats& stats);

  void log_ghost_times();
  std::string step_details() const;

  // The memory plan's input for `own` particles and a forest of `sources` (0: one rank).
  DeviceMemoryInput memory_input(std::size_t own, std::size_t sources) const {
    DeviceMemoryInput in;
    in.particles = own;
    in.sources = sources;
    in.short_range = treepm;
    in.settings = sr;
    in.short_acc_double = short_double;
    in.weights = weighted;
    if (vacuum) {
      // no PM
    } else if (!ranks) {
      const CudaPmMemory pm_memory = CudaPmSolver::plan_memory(pm_settings, own);
      in.pm_bytes = pm_memory.per_call();   // taken from the pool by each PM step
      in.pm_held_bytes = pm ? 0 : pm_memory.tables;          // a PM of an earlier load() stays
    } else if (pm_ranks) {
      // What it holds is allocated already: counted in the plan and given back to the free memory.
      in.pm_slab_bytes = pm_ranks->transient_bytes();
      // The PM's routing counts at the last domain update, with a quarter more for the drifts
      // until the next; before the first, every own particle leaving and as many arriving.
      const CudaPmRoutingCounts r = pm_routing ? *pm_routing : CudaPmRoutingCounts{own, own};
      in.pm_routing_bytes = CudaPmRanks::routing_bytes(r.leaving + r.leaving / 4, r.arriving + r.arriving / 4);
      in.pm_held_bytes = pm_ranks->held_bytes();
    }   // over ranks the host PM's cuFFT slabs are allocated already (free memory counts them)
    return in;
  }
  // Over ranks, after the domains or the ghosts changed: the plan for this rank's counts now
  // (load() checked the worst case the domains allow, 1.5 times the mean and a forest of
  // twice that), logged when it moves by a tenth; what the log's "planned" compares with.
  void replan_for_counts() {
    DeviceMemoryInput in = memory_input(n, n_sources);
    // The forest's leaves: its groups' subtrees' (a tree of all its particles has more).
    const std::vector<std::uint32_t>& groups = domains->group_offsets();
    for (std::size_t g = 0; g + 1 < groups.size(); ++g)
      in.forest_leaves += orb_tree_leaves(groups[g + 1] - groups[g], sr.max_leaf);
    const DeviceMemoryPlan plan = plan_device_memory(in);
    const std::size_t now = plan.total();
    if (now > planned_logged + planned_logged / 10 || now + now / 10 < planned_logged) {
      log::info("GPU memory plan for this rank's {} particles and {} ghosts now: {}", n,
                n_sources - std::min(n, n_sources), plan.describe());
      planned_logged = now;
    }
    planned = now;
  }
  std::size_t planned_logged = 0;   // the last plan replan_for_counts logged
};

CudaStepEngine::CudaStepEngine(const Params& params, int device, const Comm& comm) : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.device = device;
  m.comm = comm;
  m.ranks = comm.size() > 1;
  // Over ranks a failure on one rank (its device, a setting) is every rank's: the others
  // would wait for it in the PM's collectives.
  if (m.ranks) run_collectively(comm, [&] { setup(params); });
  else setup(params);
  if (!m.ranks) return;
  // Over ranks only a long-range step can build (update the domains: the particles migrate
  // with their state but not their forces, which a sub-step keeps for its inactive ones), so
  // sub-steps always refit: no limit on refits in a row.
  m.tree_settings.max_refits = 0;
  m.tree_policy = TreeReusePolicy(m.tree_settings);
  // TreePM: the long-range PM over ranks on the GPUs, particles' side and meshes
  // (gpu/pm_cuda_ranks.hpp); failing that, the host PM on x slabs (collective) with its
  // transforms on each rank's GPU where it can (the host engine's choice, gpu/pm_cuda_slabs.hpp).
  // The PM-only force's interlaced meshes stay on the host's x slabs.
  if (m.treepm) {
    m.domains.emplace(m.box, m.sr.max_leaf, m.sr.top_levels, comm);
    std::string why;
    m.pm_ranks = make_cuda_pm_ranks(m.pm_settings, comm, m.device, &why);
    if (m.pm_ranks) {
      log::info("PM: {}", m.pm_ranks->describe());
    } else {
      log::info("PM: the particle side on the host ({})", why);
      m.host_pm = std::make_unique<PmSolver>(m.pm_settings, comm);
      if (!use_cuda_pm_slabs(*m.host_pm, comm, m.device, &why))
        log::info("PM: host x slabs over {} ranks ({})", comm.size(), why);
    }
  } else {
    m.host_pm = std::make_unique<PmSolver>(m.pm_settings, comm);
    log::info("PM: host x slabs over {} ranks (the PM-only force's two interlaced meshes stay on the host)",
              comm.size());
  }
}

void CudaStepEngine::setup(const Params& params) {
  Impl& m = *impl_;
  std::string why;
  if (!cuda_device_usable(m.device, &why)) fail("[gpu] backend = \"cuda\", but {}", why);
  ORBIS_CUDA_CHECK(cudaSetDevice(m.device));
  cudaDeviceProp prop{};
  ORBIS_CUDA_CHECK(cudaGetDeviceProperties(&prop, m.device));
  m.name = prop.name;
  m.vacuum = !gravity_mode(params).periodic();
  if (m.vacuum && m.ranks)
    fail("{} = \"vacuum\" runs on one MPI rank (this run has {}): its particles are not spread over rank domains yet",
         params.describe("gravity.boundary"), m.comm.size());
  m.treepm = m.vacuum || params.get_string("gravity.solver") == "treepm";
  if (!m.vacuum) {
    m.pm_settings = PmSettings::from_params(params);
    m.box = params.get_real("box.size_mpc_h");
  }
  m.memory_limit_gib = params.get_real("gpu.memory_limit_gib");
  m.tree_settings = tree_reuse_settings(params);   // in vacuum a build after 4 refits unless given
  m.tree_policy = TreeReusePolicy(m.tree_settings);
  // How the ranks' device data moves (the ghosts, the PM's transposes): gpu/device_alltoallv.cuh.
  gpu::set_rank_exchange(gpu::parse_rank_exchange(params.get_string("gpu.rank_exchange"),
                                                  params.describe("gpu.rank_exchange")));
  if (m.vacuum) {
    m.sr = vacuum_short_range_settings(params);
    m.g = physical_units(params).g;
    ShortRangeSolver checked(m.sr);
    m.short_double = m.sr.p2p_double;
  } else if (m.treepm) {
    m.sr = short_range_settings(params, nominal_particle_mass(params));
    ShortRangeSolver checked(m.sr);   // every short-range check, before any work
    if (std::abs(m.pm_settings.r_s_mpc_h - m.sr.r_s) > 1e-12 * m.sr.r_s)
      fail("internal: PM and short-range split scales differ ({} vs {})", m.pm_settings.r_s_mpc_h, m.sr.r_s);
    m.short_double = m.sr.p2p_double;
  }
  ORBIS_CUDA_CHECK(cudaStreamCreateWithFlags(&m.stream, cudaStreamNonBlocking));
  for (cudaEvent_t& e : m.pm_events) ORBIS_CUDA_CHECK(cudaEventCreate(&e));
  // What the device pool kept from earlier work goes back first, so that the engine's use
  // (its pool's high-water mark included) is what it adds to this baseline.
  gpu::trim_device_pool();
  m.baseline = Impl::used_now();
  m.kick_factors.ensure(kMaxTimeBins);
  m.host_factors.ensure(kMaxTimeBins);
  m.reduction.ensure(kMaxTimeBins);   // one maximum, or the bin counts
  m.host_reduction.ensure(kMaxTimeBins);
}

CudaStepEngine::~CudaStepEngine() {
  if (!impl_) return;
  cudaSetDevice(impl_->device);
  if (impl_->stream) {
    cudaStreamSynchronize(impl_->stream);   // no throw from a destructor
    cudaStreamDestroy(impl_->stream);
  }

  for (cudaEvent_t e : impl_->pm_events)
    if (e) cudaEventDestroy(e);
  impl_.reset();
  // The pool keeps what the engine gave back: return it to the driver (no throw here).
  cudaMemPool_t pool = nullptr;
  int device = 0;
  if (cudaGetDevice(&device) == cudaSuccess && cudaDeviceGetDefaultMemPool(&pool, device) == cudaSuccess &&
      cudaDeviceSynchronize() == cudaSuccess)
    cudaMemPoolTrimTo(pool, 0);
}

std::string CudaStepEngine::describe() const {
  const Impl& m = *impl_;
  const std::string refit_limit =
      m.tree_settings.max_refits > 0 ? fmt::format(" (at most {} refits in a row)", m.tree_settings.max_refits)
                                     : std::string();
  if (m.vacuum) {
    const auto& s = m.sr;
    return fmt::format("GPU step engine on {}: particles on the GPU; vacuum boundaries: {}, P2P {}; tree, walk, P2P "
                       "and far field on the GPU, Plummer softening {:.4g}, G = {:.6g}; the tree built afresh at least "
                       "every {} full steps, refitted between{}",
                       m.name,
                       s.theta == 0 ? std::string("direct summation (every pair in P2P)")
                                    : fmt::format("FMM theta = {}, p = {}, max_leaf = {}", s.theta, s.multipole_order,
                                                  s.max_leaf),
                       s.p2p_double ? "double" : "float", s.softening, m.g, m.tree_settings.rebuild_every,
                       refit_limit);
  }
  const auto& pm = m.pm_settings;
  const std::string pm_text = fmt::format("cuFFT PM {}^3 {} mesh ({})", pm.grid_side,
                                          pm.double_mesh ? "double" : "float", window_name(pm.window));
  if (!m.treepm && m.ranks)
    return fmt::format("GPU step engine on {} over {} ranks: each rank's particles on its GPU; PM {}^3 only, on the host "
                       "(host x slabs)", m.name, m.comm.size(), pm.grid_side);
  if (!m.treepm) return fmt::format("GPU step engine on {}: particles on the GPU; {} only", m.name, pm_text);
  const auto& s = m.sr;
  if (m.ranks)
    return fmt::format("GPU step engine on {} over {} ranks: each rank's particles on its GPU, in domains of the global "
                       "ORB tree's top nodes; TreePM: PM {}^3 {} mesh on {}, r_s = {:.4g} Mpc/h, r_cut = {:.4g} Mpc/h; "
                       "each rank's forest of own and ghost subtrees walked on its GPU (P2P {}, Taylor order {}; theta "
                       "= {}, p = {}, max_leaf = {}), softening {:.4g} Mpc/h; domains updated at the PM steps that build "
                       "the tree (at least every {}), the forest refitted between",
                       m.name, m.comm.size(), pm.grid_side, pm.double_mesh ? "double" : "float",
                       m.pm_ranks ? std::string("the GPUs (particles routed to x slabs on the device)")
                       : m.host_pm->slab_transform() ? m.host_pm->slab_transform()->describe()
                                                     : std::string("host x slabs"),
                       s.r_s, s.r_cut, s.p2p_double ? "double" : "float", s.taylor_order, s.theta, s.multipole_order,
                       s.max_leaf, s.softening, m.tree_settings.rebuild_every);
  return fmt::format("GPU step engine on {}: particles on the GPU; TreePM: {}, r_s = {:.4g} Mpc/h, r_cut = {:.4g} "
                     "Mpc/h; tree, walk, P2P ({}, Taylor order {}) and far field (theta = {}, p = {}, max_leaf = {}) "
                     "on the GPU, softening {:.4g} Mpc/h; the tree built afresh at least every {} PM steps, refitted "
                     "between{}",
                     m.name, pm_text, s.r_s, s.r_cut, s.p2p_double ? "double" : "float", s.taylor_order, s.theta,
                     s.multipole_order, s.max_leaf, s.softening, m.tree_settings.rebuild_every,
                     refit_limit);
}

double CudaStepEngine::softening() const { return impl_->treepm ? impl_->sr.softening : 0.0; }
std::string CudaStepEngine::device_name() const { return impl_->name; }
std::size_t CudaStepEngine::planned_device_bytes() const { return impl_->planned; }
std::size_t CudaStepEngine::peak_device_bytes() const { return impl_->peak; }

void CudaStepEngine::load(Particles particles) {
  Impl& m = *impl_;
  Stopwatch watch;   // the parts' times for ORBIS_STEP_DETAILS
  double part_end[5] = {};
  ORBIS_CUDA_CHECK(cudaSetDevice(m.device));
  const std::size_t n = particles.size();
  // Over ranks the plan is for the most particles the domains may give a rank (NodeDomains::
  // kMaxParticleShare times the mean) and for a forest of twice that (the ghosts, whole remote
  // top nodes within r_cut, measured at +60% to +100% of the own particles).
  std::size_t planned_own = n, planned_sources = 0;
  if (m.ranks) {
    const std::uint64_t total = m.comm.sum<std::uint64_t>(n);
    const double mean = static_cast<double>(total) / m.comm.size();
    planned_own = std::max(n, static_cast<std::size_t>(std::ceil(NodeDomains::kMaxParticleShare * mean)));
    planned_sources = m.treepm ? 2 * planned_own : 0;
  }
  DeviceMemoryPlan plan;
  m.weighted = !particles.masses.empty();   // the plan counts the weights (a periodic run refuses them below)
  const auto check = [&] {
    if (n == 0 && !m.ranks) fail("GPU step engine: no particles");
    if (particles.mom.size() != n || particles.id.size() != n)
      fail("GPU step engine: {} positions, {} momenta, {} ids", n, particles.mom.size(), particles.id.size());
    if (!particles.time_bin.empty() && particles.time_bin.size() != n)
      fail("GPU step engine: {} time bins for {} particles", particles.time_bin.size(), n);
    for (std::uint8_t b : particles.time_bin)
      if (b >= kMaxTimeBins) fail("GPU step engine: time bin {} (bins are 0..{})", b, kMaxTimeBins - 1);
    // Individual masses: isolated systems only (the periodic P2P kernels, the PM's mass
    // assignment and FoF assume one mass), each finite and >= 0, `mass` (their mean) > 0.
    if (!particles.masses.empty()) {
      if (!m.vacuum)
        fail("GPU step engine: the particles have individual masses, but a periodic run ([gravity] boundary = "
             "\"periodic\") assumes one mass (its PM, P2P kernels and FoF); individual masses need [gravity] "
             "boundary = \"vacuum\"");
      if (particles.masses.size() != n)
        fail("GPU step engine: {} masses for {} particles", particles.masses.size(), n);
      if (!(particles.mass > 0 && std::isfinite(particles.mass)))
        fail("GPU step engine: individual masses with a mean mass of {} (it must be their mean, > 0)", particles.mass);
      for (std::size_t i = 0; i < n; ++i)
        if (!(particles.masses[i] >= 0 && std::isfinite(particles.masses[i])))
          fail("GPU step engine: particle {} has mass {} (masses must be finite and >= 0)", particles.id[i],
               particles.masses[i]);
    }
    if (!particles.type.empty()) {
      if (particles.type.size() != n)
        fail("GPU step engine: {} particle types for {} particles", particles.type.size(), n);
      // Over ranks the particles migrate between the domains, which carry no types: only the
      // default (all type 1) is taken, as an empty list.
      if (m.ranks)
        for (std::uint8_t t : particles.type)
          if (t != 1)
            fail("GPU step engine over {} ranks: particle type {} (over ranks every particle must be of type 1, "
                 "dark matter)", m.comm.size(), t);
    }
    // The first bad position, found on every thread (one thread: 0.09 s at 16.7M).
    const auto bad = [&](const Vec3d& x) {
      if (m.vacuum) return !(std::isfinite(x.x) && std::isfinite(x.y) && std::isfinite(x.z));
      return !(x.x >= 0 && x.x < m.box && x.y >= 0 && x.y < m.box && x.z >= 0 && x.z < m.box);
    };
    std::size_t first_bad = n;
#pragma omp parallel for schedule(static) reduction(min : first_bad)
    for (std::size_t i = 0; i < n; ++i)
      if (bad(particles.pos[i])) first_bad = std::min(first_bad, i);
    if (first_bad < n) {
      const Vec3d& x = particles.pos[first_bad];
      if (m.vacuum) fail("GPU step engine: position ({}, {}, {}) is not finite", x.x, x.y, x.z);
      fail("GPU step engine: position ({}, {}, {}) outside [0, {}) Mpc/h", x.x, x.y, x.z, m.box);
    }

    // The counts that stay 32-bit and the memory plan, checked before anything is allocated
    // (the PM's routing planned for every own particle: these particles' counts are unknown).
    if (m.treepm)
      check_short_range_counts(m.ranks ? planned_sources : n, m.sr.max_leaf, ShortRangeGpu::walk_and_p2p);
    m.pm_routing.reset();
    plan = plan_device_memory(m.memory_input(planned_own, planned_sources));
    const std::size_t free_bytes = gpu::device_available_bytes() + (m.pm_ranks ? m.pm_ranks->device_bytes() : 0);
    check_device_memory(plan, usable_device_memory(free_bytes, m.memory_limit_gib), free_bytes, m.memory_limit_gib,
                        m.name);
  };
  // Over ranks a bad share or a plan that does not fit on one rank stops every rank.
  if (m.ranks) run_collectively(m.comm, check);
  else check();
  m.planned = plan.total();
  log::info("GPU memory plan on {}: {}", m.name, plan.describe());
  part_end[0] = watch.seconds();

  m.n = n;
  m.mass = particles.mass;
  m.loaded = true;
  m.sources_current = false;
  m.mesh_energy_now.reset();
  if (m.treepm) {
    m.sr.g_mass = m.g * particles.mass;
    m.short_range = std::make_unique<gpu::DeviceShortRange>(m.sr, m.device);
    m.tree_policy = TreeReusePolicy(m.tree_settings);   // a new tree, new counters
    m.short_range->set_max_chunk_tasks(m.max_chunk_tasks);
  }
  part_end[1] = watch.seconds();
  m.domains_updated = false;   // over ranks the first force computation puts the particles in their domains
  if (!m.pm && !m.ranks && !m.vacuum) m.pm = std::make_unique<CudaPmSolver>(m.pm_settings, m.device);
  part_end[2] = watch.seconds();
  m.reserve_state(n);
  part_end[3] = watch.seconds();
  m.upload(particles.pos, m.pos.data());
  m.upload(particles.mom, m.mom.data());
  if (m.weighted) {
    // w_i = m_i / mass: G mass is the kernels' constant, so G m_i = g_mass w_i (equal masses
    // of `mass` give w = 1 and the one-mass bits).
    std::vector<double> w(n);
    for (std::size_t i = 0; i < n; ++i) w[i] = particles.masses[i] / particles.mass;
    m.weights.ensure_exact(n);
    m.weights.upload(w.data(), n);
  } else {
    m.weights.release();
  }
  if (n > 0) {   // over ranks a rank may start with none
    ORBIS_CUDA_CHECK(cudaMemcpy(m.id.data(), particles.id.data(), n * sizeof(std::uint64_t), cudaMemcpyHostToDevice));
    if (particles.time_bin.size() == n)
      ORBIS_CUDA_CHECK(cudaMemcpy(m.bin.data(), particles.time_bin.data(), n, cudaMemcpyHostToDevice));
    else
      ORBIS_CUDA_CHECK(cudaMemset(m.bin.data(), 0, n));   // every particle in bin 0
    ORBIS_CUDA_CHECK(cudaMemset(m.acc_long.data(), 0, 3 * n * sizeof(double)));
    if (m.short_double) ORBIS_CUDA_CHECK(cudaMemset(m.acc_short_d.data(), 0, 3 * n * sizeof(double)));
    else ORBIS_CUDA_CHECK(cudaMemset(m.acc_short_f.data(), 0, 3 * n * sizeof(float)));
    // The memsets ran on the legacy default stream, which the engine's non-blocking stream
    // does not wait for.
    ORBIS_CUDA_CHECK(cudaDeviceSynchronize());
  }
  particles.time_bin.resize(n);   // all in bin 0 when it came empty, as on the device
  if (m.ranks) particles.type.clear();   // all type 1 (checked above)
  m.host_masses = particles.masses;
  m.host_type = particles.type;
  m.host = std::move(particles);   // the host copy is current until the state changes
  m.host_current = true;
  m.acc_current = false;
  part_end[4] = watch.seconds();
  if (m.log_step_details)
    log::info("step engine load: checks and plan {:.3f} s, short-range solver {:.3f} s, PM {:.3f} s, state arrays "
              "{:.3f} s, upload {:.3f} s", part_end[0], part_end[1] - part_end[0], part_end[2] - part_end[1],
              part_end[3] - part_end[2], part_end[4] - part_end[3]);
}

const Particles& CudaStepEngine::particles() {
  Impl& m = *impl_;
  if (m.host_current) return m.host;
  ORBIS_CUDA_CHECK(cudaSetDevice(m.device));
  m.bring_host_current();
  return m.host;
}

// The host copy is only a cache of the device's state: given away, not copied (0.4 s and a
// second GiB of host memory for 16.7M particles). The next particles() downloads afresh.
Particles CudaStepEngine::particles_copy() {
  Impl& m = *impl_;
  particles();
  Particles out = std::move(m.host);
  m.host = Particles{};
  m.host_current = false;
  return out;
}

// Taken only while the engine holds no host copy of its own (particles_copy gave it away):
// the next download fills these arrays, its particles' count being about theirs.
void CudaStepEngine::recycle(Particles spent) {
  Impl& m = *impl_;
  if (!m.host_current && m.host.pos.capacity() < spent.pos.capacity()) m.host = std::move(spent);
}

const std::vector<Vec3d>& CudaStepEngine::accelerations() {
  Impl& m = *impl_;
  if (m.acc_current) return m.host_acc;
  ORBIS_CUDA_CHECK(cudaSetDevice(m.device));
  double* staging = m.staging();
  if (m.short_double) gpu::interleave_sum(m.acc_long.data(), m.acc_short_d.data(), m.n, staging, m.stream);
  else gpu::interleave_sum(m.acc_long.data(), m.acc_short_f.data(), m.n, staging, m.stream);
  m.download_interleaved(staging, m.host_acc);
  m.acc_current = true;
  return m.host_acc;
}

void CudaStepEngine::compute_forces(bool long_range, int min_active_bin, ForceStats& stats) {
  Impl& m = *impl_;
  if (m.ranks) {
    if (!m.loaded) fail("GPU step engine: compute_forces() before load()");
    ORBIS_CUDA_CHECK(cudaSetDevice(m.device));
    return m.forces_over_ranks(long_range, min_active_bin, stats);
  }
  if (m.n == 0) fail("GPU step engine: compute_forces() before load()");
  ORBIS_CUDA_CHECK(cudaSetDevice(m.device));
  // Build or refit (tree/tree_reuse.hpp): decided at long-range steps from counters that a
  // build resets, so that a run and its restart from a checkpoint (written only where a
  // long-range step built: forces_from_fresh_tree) take the same decisions. A build wraps the
  // positions into the box first (drift() does not: see there).
  if (m.treepm && m.tree_policy.begin(long_range, m.short_range->has_tree(m.n)) != TreeBuild::none) {
    gpu::wrap_positions(m.pos.data(), m.n, m.box, m.stream);
    m.short_range->rebuild_next();
  }
  // The PM first, on the same stream (on a stream of its own beside the short-range step
  // it gained nothing: 0.160 s vs 0.159 s per 256^3 step on an H100, the device being busy).
  if (long_range && m.pm) {
    const std::size_t n = m.n;
    double mesh_energy = 0;
    const bool with_energy = m.take_mesh_energy_expectation();
    gpu::pool_phase("PM");
    ORBIS_CUDA_CHECK(cudaEventRecord(m.pm_events[0], m.stream));
    m.pm->accelerations(m.pos.data(), m.pos.data() + n, m.pos.data() + 2 * n, n, m.mass, m.acc_long.data(),
                        m.acc_long.data() + n, m.acc_long.data() + 2 * n, m.stream,
                        with_energy ? &mesh_energy : nullptr);
    ORBIS_CUDA_CHECK(cudaEventRecord(m.pm_events[1], m.stream));
    if (with_energy) m.mesh_energy_now = mesh_energy;
  }
  if (m.treepm) {
    m.cap_allocation();
    const std::uint8_t* bin = min_active_bin > 0 ? m.bin.data() : nullptr;
    const double* w = m.weights_or_null();   // individual masses (vacuum); null: one mass
    if (m.short_double)
      m.short_range->compute(m.pos.data(), m.n, bin, min_active_bin, m.acc_short_d.data(), m.stream, w);
    else m.short_range->compute(m.pos.data(), m.n, bin, min_active_bin, m.acc_short_f.data(), m.stream, w);
    const gpu::DeviceShortRangeStats s = m.short_range->stats();   // waits for the step
    m.tree_policy.end(min_active_bin <= 0, s.p2p_pairs);
    stats.times.add("tree", s.tree);
    stats.times.add("walk", s.walk + s.grouping);
    stats.times.add("p2p", s.p2p + s.scatter);
    stats.times.add("m2l", s.far_field);
    stats.p2p_interactions += s.p2p_interactions;
    stats.m2l_interactions += static_cast<double>(s.m2l_tasks);
    stats.p2p_where = fmt::format("cuda ({}, {}, particles on the GPU)", m.name, m.short_double ? "double" : "float");
  }
  gpu::pool_phase("between steps");
  ORBIS_CUDA_CHECK(cudaStreamSynchronize(m.stream));
  if (long_range && m.pm) {
    float ms = 0;
    ORBIS_CUDA_CHECK(cudaEventElapsedTime(&ms, m.pm_events[0], m.pm_events[1]));
    stats.times.add("pm", 1e-3 * ms);
  }
  stats.device_bytes = m.note_memory();
  if (m.log_step_details && m.treepm) log::info("short range: {}", m.step_details());
  m.acc_current = false;
}

// One line per PM step (rank 0's, summed over its refreshes since the last line, this PM
// step's included): where the ghost refreshes' time went (gpu/ghost_exchange_cuda.cuh,
// GhostTimes; ORBIS_TIME_GHOSTS=1 separates the parts with stream synchronisations).
void CudaStepEngine::Impl::log_ghost_times() {
  const gpu::GhostTimes t = ghosts->times();
  ghosts->reset_times();
  if (t.refreshes == 0) return;
  const gpu::ExchangeTimes& x = t.transport;
  const gpu::GhostTransport* transport = ghosts->transport();
  const bool ipc = transport && transport->peer_to_peer();
  const std::string parts =
      ipc ? fmt::format("IPC [fill {:.4f}, peer copies {:.4f}, mpi/barriers {:.4f}]", x.fill, x.peer, x.mpi)
          : fmt::format("staged [down {:.4f}, mpi {:.4f}, up {:.4f}]", x.down, x.mpi, x.up);
  log::info("ghost refreshes since the last PM step (rank 0: {}{}): {:.4f} s = {}boxes {:.4f} + plan {:.4f} (comm "
            "{:.4f}; {} re-choices: pair tests {:.4f}, new routes {:.4f}) + routes {:.4f} + {}transport {} + unpack "
            "{:.4f}; {:.1f} MB received from the other ranks",
            t.refreshes, ghosts->timed() ? ", parts timed apart" : "", t.total(),
            ghosts->timed() ? fmt::format("queued {:.4f} + ", t.queued) : std::string(), t.boxes, t.plan, t.plan_comm,
            t.rechoices, t.plan_tests, t.plan_routes, t.routes,
            ghosts->timed() ? fmt::format("pack {:.4f} + ", t.pack) : std::string(), parts, t.unpack,
            static_cast<double>(x.bytes) / 1e6);
}

// Over ranks (step_engine_cuda.hpp). The domains are updated with the state on the device
// (when the tree policy builds: gpu/domain_update_cuda.cuh), the ghosts refreshed from the
// device's positions (only the own groups' boxes and the ghosts' positions cross the bus), the
// PM computed from the device's positions
// (CudaPmRanks; the host PM's fallback at host positions); then the device's short-range step
// on the rank's forest.
void CudaStepEngine::Impl::forces_over_ranks(bool long_range, int min_active_bin, ForceStats& stats) {
  const double comm_before = comm.stats().seconds;
  Stopwatch domain_watch;
  // The tree policy decides as on one rank, from pair counts summed over the ranks, so every
  // rank decides the same: a long-range step that builds updates the domains (each group
  // then in the subtree order of its positions now: the serial tree's subtrees, built
  // afresh); the other steps keep them and refit the forest while the ghosts are the same
  // particles. The first force computation after load() always updates.
  TreeBuild why = TreeBuild::none;
  if (treepm) why = tree_policy.begin(long_range, domains_updated);
  const bool update = treepm && (!domains_updated || (long_range && why != TreeBuild::none));
  if (update) {
    gpu::pool_phase("domain update");
    // The forest's positions are filled anew by the ghost refresh after the update: given
    // back first, they make room for the update's arrays (the memory plan counts on it).
    sources.release();
    Stopwatch update_watch;
    // On the device (gpu/domain_update_cuda.cuh): only the top tree's decisions, the groups
    // and the migrants cross the bus; acc_long is its scratch, zeroed below.
    n = gpu::update_domains_cuda(*domains, work_since_update, gpu::DeviceParticleState{pos, mom, id, bin}, n, box,
                                 acc_long, stream);
    work_since_update = 0;
    reserve_state(n);
    if (n > 0) {
      // Forces of the particles in their new order: every one is computed below when all
      // are active (a PM step), as the host engine zeroes them.
      ORBIS_CUDA_CHECK(cudaMemsetAsync(acc_long.data(), 0, 3 * n * sizeof(double), stream));
      if (short_double) ORBIS_CUDA_CHECK(cudaMemsetAsync(acc_short_d.data(), 0, 3 * n * sizeof(double), stream));
      else ORBIS_CUDA_CHECK(cudaMemsetAsync(acc_short_f.data(), 0, 3 * n * sizeof(float), stream));
    }
    host_current = false;
    domains_updated = true;
    ++domain_updates;
    domain_update_seconds += update_watch.seconds();
  }
  if (long_range && !pm_ranks && !host_current) {
    download_positions(host.pos);   // for the host PM alone: the host state stays out of date
  }
  bool same = false;
  if (treepm) {
    // The forest's sources (own particles, then the ghosts) from the device's positions: only
    // the own groups' boxes and the ghosts' positions cross the bus (gpu/ghost_exchange_cuda.cuh).
    if (!ghosts) ghosts.emplace(comm);
    gpu::pool_phase("ghost refresh");
    n_sources = ghosts->refresh(*domains, pos.data(), n, sr.r_cut, sources,
                                [this](std::size_t doubles) { return staging(doubles); }, &same, stream);
    if (update && pm_ranks) pm_routing = pm_ranks->routing_counts(pos.data(), n, stream);   // collective
    if (update || !same) replan_for_counts();
    sources_current = true;
  }
  stats.times.add("domain", domain_watch.seconds());
  if (long_range && ghosts) log_ghost_times();
  if (long_range) {
    Stopwatch pm_watch;
    gpu::pool_phase("PM");
    const bool with_energy = take_mesh_energy_expectation();   // the same on every rank
    if (pm_ranks) {   // from the device's positions into acc_long (gpu/pm_cuda_ranks.hpp)
      double mesh_energy = 0;
      pm_ranks->accelerations(pos.data(), n, mass, acc_long.data(), stream, &pm_ranks_phases,
                              with_energy ? &mesh_energy : nullptr);
      if (with_energy) mesh_energy_now = mesh_energy;
    } else {
      host_pm->accelerations(host.pos, mass, host_acc_long);
      upload(host_acc_long.data(), n, acc_long.data());
    }
    stats.times.add("pm", pm_watch.seconds());
  }
  if (treepm) {
    std::uint64_t pairs = 0;
    // A rank that owns no top node has no short-range work; it still takes part in the PM
    // and the reductions.
    if (n_sources > 0) {
      cap_allocation();
      if (n_sources > target.capacity()) target.ensure_exact(n_sources + n_sources / 4);
      target_mask_kernel<<<grid_for(n_sources), kThreads, 0, stream>>>(bin.data(), n, n_sources, min_active_bin,
                                                                       target.data());
      ORBIS_CUDA_CHECK(cudaGetLastError());
      const bool refit = !update && why == TreeBuild::none && same;
      const std::vector<std::uint32_t>& groups = domains->group_offsets();
      // The targets are own particles, the forest's first n: their forces go straight into
      // the state's arrays.
      if (short_double)
        short_range->compute_forest(sources.data(), n_sources, groups, refit, target.data(), acc_short_d.data(), n,
                                    stream);
      else
        short_range->compute_forest(sources.data(), n_sources, groups, refit, target.data(), acc_short_f.data(), n,
                                    stream);
      const gpu::DeviceShortRangeStats s = short_range->stats();   // waits for the step
      stats.times.add("tree", s.tree);
      stats.times.add("walk", s.walk + s.grouping);
      stats.times.add("p2p", s.p2p + s.scatter);
      stats.times.add("m2l", s.far_field);
      stats.p2p_interactions += s.p2p_interactions;
      stats.m2l_interactions += static_cast<double>(s.m2l_tasks);
      work_since_update += s.p2p_interactions + static_cast<double>(s.m2l_tasks);
      pairs = s.p2p_pairs;
    }
    stats.p2p_where = fmt::format("cuda ({}, {}, particles on the GPU, {} ranks)", name,
                                  short_double ? "double" : "float", comm.size());
    tree_policy.end(min_active_bin <= 0, comm.sum<std::uint64_t>(pairs));
  }
  gpu::pool_phase("between steps");   // the outputs' and the energy check's (trimmed back after them)
  ORBIS_CUDA_CHECK(cudaStreamSynchronize(stream));
  stats.device_bytes = note_memory();
  if (log_step_details && treepm && n_sources > 0) log::info("short range (rank 0): {}", step_details());
  acc_current = false;
  stats.times.add("comm", comm.stats().seconds - comm_before);
}

void CudaStepEngine::kick(const KickPlan& plan) {
  Impl& m = *impl_;
  ORBIS_CUDA_CHECK(cudaSetDevice(m.device));
  // The previous kick's factors may still be in flight from host_factors.
  ORBIS_CUDA_CHECK(cudaStreamSynchronize(m.stream));
  std::copy(plan.short_range.begin(), plan.short_range.end(), m.host_factors.data());
  ORBIS_CUDA_CHECK(cudaMemcpyAsync(m.kick_factors.data(), m.host_factors.data(), kMaxTimeBins * sizeof(double),
                                   cudaMemcpyHostToDevice, m.stream));
  const int min_bin = m.treepm ? plan.min_active_bin : kMaxTimeBins;   // PM only: no short-range force
  if (m.short_double)
    gpu::kick_particles(m.mom.data(), m.acc_long.data(), plan.long_range, m.acc_short_d.data(), m.bin.data(), min_bin,
                        m.kick_factors.data(), m.n, m.stream);
  else
    gpu::kick_particles(m.mom.data(), m.acc_long.data(), plan.long_range, m.acc_short_f.data(), m.bin.data(), min_bin,
                        m.kick_factors.data(), m.n, m.stream);
  m.host_current = false;
}

// With a short-range tree the positions are not wrapped here but where the tree is built
// (compute_forces; over ranks at the domain update): a refitted tree then
// bounds each leaf by where its particles went, also across a face of the box, and a
// particle crossing a face no longer makes its leaf's box (and, over ranks, its top group's,
// which decides the ghosts) span the whole box. The walk and the kernels take positions
// relative to node centres and images from the centres, which stay within a few Mpc/h of
// the box; the PM's assignment wraps each position (cell_coordinate), and every copy that
// leaves the engine is wrapped (download_positions, wrapped_positions).
void CudaStepEngine::expect_potential_energy(bool expected) { impl_->mesh_energy_expected = expected; }

void CudaStepEngine::drift(double drift_factor) {
  Impl& m = *impl_;
  ORBIS_CUDA_CHECK(cudaSetDevice(m.device));
  gpu::drift_particles(m.pos.data(), m.mom.data(), drift_factor, m.treepm ? 0.0 : m.box, m.n, m.stream);
  m.sources_current = false;
  m.mesh_energy_now.reset();
  m.host_current = false;
}

bool CudaStepEngine::forces_from_fresh_tree() const { return impl_->tree_policy.last_long_range_fresh(); }
void CudaStepEngine::rebuild_tree_next() { impl_->tree_policy.request_rebuild(); }

std::string CudaStepEngine::tree_summary() const {
  const Impl& m = *impl_;
  if (!m.treepm) return std::string();
  // What the device pool held at most in each phase (rank 0's): the memory plan's phases.
  std::string memory = "; the device pool's most in use by phase" + std::string(m.ranks ? " (rank 0)" : "") + ": " +
                       gpu::pool_phases_summary();
  if (m.ranks)
    memory += fmt::format("; outside the pool {:.2f} GiB (the exchanges' exported buffers); at most {:.2f} GiB in all "
                          "({:.0f} bytes per own particle)",
                          gib(m.outside_pool_bytes()), gib(m.peak),
                          static_cast<double>(m.peak) / std::max<std::size_t>(m.n, 1));
  if (m.ranks) {
    // Where the PM over ranks' time went (rank 0's wall seconds, all PM steps).
    std::string pm;
    for (const auto& [phase, seconds] : m.pm_ranks_phases.all())
      pm += fmt::format("{}{} {:.2f} s", pm.empty() ? "" : ", ", phase, seconds);
    // Its device exchange (routing, ghost planes, transposes; the energy check's and the
    // P(k)'s transposes borrow it): how its time splits between the copies and the host's part.
    if (const gpu::DeviceAlltoallv* x = m.pm_ranks ? m.pm_ranks->peer_transposes() : nullptr) {
      const gpu::ExchangeTimes& t = x->times();
      pm += fmt::format(" (of its exchange's {} calls: fill {:.2f} s, peer copies {:.2f} s for {:.1f} GB received, "
                        "mpi/barriers {:.2f} s)",
                        t.calls, t.fill, t.peer, static_cast<double>(t.bytes) / 1e9, t.mpi);
    }
    return fmt::format("short range on each rank's GPU ({} ranks; the domains updated where the tree was built): {}; "
                       "{} domain updates in {:.2f} s (rank 0){}{}",
                       m.comm.size(), m.tree_policy.summary(), m.domain_updates,
                       m.domain_update_seconds,
                       pm.empty() ? std::string() : "; the PM over ranks by phase (rank 0): " + pm, memory);
  }
  return "short range on the GPU: " + m.tree_policy.summary() + memory;
}

void CudaStepEngine::set_tree_policy(const TreeReuseSettings& settings) {
  impl_->tree_settings = settings;
  impl_->tree_policy = TreeReusePolicy(settings);
}
bool CudaStepEngine::last_step_built_tree() const { return impl_->short_range && impl_->short_range->stats().rebuilt; }

void CudaStepEngine::set_max_chunk_tasks(std::size_t tasks) {
  impl_->max_chunk_tasks = tasks;
  if (impl_->short_range) impl_->short_range->set_max_chunk_tasks(tasks);
}

std::uint64_t CudaStepEngine::ghost_bus_bytes() const {
  return impl_->ghosts ? impl_->ghosts->traffic().total() : 0;
}

std::string CudaStepEngine::last_step_details() const { return impl_->step_details(); }

std::string CudaStepEngine::Impl::step_details() const {
  if (!short_range) return "no short-range step";
  const gpu::DeviceShortRangeStats s = short_range->stats();
  const bool built = s.rebuilt;
  return fmt::format("tree {:.2f} ms ({}: {} {:.2f}, {} {:.2f}, {} {:.2f}), walk {:.2f} ms (active flags {:.2f}, "
                     "node records {:.2f}; {} launches, {} reruns, widest frontier {}), grouping {:.2f} ms, P2P "
                     "{:.2f} ms ({} chunk{}), far field {:.2f} ms, scatter {:.2f} ms; {} of {} particles active, {} of "
                     "{} leaves; {} nodes, {} P2P "
                     "tasks, {} M2L tasks, {} leaf-cell pairs, {:.3e} pairs; {:.2f} GiB held by the short-range step",
                     1e3 * s.tree, built ? "built" : "refitted", built ? "sort" : "leaves", 1e3 * s.tree_parts[0],
                     built ? "splits" : "levels", 1e3 * s.tree_parts[1], built ? "finish" : "radii",
                     1e3 * s.tree_parts[2], 1e3 * s.walk,
                     1e3 * s.active_flags, 1e3 * s.walk_nodes, s.walk_launches, s.walk_reruns, s.walk_frontier,
                     1e3 * s.grouping,
                     1e3 * s.p2p, s.p2p_chunks, s.p2p_chunks == 1 ? "" : "s", 1e3 * s.far_field, 1e3 * s.scatter,
                     s.active_particles, s.particles, s.active_leaves, s.leaves, s.nodes,
                     s.p2p_tasks, s.m2l_tasks, s.leaf_cell_pairs, s.p2p_interactions,
                     gib(short_range->held_bytes()));
}

double CudaStepEngine::max_acceleration() {
  Impl& m = *impl_;
  ORBIS_CUDA_CHECK(cudaSetDevice(m.device));
  if (m.short_double) gpu::max_norm2_sum(m.acc_long.data(), m.acc_short_d.data(), m.n, m.reduction.data(), m.stream);
  else gpu::max_norm2_sum(m.acc_long.data(), m.acc_short_f.data(), m.n, m.reduction.data(), m.stream);
  ORBIS_CUDA_CHECK(cudaMemcpyAsync(m.host_reduction.data(), m.reduction.data(), sizeof(unsigned long long),
                                   cudaMemcpyDeviceToHost, m.stream));
  ORBIS_CUDA_CHECK(cudaStreamSynchronize(m.stream));
  double max2 = 0;
  std::memcpy(&max2, m.host_reduction.data(), sizeof(max2));
  if (m.ranks) max2 = m.comm.max(max2);   // exact: the same on every rank
  return std::sqrt(max2);
}

bool CudaStepEngine::has_short_range() const { return impl_->treepm; }

// The host engine's exact sum (core/exact_sum.hpp): the largest |p|^2, then the integers'
// sum, so both engines give the same bits.
double CudaStepEngine::rms_momentum() {
  Impl& m = *impl_;
  if (m.n == 0 && !m.ranks) return 0.0;
  ORBIS_CUDA_CHECK(cudaSetDevice(m.device));
  const auto fetch = [&m] {
    ORBIS_CUDA_CHECK(cudaMemcpyAsync(m.host_reduction.data(), m.reduction.data(), sizeof(unsigned long long),
                                     cudaMemcpyDeviceToHost, m.stream));
    ORBIS_CUDA_CHECK(cudaStreamSynchronize(m.stream));
    return m.host_reduction.data()[0];
  };
  if (m.ranks) {   // the host engine's steps: the count, the largest term and the integers summed over ranks
    const std::uint64_t total = m.comm.sum<std::uint64_t>(m.n);
    gpu::max_norm2(m.mom.data(), m.n, m.reduction.data(), m.stream);
    const unsigned long long bits = fetch();
    double largest = 0;
    std::memcpy(&largest, &bits, sizeof(largest));
    largest = m.comm.max(largest);
    if (total == 0 || largest == 0) return 0.0;
    const ExactSumScale scale = exact_sum_scale(largest, total);
    gpu::exact_norm2_sum(m.mom.data(), m.n, scale, m.reduction.data(), m.stream);
    const std::uint64_t sum = m.comm.sum<std::uint64_t>(fetch());
    return std::sqrt(exact_sum_value(sum, scale) / static_cast<double>(total));
  }
  gpu::max_norm2(m.mom.data(), m.n, m.reduction.data(), m.stream);
  const unsigned long long bits = fetch();
  double largest = 0;
  std::memcpy(&largest, &bits, sizeof(largest));
  if (largest == 0) return 0.0;
  const ExactSumScale scale = exact_sum_scale(largest, m.n);
  gpu::exact_norm2_sum(m.mom.data(), m.n, scale, m.reduction.data(), m.stream);
  return std::sqrt(exact_sum_value(fetch(), scale) / static_cast<double>(m.n));
}

// The host engine's blocks and order again, per component; with individual masses the sum of
// w_i p_i (w_i = m_i / mass), so that times the mass it is still the total momentum.
Vec3d CudaStepEngine::total_momentum() {
  Impl& m = *impl_;
  if (m.n == 0) {
    if (!m.ranks) return Vec3d{};
    Vec3d total{};   // a rank with no particles adds nothing, but takes part
    for (int d = 0; d < 3; ++d) total[d] = m.comm.sum(total[d]);
    return total;
  }
  ORBIS_CUDA_CHECK(cudaSetDevice(m.device));
  const std::size_t blocks = gpu::norm2_block_count(m.n);
  m.norm2_partial.ensure(3 * blocks);
  m.host_partial.ensure(3 * blocks);
  gpu::block_component_sums(m.mom.data(), m.n, m.norm2_partial.data(), m.stream, m.weights_or_null());
  ORBIS_CUDA_CHECK(cudaMemcpyAsync(m.host_partial.data(), m.norm2_partial.data(), 3 * blocks * sizeof(double),
                                   cudaMemcpyDeviceToHost, m.stream));
  ORBIS_CUDA_CHECK(cudaStreamSynchronize(m.stream));
  Vec3d total{};
  for (int d = 0; d < 3; ++d)
    for (std::size_t k = 0; k < blocks; ++k) total[d] += m.host_partial.data()[3 * k + d];
  if (m.ranks)   // the host engine's: each rank's ordered sum, then their sum
    for (int d = 0; d < 3; ++d) total[d] = m.comm.sum(total[d]);
  return total;
}

// W's terms from the device positions, in memory taken from the pool for the call alone (the
// pair sum's chaining mesh and sorted copy, then the PM's meshes, one after the other); when
// the device lacks it, nullopt (the energy check downloads the particles). Over ranks
// (collective: every rank takes the same way) the pair sum runs over the forest's sources,
// the own particles and the ghosts, which hold every other rank's particle within the
// force's cut of an own one (whole groups within 1.1 r_cut, the check's cut being the
// force's), each rank its share of the pairs (pair_energy.hpp's rule), summed over the ranks;
// the mesh term is the PM over ranks' (CudaPmRanks::potential_energy, the whole value on
// every rank). The sources are those of the last force computation, so the positions must not
// have moved since (sources_current; the check comes at a PM step's end, after its forces).
std::optional<PotentialEnergyTerms> CudaStepEngine::potential_energy_terms(const PotentialEnergyRequest& request) {
  Impl& m = *impl_;
  if (!m.treepm || m.vacuum) return std::nullopt;
  ORBIS_CUDA_CHECK(cudaSetDevice(m.device));
  const std::size_t count = m.ranks ? m.n_sources : m.n;
  std::size_t need = gpu::pair_potential_sum_device_bytes(count, request.box, request.cut);
  bool usable = m.ranks ? m.pm_ranks && m.sources_current && request.cut <= m.sr.r_cut : m.pm && m.n > 0;
  // The mesh term of the last force pass, where it summed it at these positions (the same
  // bits as the PM's potential_energy(); over ranks on every rank or none).
  const std::optional<double> mesh_now = m.mesh_energy_now;
  if (m.pm && !mesh_now) {
    const CudaPmMemory pm_memory = CudaPmSolver::plan_memory(m.pm_settings, m.n);
    need = std::max(need, pm_memory.per_call());
  }
  if (m.pm_ranks && !mesh_now) need = std::max(need, m.pm_ranks->transient_bytes() + 24 * m.n);
  const std::size_t available = usable ? m.transient_available() : 0;
  const bool fits = need + need / 16 <= available;
  if (m.ranks ? !m.comm.all(usable && fits) : !(usable && fits)) {
    if (usable)
      log::info("energy check: W from the host's copy of the particles (on the device it needs {:.2f} GiB, {:.2f} GiB "
                "free{})", gib(need), gib(available), m.ranks ? " on this rank, or another rank lacks it" : "");
    return std::nullopt;
  }
  const std::size_t reserved = Impl::pool_reserved();   // what the pool held for the steps before the check's arrays
  PairPotentialInput rule;
  rule.box = request.box;
  rule.r_s = request.r_s;
  rule.cut = request.cut;
  rule.softening = request.softening;
  rule.cut_shift = request.cut_shift;
  PotentialEnergyTerms terms;
  terms.mass = m.mass;
  terms.mesh_from_forces = mesh_now.has_value();
  Stopwatch watch;   // the two terms' wall times, for ORBIS_STEP_DETAILS
  double pair_seconds = 0;
  if (m.ranks) {
    rule.ghosts = m.n_sources - m.n;
    const double* s = m.sources.data();
    const double share = gpu::pair_potential_sum_device(s, s + m.n_sources, s + 2 * m.n_sources, m.n_sources, rule,
                                                        m.stream);
    terms.pair_sum = m.comm.sum(share);
    pair_seconds = watch.seconds();
    terms.mesh = mesh_now ? *mesh_now : m.pm_ranks->potential_energy(m.pos.data(), m.n, m.mass, m.stream);
    terms.count = m.comm.sum<std::uint64_t>(m.n);
  } else {
    const double* x = m.pos.data();   // both wrap as they read
    terms.pair_sum = gpu::pair_potential_sum_device(x, x + m.n, x + 2 * m.n, m.n, rule, m.stream);
    pair_seconds = watch.seconds();
    terms.mesh = mesh_now ? *mesh_now : m.pm->potential_energy(x, x + m.n, x + 2 * m.n, m.n, m.mass, m.stream);
    terms.count = m.n;
  }
  if (m.log_step_details)
    log::info("energy check's W on the GPU{}: pair sum {:.4f} s, mesh term {:.4f} s{}", m.ranks ? " (rank 0)" : "",
              pair_seconds, watch.seconds() - pair_seconds, mesh_now ? " (summed in the force pass)" : "");
  // As power_spectrum(): the pool gives back to the driver what the check took beyond the steps'.
  ORBIS_CUDA_CHECK(cudaStreamSynchronize(m.stream));
  gpu::trim_pool_to(reserved);
  return terms;
}

BinCounts CudaStepEngine::assign_bins(const BinRule& rule) {
  Impl& m = *impl_;
  BinCounts counts{};
  if (m.n == 0 && !m.ranks) return counts;
  ORBIS_CUDA_CHECK(cudaSetDevice(m.device));
  if (m.short_double)
    gpu::assign_bins(m.acc_long.data(), m.acc_short_d.data(), m.n, rule, m.bin.data(), m.reduction.data(), m.stream);
  else
    gpu::assign_bins(m.acc_long.data(), m.acc_short_f.data(), m.n, rule, m.bin.data(), m.reduction.data(), m.stream);
  ORBIS_CUDA_CHECK(cudaMemcpyAsync(m.host_reduction.data(), m.reduction.data(), kMaxTimeBins * sizeof(unsigned long long),
                                   cudaMemcpyDeviceToHost, m.stream));
  ORBIS_CUDA_CHECK(cudaStreamSynchronize(m.stream));
  for (int k = 0; k < kMaxTimeBins; ++k) counts[k] = m.host_reduction.data()[k];
  m.host_current = false;   // the bins changed
  if (m.ranks) m.comm.reduce(counts.data(), counts.size(), Comm::Op::sum);
  return counts;
}

// From the device positions, in memory taken from the pool for the call alone and trimmed
// back afterwards; when the device lacks it, nullopt (the output measures P(k) on the host),
// said once. Over ranks collectively, the meshes in x slabs over the ranks' GPUs
// (gpu/power_spectrum_cuda_ranks.hpp): the memory checked on every rank first (the estimate
// counts the particles routed to a rank as many as its own; the estimator checks again once
// they are routed; ranks on one GPU share its free memory), nullopt on every rank when any
// rank's device lacks it.
std::optional<PowerSpectrum> CudaStepEngine::power_spectrum(const PowerSpectrumSettings& settings) {
  Impl& m = *impl_;
  if (m.vacuum) return std::nullopt;
  if (m.ranks ? m.comm.sum<std::uint64_t>(m.n) == 0 : m.n == 0) return std::nullopt;
  ORBIS_CUDA_CHECK(cudaSetDevice(m.device));
  std::size_t need = 0;
  if (m.ranks) {
    if (!m.power_ranks) m.power_ranks = std::make_unique<gpu::CudaPowerSpectrumRanks>(m.comm, m.device);
    need = m.power_ranks->device_bytes(m.n, m.box, settings);
  } else {
    if (!m.power) m.power = std::make_unique<gpu::CudaPowerSpectrum>();
    need = m.power->device_bytes(m.n, settings);
  }
  const std::size_t available = m.transient_available();
  bool fits = need + need / 16 <= available;
  // Over ranks every rank's answer, the asks of ranks that share a GPU counted together.
  if (m.ranks) {
    const bool shared = gpu::fits_on_gpus(m.comm, m.device, need + need / 16);
    fits = m.comm.all(fits) && shared;
  }
  if (!fits) {
    const std::size_t most = m.ranks ? m.comm.max<std::uint64_t>(need) : need;
    const std::size_t least = m.ranks ? m.comm.min<std::uint64_t>(available) : available;
    if (!m.power_fallback_logged)
      log::info("P(k) on the host: the device estimator needs {:.2f} GiB{}, {:.2f} GiB free", gib(most),
                m.ranks ? fmt::format(" a rank over {} ranks (at most)", m.comm.size()) : std::string(), gib(least));
    m.power_fallback_logged = true;
    return std::nullopt;
  }
  const std::size_t reserved = Impl::pool_reserved();   // what the pool held for the steps before the meshes
  std::optional<PowerSpectrum> result;
  if (m.ranks) {
    result = m.power_ranks->measure(m.pos.data(), m.n, m.box, settings, m.stream,
                                    m.pm_ranks ? m.pm_ranks->peer_transposes() : nullptr);
    if (result) {
      log::info("P(k) on the GPUs over {} ranks: {}", m.comm.size(), m.power_ranks->last_phases());
    } else {
      if (!m.power_fallback_logged)
        log::info("P(k) on the host: its meshes over {} ranks do not fit a rank's GPU once the particles are routed",
                  m.comm.size());
      m.power_fallback_logged = true;
    }
  } else {
    result = m.power->measure(m.pos.data(), m.pos.data() + m.n, m.pos.data() + 2 * m.n, m.n, m.box, settings,
                              m.stream);
  }
  // The pool keeps what is freed: the meshes (3 GiB at 512^3 on one GPU) go back to the
  // driver, so the steps hold what their plan says, not the output's high-water mark.
  ORBIS_CUDA_CHECK(cudaStreamSynchronize(m.stream));
  gpu::trim_pool_to(reserved);
  return result;
}

std::optional<std::vector<double>> CudaStepEngine::softened_potentials() {
  Impl& m = *impl_;
  if (!m.vacuum || m.n == 0) return std::nullopt;
  ORBIS_CUDA_CHECK(cudaSetDevice(m.device));
  // The device's order is particles()'s (it downloads them in that order).
  return gpu::softened_potentials(m.pos.data(), m.pos.data() + m.n, m.pos.data() + 2 * m.n, m.n, m.sr.softening,
                                  m.stream, m.weights_or_null());
}

bool CudaStepEngine::sums_potentials() const { return impl_->vacuum; }

// One rank: linked on the device, in memory taken from the pool for the call alone and given
// back at its end, as power_spectrum()'s; when the device lacks it, nullopt (the output links
// the groups on the host).
std::optional<std::vector<std::uint32_t>> CudaStepEngine::fof_labels(double linking_length_over_spacing) {
  Impl& m = *impl_;
  if (m.ranks || m.vacuum || m.n == 0) return std::nullopt;
  ORBIS_CUDA_CHECK(cudaSetDevice(m.device));
  const double link = fof::linking_length(m.n, m.box, linking_length_over_spacing);
  const std::size_t need = gpu::fof_device_bytes(m.n, m.box, link);
  const std::size_t available = m.transient_available();
  if (need + need / 16 > available) {
    log::info("FoF on the host: the device linker needs {:.2f} GiB, {:.2f} GiB free", gib(need), gib(available));
    return std::nullopt;
  }
  const std::size_t reserved = Impl::pool_reserved();   // what the pool held for the steps before the linker's arrays
  const double* x = m.wrapped_positions();
  std::vector<std::uint32_t> labels = gpu::fof_labels(x, x + m.n, x + 2 * m.n, m.n, m.box, link, m.stream);
  ORBIS_CUDA_CHECK(cudaStreamSynchronize(m.stream));
  gpu::trim_pool_to(reserved);
  return labels;
}

bool CudaStepEngine::links_fof_with_ghosts() const { return impl_->ranks && !impl_->vacuum; }

// Over ranks: this rank's particles from the device positions (wrapped into the box as they
// are copied: they may have drifted out of it) and the ghosts uploaded, linked on the GPU in
// memory taken from the pool for the call alone and given back at its end, as fof_labels();
// when the device lacks it, nullopt (the output's thread links them on the host).
std::optional<std::vector<std::uint32_t>> CudaStepEngine::fof_labels_with_ghosts(const std::vector<Vec3d>& ghosts,
                                                                                double link_mpc_h) {
  Impl& m = *impl_;
  if (!m.ranks || m.vacuum) return std::nullopt;
  const std::size_t total = m.n + ghosts.size();
  if (total == 0) return std::vector<std::uint32_t>{};
  if (total >= UINT32_MAX) {
    log::info("FoF on the host: {} particles and ghosts on a rank, the device linker takes at most 2^32 - 2", total);
    return std::nullopt;
  }
  ORBIS_CUDA_CHECK(cudaSetDevice(m.device));
  const std::size_t need = gpu::fof_with_ghosts_device_bytes(m.n, ghosts.size(), m.box, link_mpc_h);
  const std::size_t available = m.transient_available();
  if (need + need / 16 > available) {
    log::info("FoF on the host: the device linker needs {:.2f} GiB for {} particles and {} ghosts, {:.2f} GiB free",
              gib(need), m.n, ghosts.size(), gib(available));
    return std::nullopt;
  }
  const std::size_t reserved = Impl::pool_reserved();   // what the pool held for the steps before the linker's arrays
  std::vector<std::uint32_t> labels =
      gpu::fof_labels_with_ghosts(m.pos.data(), m.pos.data() + m.n, m.pos.data() + 2 * m.n, m.n, ghosts.data(),
                                  ghosts.size(), m.box, link_mpc_h, m.stream);
  ORBIS_CUDA_CHECK(cudaStreamSynchronize(m.stream));
  gpu::trim_pool_to(reserved);
  return labels;
}

std::string CudaStepEngine::domain_state() const { return impl_->domains ? impl_->domains->state() : std::string(); }

void CudaStepEngine::restore_domain_state(const std::string& state, const std::string& what) {
  Impl& m = *impl_;
  if (!m.domains) return StepEngine::restore_domain_state(state, what);
  m.domains->restore(state, what);
  m.work_since_update = 0;
}

std::unique_ptr<StepEngine> make_cuda_step_engine(const Params& params, int device, const Comm& comm) {
  return std::make_unique<CudaStepEngine>(params, device, comm);
}

}  // namespace orbis
