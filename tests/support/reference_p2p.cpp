#include "support/reference_p2p.hpp"

#include <cmath>

#include "core/error.hpp"
#include "core/timer.hpp"

namespace orbis::test {

double truncation_exact(double x) {
  return std::erfc(x) + 2.0 * x / std::sqrt(3.14159265358979323846) * std::exp(-x * x);
}

P2PStats ReferenceP2P::evaluate(const P2PSettings& s, const P2PInput& input, std::vector<Vec3d>& acc) {
  Stopwatch watch;
  const auto& pos = *input.positions;
  const auto& leaves = *input.leaves;
  const auto& tasks = *input.tasks;
  acc.assign(pos.size(), Vec3d{0, 0, 0});
  const double r_cut2 = s.r_cut * s.r_cut, eps2 = s.softening * s.softening;
  const double inv_2rs = 0.5 / s.r_s;
  const bool newtonian = s.kernel == KernelKind::newtonian;   // T = 1; r_cut beyond the system

  // Group starts: the list is grouped by target leaf (a requirement of the interface).
  std::vector<std::size_t> starts;
  for (std::size_t q = 0; q < tasks.size(); ++q) {
    if (q > 0 && tasks[q].target < tasks[q - 1].target)
      fail("reference P2P: tasks not grouped by target leaf (task {})", q);
    if (q == 0 || tasks[q].target != tasks[q - 1].target) starts.push_back(q);
  }
  starts.push_back(tasks.size());

  double pairs = 0;
  const long n_groups = static_cast<long>(starts.size()) - 1;
#pragma omp parallel for schedule(dynamic, 4) reduction(+ : pairs)
  for (long g = 0; g < n_groups; ++g) {
    const Leaf& target = leaves[tasks[starts[static_cast<std::size_t>(g)]].target];
    for (std::uint32_t i = target.first; i < target.first + target.count; ++i) {
      Vec3d a{0, 0, 0};
      for (std::size_t q = starts[static_cast<std::size_t>(g)]; q < starts[static_cast<std::size_t>(g) + 1]; ++q) {
        const InteractionTask& task = tasks[q];
        const Leaf& source = leaves[task.source];
        const Vec3d shift{task.image[0] * s.box_mpc_h, task.image[1] * s.box_mpc_h, task.image[2] * s.box_mpc_h};
        for (std::uint32_t j = source.first; j < source.first + source.count; ++j) {
          const Vec3d d = (pos[j] + shift) - pos[i];
          const double r2 = norm2(d);
          if (r2 == 0 || r2 >= r_cut2) continue;
          const double soft = std::sqrt(r2 + eps2);   // Plummer on the whole kernel, as p2p_kernel.hpp
          const double t = newtonian ? 1.0 : truncation_exact(soft * inv_2rs);
          const double w = input.weights ? (*input.weights)[j] : 1.0;
          a += d * (w * t / (soft * soft * soft));
        }
      }
      acc[i] = a * s.g_mass;
    }
    for (std::size_t q = starts[static_cast<std::size_t>(g)]; q < starts[static_cast<std::size_t>(g) + 1]; ++q)
      pairs += static_cast<double>(target.count) * leaves[tasks[q].source].count;
  }
  return P2PStats{watch.seconds(), pairs, "reference cpu"};
}

Vec3d direct_short_range(const std::vector<Vec3d>& positions, std::size_t i, double box, double r_s,
                         double r_cut, double g_mass) {
  Vec3d a{0, 0, 0};
  for (std::size_t j = 0; j < positions.size(); ++j) {
    if (j == i) continue;
    Vec3d d = positions[j] - positions[i];
    for (int k = 0; k < 3; ++k) d[k] = periodic_wrap_delta(d[k], box);
    const double r2 = norm2(d);
    if (r2 == 0 || r2 >= r_cut * r_cut) continue;
    const double r = std::sqrt(r2);
    a += d * (truncation_exact(r / (2 * r_s)) / (r2 * r));
  }
  return a * g_mass;
}

}  // namespace orbis::test
