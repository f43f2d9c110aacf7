// The tiled CPU P2P kernels (float, Taylor table, orders 0-4, or T = 1 for the Newtonian
// kernel, whose sources may carry weights: individual masses; x86-64-v4 and v3 with GCC):
// what the CPU evaluator runs where one exists (p2p_cpu.cpp falls back to its generic loop
// for the exact path, double precision, the baseline level and other compilers).
//
// Work per target-leaf group, as the generic loop and the GPU do it, but turned around:
// the group's source particles are concatenated, already shifted into the target leaf's
// frame, into one SoA tile of kTiledLaneTerms x (SIMD width) particles (1024 and 12 KB with
// AVX-512), and each target particle is broadcast against the whole tile with the sources
// in the SIMD lanes. The inner loop then runs ~60 full vectors instead of one 26-particle
// leaf in 16-lane vectors plus a remainder, the partial sums stay in registers for the
// whole tile, and the tile stays in L1 while every target of the leaf runs over it.
// Sources that no target of the leaf can reach within the cut are left out of the tile
// (a third of them in clustered sets), and a vector of sources that one target cannot
// reach is skipped (another fifth): both exactly, such pairs add 0. Float lane sums go into
// double once per tile and target (the generic loop does so per task, the GPU per tile):
// deterministic, since tiles are cut from the group's task list, never by the threads.
#pragma once
#include <cstdint>
#include <vector>

#include "core/vec3.hpp"
#include "fmm/p2p_grouping.hpp"
#include "fmm/p2p_kernel.hpp"
#include "fmm/tasks.hpp"
#include "fmm/truncation.hpp"

namespace orbis::p2p_tiled {

// Sources per SIMD lane and tile: each float lane sum takes at most this many terms before it
// goes into double (the tile is enlarged to hold the largest leaf if need be).
inline constexpr int kTiledLaneTerms = 64;
inline constexpr int kTiledMaxSources = 16 * kTiledLaneTerms;   // the widest ISA's tile

// The Taylor table (truncation.hpp) in the layout the kernels gather from: node i's two
// values side by side, so that one 64-bit gather element brings both (half the elements
// of two 32-bit gathers). Built once per table.
struct CoefLayout {
  int size = 0;
  std::vector<float> t;     // T_i (order 0)
  std::vector<float> c01;   // {c0, c1} of the coefficient form (order 1)
  std::vector<float> te;    // {T_i, E_i h} (eq. 2 in node units, orders 2-4)
  void build(const TruncationTable<float>& table);
};

struct Job {
  const GroupedTasks* grouped = nullptr;
  const std::vector<Leaf>* leaves = nullptr;
  const float* x = nullptr;   // leaf-relative positions in table units (tree order)
  const float* y = nullptr;
  const float* z = nullptr;
  double box = 0;             // Mpc/h
  P2PPairConstants<float> k;
  const CoefLayout* table = nullptr;
  std::uint32_t max_count = 0;    // largest leaf
  std::vector<Vec3d>* acc = nullptr;   // written once per particle of every target leaf
  // Tree order, optional: only the flagged particles of a target leaf are computed and
  // written (each one's sums are the same as without the flags: the tile is built for the
  // whole leaf either way).
  const std::uint8_t* targets = nullptr;
  // Tree order, optional, the Newtonian kernel only: each source's weight (its mass over the
  // reference mass, fmm/p2p.hpp's P2PInput::weights), multiplying its pairs.
  const float* w = nullptr;
};

// Whether a tiled kernel exists for this SIMD level (as CpuP2POptions) and Taylor order
// (0..4, or kNoTruncation: the Newtonian kernel, T = 1).
bool available(int simd_level, int taylor_order);
// Runs the whole job (OpenMP over groups); the caller checked available().
void run(int simd_level, int taylor_order, const Job& job);

}  // namespace orbis::p2p_tiled
