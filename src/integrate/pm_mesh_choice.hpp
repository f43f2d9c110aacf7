// The PM mesh of a periodic run when [gravity] pm_grid_side = 0 ("auto"): the cheapest mesh
// whose results do not depend on it. With the short range's cut shifted to zero at 6 r_s (the
// defaults), runs at 2N, 3N and 4N cells per side agree to 0.07% in P(k) for k <= 1 h/Mpc
// (docs/force_split.md), so the choice is a matter of cost and memory: on the CUDA step engine
// the short range's P2P falls as the cube of the mesh's cell while cuFFT stays cheap (the
// 256^3 headline run takes 38 s at 3N against 47 s at 2N on an H200), so the CUDA engine (one
// rank, or every rank of several) takes 3N when 3N is 7-smooth (a fast FFT) and the device
// memory plan with it fits the GPU's free memory with a tenth to spare (over ranks: the most
// particles the domains give a rank, the PM over ranks' slabs, ranks sharing a GPU counted
// together; the same choice on every rank, so runs on 1 and several GPUs take the same mesh
// where they fit); everything else takes 2N (the host engine, a GPU the particles fill).
// Collective over comm.
#pragma once
#include <string>

#include "core/comm.hpp"

namespace orbis {

class Params;

struct PmMeshChoice {
  int grid_side = 0;
  std::string why;   // for the log
};

// The mesh for these parameters: pm_grid_side itself when it is set (> 0), else the rule
// above. Periodic TreePM runs only (the caller's test).
PmMeshChoice choose_pm_grid_side(const Params& params, const Comm& comm);

}  // namespace orbis
