#include "integrate/pm_mesh_choice.hpp"

#include <cmath>

#include <fmt/format.h>

#include "core/params.hpp"
#include "domain/node_domains.hpp"
#include "fmm/p2p.hpp"
#include "fmm/short_range.hpp"
#include "pm/pm_solver.hpp"
#if defined(ORBIS_HAVE_CUDA)
#include "fmm/p2p_cuda_factory.hpp"
#include "gpu/device_memory_plan.hpp"
#include "gpu/pm_cuda.hpp"
#include "gpu/pm_cuda_ranks.hpp"
#include "gpu/shared_gpu_memory.hpp"
#endif

namespace orbis {
namespace {

bool seven_smooth(long long n) {
  for (long long p : {2, 3, 5, 7})
    while (n % p == 0) n /= p;
  return n == 1;
}

}  // namespace

PmMeshChoice choose_pm_grid_side(const Params& params, const Comm& comm) {
  const auto set = static_cast<int>(params.get_int("gravity.pm_grid_side"));
  if (set > 0) return {set, "as set"};
  const auto side = static_cast<int>(params.get_int("box.particles_per_side"));
  PmMeshChoice two{2 * side, ""};
  const auto why_two = [&](const std::string& why) {
    two.why = "2 x particles_per_side: " + why;
    return two;
  };
  if (params.get_string("gravity.solver") != "treepm") return why_two("PM only");
  if (params.get_string("gpu.backend") == "cpu") return why_two("the host engine ([gpu] backend = \"cpu\")");
  const long long three = 3LL * side;
  if (three % 2 != 0 || !seven_smooth(three)) return why_two(fmt::format("3N = {} is not an even 7-smooth size", three));
#if defined(ORBIS_HAVE_CUDA)
  const int device = gpu_device_for_rank(params.get_int("gpu.device"), comm);
  std::string why;
  const bool usable = cuda_device_usable(device, &why);
  // Over ranks every rank takes the same mesh: the CUDA engine runs on all ranks or on none
  // (step_engine_factory.cpp), and the plan must fit every rank's GPU, ranks sharing one
  // counted together.
  if (comm.size() > 1 ? !comm.all(usable) : !usable)
    return why_two(comm.size() > 1 ? "a rank without a usable GPU" : "no usable GPU (" + why + ")");
  // The device memory plan of the CUDA step engine (its load()'s) with the 3N mesh.
  Params with_three = params;
  with_three.set("gravity.pm_grid_side", ParamValue(static_cast<std::int64_t>(three)));
  const PmSettings pm = PmSettings::from_params(with_three);
  const auto n = static_cast<std::size_t>(side) * side * side;
  DeviceMemoryInput in;
  in.settings = short_range_settings(with_three, 1.0);
  in.short_acc_double = in.settings.p2p_double;
  if (comm.size() == 1) {
    in.particles = n;
    const CudaPmMemory pm_memory = CudaPmSolver::plan_memory(pm, n);
    in.pm_bytes = pm_memory.per_call();
    in.pm_held_bytes = pm_memory.tables;
  } else {   // the most particles the domains give a rank, a forest of twice that, the PM over ranks
    const double mean = static_cast<double>(n) / comm.size();
    in.particles = static_cast<std::size_t>(std::ceil(NodeDomains::kMaxParticleShare * mean));
    in.sources = 2 * in.particles;
    in.pm_slab_bytes = CudaPmRanks::planned_transient_bytes(pm, comm.size(), comm.rank());
    in.pm_routing_bytes = CudaPmRanks::routing_bytes(in.particles, in.particles);   // every one leaves, as many arrive
  }
  const std::size_t need = plan_device_memory(in).total(), ask = need + need / 10;
  const double limit_gib = params.get_real("gpu.memory_limit_gib");
  const bool fits = comm.size() == 1
                        ? ask <= usable_device_memory(cuda_device_free_memory(device), limit_gib)
                        : comm.all(limit_gib <= 0 || ask <= static_cast<std::size_t>(limit_gib * 1073741824.0)) &&
                              gpu::fits_on_gpus(comm, device, ask);
  const std::string where = comm.size() == 1 ? "" : fmt::format(" a rank (of {}, those sharing a GPU together)", comm.size());
  if (!fits)
    return why_two(fmt::format("the 3N mesh's device memory plan, {:.1f} GiB{}, does not fit", need / 1073741824.0,
                               where));
  return {static_cast<int>(three), fmt::format("3 x particles_per_side: the CUDA step engine, whose P2P costs fall "
                                               "as the cell cubed; its memory plan {:.1f} GiB{} fits",
                                               need / 1073741824.0, where)};
#else
  return why_two("this build has no CUDA");
#endif
}

}  // namespace orbis
