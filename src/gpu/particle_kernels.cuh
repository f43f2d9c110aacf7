// Kernels over the particle state the CUDA step engine keeps on the device (structure of
// arrays: x | y | z, px | py | pz, one block of n each): the kicks and drifts of the
// leapfrog, the moves between the host's interleaved vectors and the device layout, and the
// reductions the run loop's step criteria need. Each particle is written by one thread and
// every reduction has a fixed shape, so the results do not depend on the launch.
#pragma once
#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

#include "core/exact_sum.hpp"
#include "integrate/step_engine.hpp"

namespace orbis::gpu {

// p += g_long * long_factor (when long_factor != 0, every particle), then, for particles with
// bin >= min_active_bin, p += g_short * short_factor[bin] (kMaxTimeBins factors on the
// device). Ga: the type the short-range accelerations are kept in (float or double).
template <typename Ga>
void kick_particles(double* p, const double* g_long, double long_factor, const Ga* g_short,
                    const std::uint8_t* bin, int min_active_bin, const double* short_factor, std::size_t n,
                    cudaStream_t stream);

// x += p * drift_factor, wrapped into [0, box) (periodic_wrap_position, core/vec3.hpp); box 0:
// not wrapped (vacuum boundaries, and the TreePM engine between tree builds).
void drift_particles(double* x, const double* p, double drift_factor, double box, std::size_t n,
                     cudaStream_t stream);
// x (x | y | z, 3n doubles) wrapped into [0, box) in place (nothing when box is 0).
void wrap_positions(double* x, std::size_t n, double box, cudaStream_t stream);

// Interleaved (x y z per particle, as std::vector<Vec3d>) <-> x | y | z, on the device;
// interleave_positions also wraps into [0, box) when box > 0 (the same function, the same bits
// as wrap_positions).
void deinterleave(const double* xyz, std::size_t n, double* soa, cudaStream_t stream);
void interleave(const double* soa, std::size_t n, double* xyz, cudaStream_t stream);
void interleave_positions(const double* soa, std::size_t n, double box, double* xyz, cudaStream_t stream);
// out (interleaved) = a + b (both x | y | z; b of type Gb).
template <typename Gb>
void interleave_sum(const double* a, const Gb* b, std::size_t n, double* out, cudaStream_t stream);

// The short-range forces of the step, from tree order (acc_tree: 3 doubles per tree
// position) to the state's order (x | y | z blocks of out_stride Ga), only for particles
// with bin >= min_active_bin (bin null: every particle) and an index below out_stride.
template <typename Ga>
void scatter_short_range(const double* acc_tree, const std::uint32_t* order, const std::uint8_t* bin,
                         int min_active_bin, std::size_t n, Ga* out, std::size_t out_stride, cudaStream_t stream);

// max |a|^2 over particles of a + b (both x | y | z), into *out (device, one double):
// the run loop's step criterion. Non-negative doubles order like their bits.
template <typename Gb>
void max_norm2_sum(const double* a, const Gb* b, std::size_t n, unsigned long long* out, cudaStream_t stream);

// The rms momentum's exact sum (core/exact_sum.hpp), the host engine's bits: max |p|^2 into
// *out (as max_norm2_sum), then the sum of exact_sum_term(|p|^2) into *out (integer atomics:
// exact in any order).
void max_norm2(const double* p, std::size_t n, unsigned long long* out, cudaStream_t stream);
void exact_norm2_sum(const double* p, std::size_t n, const ExactSumScale& scale, unsigned long long* out,
                     cudaStream_t stream);

// The particles' sums of each momentum component in blocks of kNorm2Block (the host engine's
// ordered sum's blocks): partial[3 k + d] = sum over i in block k, in order, of p_d (p: x | y |
// z; 3 norm2_block_count(n) doubles), one thread per block. Summing the partials in order on
// the host gives the host engine's bits. weights (individual masses: m_i / m, device, n):
// the sums of w_i p_d instead, each product rounded before it is added (no FMA, as the host's
// ordered sum of w_i * p_d).
constexpr std::size_t kNorm2Block = 4096;
inline std::size_t norm2_block_count(std::size_t n) { return (n + kNorm2Block - 1) / kNorm2Block; }
void block_component_sums(const double* p, std::size_t n, double* partial, cudaStream_t stream,
                          const double* weights = nullptr);

// New bins (bin_for_acceleration of |a + b|^2, a and b x | y | z) for the particles with
// bin >= rule.min_active_bin, and the particles per bin, all of them, into counts
// (kMaxTimeBins integers on the device, zeroed here): integer sums, exact in any order.
template <typename Gb>
void assign_bins(const double* a, const Gb* b, std::size_t n, const BinRule& rule, std::uint8_t* bin,
                 unsigned long long* counts, cudaStream_t stream);

}  // namespace orbis::gpu
