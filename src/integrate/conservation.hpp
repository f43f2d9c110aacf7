// The check that matters for an isolated system ([gravity] boundary = "vacuum"): gravity
// conserves its total energy E = K + W, momentum P and angular momentum L (about the origin,
// the ICs' centre of mass). The run logs them at its start and at every output, with their
// drift from the start (integrate/simulation.cpp).
//
// W is the direct sum over every pair of the softened potential whose gradient is the P2P
// force, -G m^2 / sqrt(r^2 + eps^2) (fmm/kernel_kind.hpp, KernelKind::newtonian): O(N^2) on
// the CPU (OpenMP, softened_pair_sum below) for at most [analysis] energy_pairs_max_particles
// particles, or on the GPU where the particles are (StepEngine::softened_potentials, summed by
// pair_sum_of_potentials) for at most energy_pairs_max_particles_gpu; the tree computes no
// potential. The same direct sums give each particle's potential for the snapshots ([output]
// potential). Every per-particle sum is formed in a fixed order and the particles' sums added
// in order, so the result does not depend on the thread count.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "core/particles.hpp"
#include "core/vec3.hpp"

namespace orbis {

struct ConservedQuantities {
  double kinetic = 0;          // K = sum m v^2 / 2 (mass x velocity^2 in the run's units)
  double potential = 0;        // W (valid when has_potential)
  bool has_potential = false;
  Vec3d momentum;              // P = sum m v
  Vec3d angular_momentum;      // L = sum m x × v
  double mass = 0;             // M = sum m
  double r_rms = 0, v_rms = 0; // the scales of the drifts of P and L
  double energy() const { return kinetic + potential; }
};

// p = dx/dt (the Newtonian clock's momenta); g: the gravitational constant of the units;
// pair_sum: S below for these particles (W = -g m^2 S, m = particles.mass, with the weights
// masses[i] / m of individual masses), or nullopt for no W.
ConservedQuantities conserved_quantities(const Particles& particles, double g, std::optional<double> pair_sum);

// The softened pair potential sum S = sum_{i<j} w_i w_j / sqrt(|x_i - x_j|^2 + eps^2)
// (W = -G m^2 S), w_i = weights[i] (each particle's mass over the reference mass m; null: 1).
double softened_pair_sum(const std::vector<Vec3d>& positions, double softening,
                         const std::vector<double>* weights = nullptr);
// Each particle's softened potential sum phi~_i = sum_{j != i} w_j / sqrt(|x_i - x_j|^2 +
// eps^2), j in order (every pair from both sides: twice softened_pair_sum's work); the
// particle's gravitational potential is -G m phi~_i (m the reference mass, w_j = m_j / m).
std::vector<double> softened_potentials(const std::vector<Vec3d>& positions, double softening,
                                        const std::vector<double>* weights = nullptr);
// S of softened_pair_sum from the potentials: sum_i w_i phi~_i / 2, the particles in order.
double pair_sum_of_potentials(const std::vector<double>& potentials, const std::vector<double>* weights = nullptr);
// The weights of individual masses, masses[i] / mass (empty without individual masses).
std::vector<double> mass_weights(const Particles& particles);

// One check as the log gives it: the quantities at time t and their drifts from the start.
struct ConservationRecord {
  double t = 0;
  ConservedQuantities now;
  double energy_drift = 0;             // (E - E_0) / |E_0| (0 without W)
  // v: the start's rms velocity, or now's where larger (a system may start at rest)
  double momentum_drift = 0;           // |P - P_0| / (M v)
  double angular_momentum_drift = 0;   // |L - L_0| / (M r_rms_0 v)
};

// The record of `now` at time t against `start` (the run's first check; null: now is it).
ConservationRecord conservation_record(double t, const ConservedQuantities& now, const ConservedQuantities* start);
// Its log line.
std::string conservation_line(const ConservationRecord& record);

}  // namespace orbis
