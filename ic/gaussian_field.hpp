// The Gaussian random density field of the ICs, in Fourier space.
//
// Convention (FFTW's forward transform is unnormalised, pm/fft_mesh.hpp): the field's modes
// are stored as
//     delta_k = (1/N^3) sum_x delta(x) exp(-i k.x),   so that   delta(x) = sum_k delta_k exp(i k.x)
// is exactly FftMesh::backward() of them. The continuous transform is delta~(k) = V delta_k,
// and P(k) = <|delta~(k)|^2> / V, so the generator makes <|delta_k|^2> = P(k) / V, i.e.
// <|delta~(k)|^2> = P(k) V. White noise w(x) of unit variance has <|FFT[w]_k|^2> = N^3, so
//     delta_k = FFT[w]_k * sqrt(P(k) / V) / N^(3/2).
// Fixed amplitude (Angulo & Pontzen 2016): |delta_k| = sqrt(P(k) / V) with the phase of
// FFT[w]_k. Paired: every phase shifted by pi (delta -> -delta), the partner realisation.
// Modes at k = 0 and on the Nyquist planes are zero (ic/modes.hpp).
#pragma once
#include <complex>
#include <cstdint>
#include <functional>
#include <vector>

#include "pm/fft_mesh.hpp"

namespace orbis::ic {

struct FieldOptions {
  std::uint64_t seed = 12345;
  bool fixed_amplitude = false;
  bool paired = false;
};

// P(k) in (Mpc/h)^3 for k in h/Mpc, at the epoch the field is meant for.
using PowerFunction = std::function<double(double k_h_mpc)>;

// Leaves delta_k (the convention above) in `mesh`'s complex data.
void make_gaussian_field(FftMesh<double>& mesh, double box_mpc_h, const PowerFunction& power,
                         const FieldOptions& options);

// sqrt(P(k) / V) for every integer |k|^2 = m2 <= 3 (N/2)^2 in units of the fundamental: the
// field needs P only at these O(N^2) values, not at each of the N^3 modes.
std::vector<double> mode_amplitudes(int n, double box_mpc_h, const PowerFunction& power);

}  // namespace orbis::ic
