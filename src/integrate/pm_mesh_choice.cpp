#include "integrate/pm_mesh_choice.hpp"

#include <fmt/format.h>

#include "core/params.hpp"
#include "fmm/p2p.hpp"
#include "fmm/short_range.hpp"
#include "pm/pm_solver.hpp"
#if defined(ORBIS_HAVE_CUDA)
#include "fmm/p2p_cuda_factory.hpp"
#include "gpu/device_memory_plan.hpp"
#include "gpu/pm_cuda.hpp"
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
  if (comm.size() > 1) return why_two("several ranks");
  const long long three = 3LL * side;
  if (three % 2 != 0 || !seven_smooth(three)) return why_two(fmt::format("3N = {} is not an even 7-smooth size", three));
#if defined(ORBIS_HAVE_CUDA)
  const int device = gpu_device_for_rank(params.get_int("gpu.device"), comm);
  std::string why;
  if (!cuda_device_usable(device, &why)) return why_two("no usable GPU (" + why + ")");
  // The device memory plan of the CUDA step engine (its load()'s, one rank) with the 3N mesh.
  Params with_three = params;
  with_three.set("gravity.pm_grid_side", ParamValue(static_cast<std::int64_t>(three)));
  const PmSettings pm = PmSettings::from_params(with_three);
  const auto n = static_cast<std::size_t>(side) * side * side;
  DeviceMemoryInput in;
  in.particles = n;
  in.settings = short_range_settings(with_three, 1.0);
  in.short_acc_double = in.settings.p2p_double;
  const CudaPmMemory pm_memory = CudaPmSolver::plan_memory(pm, n);
  in.pm_bytes = pm_memory.meshes + pm_memory.fft_work;
  in.pm_held_bytes = pm_memory.tables;
  const std::size_t need = plan_device_memory(in).total();
  const std::size_t usable =
      usable_device_memory(cuda_device_free_memory(device), params.get_real("gpu.memory_limit_gib"));
  if (need + need / 10 > usable)
    return why_two(fmt::format("the 3N mesh's device memory plan, {:.1f} GiB, does not fit in {:.1f} GiB",
                               need / 1073741824.0, usable / 1073741824.0));
  return {static_cast<int>(three), fmt::format("3 x particles_per_side: the CUDA step engine, whose P2P costs fall "
                                               "as the cell cubed; its memory plan {:.1f} GiB of {:.1f} GiB",
                                               need / 1073741824.0, usable / 1073741824.0)};
#else
  return why_two("this build has no CUDA");
#endif
}

}  // namespace orbis
