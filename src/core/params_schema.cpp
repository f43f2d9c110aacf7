#include "core/params_schema.hpp"

#include <cmath>
#include <sstream>

#include <fmt/format.h>

namespace orbis {
namespace {

constexpr double inf = std::numeric_limits<double>::infinity();
using T = ParamType;
constexpr ParamScope P = ParamScope::periodic;   // cosmological boxes only
constexpr ParamScope V = ParamScope::vacuum;     // isolated systems only

// section, key, type, default, min, max, min_exclusive, choices, unit, help
const std::vector<ParamSpec> kSchema = {
    // ------------------------------------------------------------------ cosmology
    {"cosmology", "omega_m", T::real, "0.3144", 0, 2, true, nullptr, "",
     "total matter density today (CDM + baryons; all of it is in the particles)", P},
    {"cosmology", "omega_lambda", T::real, "", 0, 3, false, nullptr, "",
     "dark-energy density today; absent: 1 - omega_m (flat)", P},
    {"cosmology", "omega_b", T::real, "0.0494", 0, 1, false, nullptr, "",
     "baryon density today; shapes the transfer function only", P},
    {"cosmology", "h", T::real, "0.6732", 0.2, 2, false, nullptr, "",
     "H0 / (100 km/s/Mpc); shapes the transfer function (units are h-scaled)", P},
    {"cosmology", "n_s", T::real, "0.966", 0.5, 1.5, false, nullptr, "", "primordial spectral index", P},
    {"cosmology", "sigma8", T::real, "0.812", 0, 3, true, nullptr, "",
     "rms linear density fluctuation in 8 Mpc/h top-hat spheres at z = 0", P},
    {"cosmology", "w0", T::real, "-1.0", -3, 0, false, nullptr, "",
     "dark-energy equation of state p = w0 rho (constant)", P},
    // ------------------------------------------------------------------ box
    {"box", "size_mpc_h", T::real, nullptr, 0, 1e5, true, nullptr, "Mpc/h",
     "side of the periodic box (comoving)", P},
    {"box", "particles_per_side", T::integer, nullptr, 2, 8192, false, nullptr, "",
     "N: the run has N^3 particles, initially on a grid", P},
    // ------------------------------------------------------------------ ic
    {"ic", "file", T::string, "\"\"", -inf, inf, false, nullptr, "",
     "start from this IC or snapshot file instead of built-in ICs (PATH, PATH.hdf5, PATH.0.hdf5 or PATH.0; "
     "relative to the parameter file). Periodic: GADGET-4/N-GenIC, MUSIC, monofonIC or orbis HDF5, or GADGET's "
     "binary formats 1 and 2 as N-GenIC, 2LPTic and MUSIC write them, of PartType1 alone and one particle mass; "
     "its box must equal [box] size_mpc_h and it must hold particles_per_side^3 particles; the run starts at its "
     "redshift, and z_init is then not used. Vacuum (instead of [ic] kind): GADGET HDF5 (GADGET-2/3/4 layout) or "
     "binary format 1 or 2 with any of the types 0..5 and individual masses (MassTable, Masses, the MASS block: "
     "DICE, MakeNewDisk, GalIC, pynbody, GADGET), velocities dx/dt, not wrapped (no box); an HDF5 file's "
     "UnitLength_in_cm, UnitMass_in_g, UnitVelocity_in_cm_per_s converted to [units], a file without them (every "
     "binary file) taken in [units]; the run starts at its Time unless [time] t_begin is given (docs/running.md)"},
    {"ic", "file_length_unit", T::string, "\"kpc/h\"", -inf, inf, false, "kpc/h|Mpc/h", "",
     "the length unit of a GADGET binary [ic] file, which does not say (kpc/h is GADGET's and N-GenIC's "
     "default); HDF5 files carry their units", P},
    {"ic", "z_init", T::real, "49.0", 0, 1e4, true, nullptr, "", "starting redshift", P},
    {"ic", "seed", T::integer, "12345", 0, 9.2e18, false, nullptr, "",
     "random seed; the field at each grid point depends only on it and the grid position"},
    {"ic", "lpt_order", T::integer, "2", 1, 2, false, nullptr, "",
     "1: Zel'dovich, 2: second-order Lagrangian perturbation theory", P},
    {"ic", "power_spectrum", T::string, "\"eisenstein_hu\"", -inf, inf, false,
     "eisenstein_hu|eisenstein_hu_nowiggle|camb_transfer|table", "",
     "linear P(k): Eisenstein & Hu 1998 with or without baryon wiggles, a CAMB transfer "
     "file, or a (k, P) table", P},
    {"ic", "power_file", T::string, "\"\"", -inf, inf, false, nullptr, "",
     "file for camb_transfer (k/h, T columns; total matter used) or table (k [h/Mpc], "
     "P [(Mpc/h)^3] at z = 0); relative to the parameter file", P},
    {"ic", "normalise_to_sigma8", T::boolean, "true", -inf, inf, false, nullptr, "",
     "scale P(k) so that sigma8 is honoured (a table is otherwise used as given)", P},
    {"ic", "fixed_amplitude", T::boolean, "false", -inf, inf, false, nullptr, "",
     "set |delta_k| to sqrt(P(k)) and keep only the random phases (Angulo & Pontzen 2016)", P},
    {"ic", "paired", T::boolean, "false", -inf, inf, false, nullptr, "",
     "flip every phase: the partner of the same seed's realisation (Angulo & Pontzen 2016)", P},
    {"ic", "self_test", T::boolean, "true", -inf, inf, false, nullptr, "",
     "measure the ICs' P(k) and write it next to the input linear P(k) D(z_init)^2", P},
    {"ic", "kind", T::string, "", -inf, inf, false, "plummer|hernquist|merger", "",
     "the built-in isolated system: a Plummer or a Hernquist sphere in equilibrium (isotropic distribution "
     "functions), or merger: two Hernquist spheres (the second mass_ratio times the first) on a parabolic orbit "
     "(separation, pericentre); in the [units] system, centre of mass at rest at the origin. Give either kind or "
     "[ic] file", V},
    {"ic", "particles", T::integer, "", 1, 2e9, false, nullptr, "",
     "particles of the sphere (merger: of each sphere); required with [ic] kind, not taken with [ic] file", V},
    {"ic", "mass", T::real, "1.0", 0, inf, true, nullptr, "mass unit",
     "total mass M of the (untruncated) model (merger: of the first sphere), in the [units] mass unit", V},
    {"ic", "mass_ratio", T::real, "1.0", 0, inf, true, nullptr, "",
     "merger: the second sphere's total mass over the first's, with as many particles (so each weighs mass_ratio "
     "times more: individual masses unless 1); its scale radius is scale_radius mass_ratio^(1/3), so both spheres "
     "have one density scale M / (2 pi a^3) and one dynamical time (as haloes of one mean density do)", V},
    {"ic", "scale_radius", T::real, "1.0", 0, inf, true, nullptr, "length unit",
     "the model's scale radius a (Plummer: half the mass within 1.305 a; Hernquist: within 2.414 a)", V},
    {"ic", "r_max_over_a", T::real, "0", 0, inf, false, nullptr, "",
     "particles are drawn within this many scale radii (the model's mass inside shared among them); 0: the "
     "model's default (Plummer untruncated, Hernquist 100 a: 98% of the mass)", V},
    {"ic", "separation", T::real, "", 0, inf, true, nullptr, "length unit",
     "merger: the distance of the spheres' centres at the start (required for a merger)", V},
    {"ic", "pericentre", T::real, "", 0, inf, true, nullptr, "length unit",
     "merger: the pericentre of the point-mass parabolic orbit, at most the separation (required for a merger)", V},
    // ------------------------------------------------------------------ gravity
    {"gravity", "boundary", T::string, "\"periodic\"", -inf, inf, false, "periodic|vacuum", "",
     "periodic: a comoving periodic box (solver pm or treepm); vacuum: an isolated system, no mesh and no "
     "periodic images, plain softened Newtonian forces (solver fmm or direct), Newtonian time in physical units "
     "([units], [time] t_begin, t_end), ICs from the built-in generators ([ic] kind) or a GADGET file of any "
     "particle types and masses ([ic] file); one MPI rank, on the host or the CUDA step engine"},
    {"gravity", "solver", T::string, "\"treepm\"", -inf, inf, false, "pm|treepm|fmm|direct", "",
     "periodic: pm = particle mesh only (full 1/k^2), treepm = PM long range + FMM short range; vacuum: fmm = "
     "the FMM over the whole tree (untruncated 1/r, cells interact by the opening angle alone), direct = every "
     "pair in P2P (O(N^2): the reference, and for small N)"},
    {"gravity", "pm_grid_side", T::integer, "0", 0, 8192, false, nullptr, "",
     "PM mesh cells per side; 0: auto, 3 x particles_per_side on the CUDA step engine (one rank or all "
     "ranks) when that mesh fits the GPUs (its P2P then costs a third), else 2 x particles_per_side; the "
     "log says which and why (a restart takes the same or stops: set it to restart elsewhere)", P},
    {"gravity", "mass_assignment", T::string, "\"tsc\"", -inf, inf, false, "cic|tsc", "",
     "PM mass assignment and force interpolation window (TSC: long-range force within 0.3% of "
     "Ewald at r_s = 1.2 cells; CIC is aliasing-limited at ~1.5% rms, 3.5% max)", P},
    {"gravity", "pm_mesh_precision", T::string, "\"float\"", -inf, inf, false, "float|double", "",
     "arithmetic of the PM mesh and its FFTs (float: half the memory, force errors ~1e-6)", P},
    {"gravity", "pm_interlacing", T::boolean, "true", -inf, inf, false, nullptr, "",
     "treepm: the long range on two meshes half a cell diagonal apart (at 1/8 and 5/8 of a cell), forces "
     "averaged: grid ICs' lattice otherwise folds onto the long waves and costs the linear P(k) up to 0.1% "
     "(docs/force_split.md); twice the PM work and mesh memory. false: one mesh at 1/4 cell", P},
    {"gravity", "rs_over_cell", T::real, "2.4", 0.25, 8, false, nullptr, "",
     "force-split scale r_s in PM cells; 2.4 cells of the default 2N mesh is PhotoNs' 1.2 cells "
     "of an N mesh (the same r_s), with 15x smaller PM force errors (tests/physics/test_treepm_ewald)", P},
    {"gravity", "r_cut_over_rs", T::real, "6", 1, 12, false, nullptr, "",
     "short-range cut-off radius in units of r_s; 4.5 (GADGET) drops up to 1.8% of a pair's force "
     "at the cut; at 6 (the T(x) table's end) the shifted cut's force error against Ewald is 4e-4 at the "
     "99th percentile and P(k) does not depend on the mesh (docs/force_split.md)", P},
    {"gravity", "short_range_cut", T::string, "\"shifted\"", -inf, inf, false, "shifted|sharp", "",
     "how the short-range force ends at the cut: shifted, T(x) - T(x_cut) (x/x_cut)^2, zero at the cut "
     "(the pair potential and M2L's kernel to match; every pair inside the cut loses T(x_cut)/r_cut^2 of "
     "force, 4.4e-4 of the Newtonian force at the cut at 6 r_s), or sharp, T(x) up to the cut and nothing "
     "beyond: a step of T(x_cut) that the IC lattice's shells cross together, which moved P(k) by 0.1-1% "
     "with the mesh (docs/force_split.md)", P},
    {"gravity", "softening_over_spacing", T::real, "0.025", 0, 0.5, false, nullptr, "",
     "Plummer-equivalent softening length in units of the mean inter-particle spacing", P},
    {"gravity", "theta", T::real, "0.5", 0, 1, true, nullptr, "", "FMM opening angle"},
    {"gravity", "multipole_order", T::integer, "4", 1, 6, false, nullptr, "",
     "order p of the multipole and local expansions"},
    {"gravity", "max_leaf", T::integer, "32", 1, 4096, false, nullptr, "",
     "most particles in a tree leaf"},
    {"gravity", "top_node_particles", T::integer, "4096", 1, 1e12, false, nullptr, "",
     "the tree walk starts from the pairs of the global ORB tree's nodes of about this many particles "
     "(depth d: the largest with 2^d <= N / top_node_particles), and over ranks the domains are runs of "
     "these nodes; the same for every rank count, so the forces are too", P},
    {"gravity", "taylor_order", T::integer, "3", -1, 4, false, nullptr, "",
     "order of the Taylor series of the truncation function T(x) in P2P; -1: exact erfc and exp "
     "(the slow reference path, needed for r_cut_over_rs > 6 where the table ends)", P},
    {"gravity", "taylor_table_size", T::integer, "512", 16, 65536, false, nullptr, "",
     "nodes of the T(x) table on [0, 3]", P},
    {"gravity", "softening", T::real, nullptr, 0, inf, true, nullptr, "length unit",
     "Plummer softening length eps of the vacuum forces: G m r / (r^2 + eps^2)^(3/2) per pair, potential "
     "-G m / sqrt(r^2 + eps^2); in the [units] length unit", V},
    {"gravity", "leaf_cell_pairs", T::boolean, "true", -inf, inf, false, nullptr, "",
     "vacuum: where a tree leaf faces a node compact against its distance from the leaf's particles, one "
     "mutual leaf-cell pair (the leaf's particles into the node's local expansion, the node's multipoles at "
     "the leaf's particles) instead of direct sums against every leaf of the node: 10x fewer P2P pairs in a "
     "steep profile at M2L's accuracy (on the CPU ~1.5x slower at 1e5 particles, where the P2P is cheap)", V},
    // ------------------------------------------------------------------ units
    {"units", "system", T::string, "\"galaxy\"", -inf, inf, false, "galaxy|nbody", "",
     "galaxy: GADGET's kpc, km/s and 1e10 Msun (G = 43007.1, time unit kpc/(km/s) = 0.9778 Gyr); nbody: G = 1 "
     "(Henon units when the model's mass and scale radius are 1; the snapshots then say UnitLength_in_cm = 1, etc.)",
     V},
    // ------------------------------------------------------------------ time
    {"time", "z_final", T::real, "0.0", 0, 1e4, false, nullptr, "", "final redshift", P},
    {"time", "stepping", T::string, "\"hierarchical\"", -inf, inf, false, "hierarchical|global", "",
     "hierarchical: block time steps (GADGET-4, PKDGRAV3, SWIFT): the long-range force kicked on the PM step, "
     "each particle's short-range force on its own power-of-two bin of it; global: one step for every particle, "
     "set by the most accelerated one (a PM-only run always steps globally)"},
    {"time", "max_dln_a", T::real, "0.075", 0, 0.5, true, nullptr, "",
     "largest step in ln a (the PM step, or the global step)", P},
    {"time", "eta", T::real, "0.25", 0, 10, false, nullptr, "",
     "per-particle step criterion dt <= eta sqrt(softening a^3 / |g|) in physical time (vacuum: a = 1; GADGET's "
     "ErrTolIntAccuracy is eta^2 / 2); sets each particle's bin (hierarchical) or the step of the most "
     "accelerated particle (global); 0: off"},
    {"time", "growth_weighted_kicks", T::boolean, "true", -inf, inf, false, nullptr, "",
     "each kick lets its force grow as the linear growth D(a) across the kick (FastPM): the linear modes grow "
     "exactly for any step (at max_dln_a 0.05 the held force leaves P(k) 0.1-0.2% low); false: the force held "
     "fixed over the kick (GADGET's KDK)", P},
    {"time", "growth_weighted_drifts", T::boolean, "true", -inf, inf, false, nullptr, "",
     "each drift lets the momentum grow as the linear mode's across the drift, from the middle of the PM step "
     "(FastPM): with the weighted kicks the linear modes move exactly for any PM step; false: the momentum held "
     "fixed over the drift (GADGET's KDK)", P},
    {"time", "pm_rms_displacement", T::real, "0.15", 0, 10, false, nullptr, "",
     "hierarchical: the PM step moves the particles by at most this fraction of min(r_s, mean spacing) in rms "
     "(GADGET's MaxRMSDisplacementFac); 0: off, max_dln_a alone sets the PM step", P},
    {"time", "output_redshifts", T::real_list, "[3.0, 1.0, 0.5, 0.0]", 0, 1e4, false, nullptr, "",
     "redshifts of snapshots, power spectra and halo catalogues (steps land on them exactly)", P},
    {"time", "t_begin", T::real, "", 0, inf, false, nullptr, "time unit",
     "time at the start, in the [units] time unit (galaxy: kpc/(km/s) = 0.9778 Gyr); not given: the [ic] file's "
     "Time (in [units]), else 0", V},
    {"time", "t_end", T::real, nullptr, 0, inf, true, nullptr, "time unit", "time at the end (> t_begin)", V},
    {"time", "max_dt", T::real, nullptr, 0, inf, true, nullptr, "time unit",
     "the largest step (bin 0 of the block steps, or the global step); the per-particle criterion "
     "dt <= eta sqrt(softening / |g|) puts each particle in a power-of-two fraction of it", V},
    {"time", "output_times", T::real_list, "[]", 0, inf, false, nullptr, "time unit",
     "times of the snapshots and conservation checks besides the end (steps land on them exactly)", V},
    {"time", "output_interval", T::real, "0", 0, inf, false, nullptr, "time unit",
     "an output every this long from t_begin (with output_times, both); 0: none but output_times and the end", V},
    // ------------------------------------------------------------------ output
    {"output", "directory", T::string, "\"output\"", -inf, inf, false, nullptr, "",
     "where every output goes; relative paths are taken from the working directory"},
    {"output", "snapshots", T::boolean, "true", -inf, inf, false, nullptr, "",
     "write a snapshot at every output redshift"},
    {"output", "accelerations", T::boolean, "false", -inf, inf, false, nullptr, "",
     "add /PartType1/Acceleration to snapshots"},
    {"output", "potential", T::boolean, "false", -inf, inf, false, nullptr, "",
     "add each particle's gravitational potential to snapshots (/PartTypeN/Potential, GADGET-4's name): "
     "-G sum_{j != i} m_j / sqrt(r_ij^2 + eps^2), the direct sum over every other particle, as the energy "
     "check's W; so for at most [analysis] energy_pairs_max_particles particles (on the host), or "
     "energy_pairs_max_particles_gpu where the particles are on a GPU; a run with more is refused before it "
     "starts", V},
    {"output", "files_per_snapshot", T::integer, "1", 1, 65536, false, nullptr, "",
     "GADGET-4's NumFilesPerSnapshot: 1 writes snapshot_NNN.hdf5 (and ics.hdf5), more write "
     "snapshot_NNN.0.hdf5, .1, ... with equal shares of the particles; every file in ID order and "
     "the same for any rank count. On several ranks no rank gathers the particles; with at least as "
     "many files as ranks the files are written at the same time, with fewer in turns"},
    // ------------------------------------------------------------------ checkpoint
    {"checkpoint", "every_steps", T::integer, "0", 0, 1e12, false, nullptr, "",
     "write a checkpoint (checkpoint_SSSSSSSS.orbis in the output folder) at the first end of a "
     "PM step at least this many steps after the last one; 0: not by steps. SIGTERM, SIGINT and "
     "SIGUSR1 always write one at the end of the PM step in progress, then stop (exit 0); "
     "`orbis run FILE --restart` continues from the newest complete one"},
    {"checkpoint", "every_minutes", T::real, "60", 0, inf, false, nullptr, "min",
     "write a checkpoint at the first end of a PM step at least this many wall-clock minutes "
     "after the run's start or the last checkpoint; 0: not by time"},
    // ------------------------------------------------------------------ analysis
    {"analysis", "pk", T::boolean, "true", -inf, inf, false, nullptr, "",
     "measure the power spectrum at every output", P},
    {"analysis", "pk_grid_side", T::integer, "0", 0, 8192, false, nullptr, "",
     "P(k) mesh cells per side; 0: 2 x particles_per_side", P},
    {"analysis", "pk_assignment", T::string, "\"tsc\"", -inf, inf, false, "cic|tsc", "",
     "P(k) mass assignment window (deconvolved)", P},
    {"analysis", "pk_interlacing", T::boolean, "true", -inf, inf, false, nullptr, "",
     "interlace two grids shifted by half a cell to suppress aliasing", P},
    {"analysis", "pk_binning", T::string, "\"linear\"", -inf, inf, false, "linear|log", "",
     "k bins: linear in units of the fundamental frequency, or logarithmic", P},
    {"analysis", "pk_num_bins", T::integer, "0", 0, 100000, false, nullptr, "",
     "number of k bins; 0: one per fundamental frequency (linear) or 10 per decade (log)", P},
    {"analysis", "pk_subtract_shot_noise", T::boolean, "false", -inf, inf, false, nullptr, "",
     "subtract the shot noise from P(k) (it is always reported in its own column)", P},
    {"analysis", "pk_fold_factor", T::integer, "1", 1, 64, false, nullptr, "",
     "1: no folding; F > 1 adds a spectrum of positions folded F times to reach F x the "
     "grid's Nyquist frequency", P},
    {"analysis", "fof", T::boolean, "true", -inf, inf, false, nullptr, "",
     "find friends-of-friends haloes at every output", P},
    {"analysis", "fof_linking_length", T::real, "0.2", 0, 1, true, nullptr, "",
     "linking length b in units of the mean inter-particle spacing", P},
    {"analysis", "fof_min_members", T::integer, "32", 2, 1e9, false, nullptr, "",
     "smallest group kept", P},
    {"analysis", "energy_check", T::boolean, "true", -inf, inf, false, nullptr, "",
     "check the Layzer-Irvine cosmic energy equation d[a (K + W)]/da = -K where every particle is "
     "synchronised (the ends of PM steps): K at each, the potential energy W at the start, at every output "
     "and every energy_check_every PM steps; the log gives the running residual relative to |a W|. W costs "
     "a PM assignment and FFT on the host and a direct sum over the pairs within r_cut (on the [gpu] "
     "backend; over several ranks on the CPU, each pair between two ranks counted once). TreePM only. Vacuum: "
     "the conserved quantities instead (total energy, momentum, angular momentum and their drift from the start) "
     "at the start and every output"},
    {"analysis", "energy_check_every", T::integer, "0", 0, 1e12, false, nullptr, "",
     "compute W (and log the residual) also every this many PM steps; 0: at the outputs only", P},
    {"analysis", "energy_drift_warning", T::real, "0.01", 0, inf, true, nullptr, "",
     "warn when the Layzer-Irvine residual exceeds this fraction of |a W| (vacuum: when |E - E_0| / |E_0| does)"},
    {"analysis", "energy_pairs_max_particles", T::integer, "200000", 0, 1e9, false, nullptr, "",
     "vacuum: the potential energy W is the direct sum over every pair of the softened potential (O(N^2), "
     "OpenMP; about 4 s for 1e5 particles on 2 cores) for at most this many particles; above, the log gives "
     "K, momentum and angular momentum only", V},
    {"analysis", "energy_pairs_max_particles_gpu", T::integer, "2000000", 0, 1e9, false, nullptr, "",
     "vacuum: the same sum on the GPU where the particles are (the CUDA step engine; double, about a second for "
     "1e6 particles on an H200, growing as N^2) for at most this many particles", V},
    // ------------------------------------------------------------------ gpu
    {"gpu", "backend", T::string, "\"auto\"", -inf, inf, false, "auto|cpu|cuda", "",
     "where P2P runs: auto (CUDA when a GPU is usable), cpu, or cuda (an error without one)"},
    {"gpu", "device", T::integer, "-1", -1, 64, false, nullptr, "",
     "CUDA device index; -1: each MPI rank the device of its index among the ranks on its node, modulo the "
     "node's devices (one GPU per rank; ranks share GPUs when there are more ranks than GPUs)"},
    {"gpu", "p2p_precision", T::string, "\"float\"", -inf, inf, false, "float|double", "",
     "arithmetic of the P2P kernel"},
    {"gpu", "memory_limit_gib", T::real, "0", 0, inf, false, nullptr, "GiB",
     "device memory the CUDA step engine may plan with; 0: all that is free. The plan is checked "
     "against it before any work"},
    {"gpu", "tree_rebuild_every", T::integer, "4", 1, 16, false, nullptr, "",
     "the CUDA step engine keeps its short-range tree between steps: a PM step builds it afresh when this "
     "many PM steps have passed since the last that did (or earlier, when the last PM step's P2P pairs grew "
     "by 10% over the first on that tree); the PM steps between and the sub-steps refit it to the moved "
     "particles. 1: a new tree at every PM step. Checkpoints wait for a PM step that builds it (a restart "
     "builds one), at most this many less one, and so does a stop signal's checkpoint: hence at most 16 "
     "(beyond 4 a 256^3 run gained nothing measurable)"},
    {"gpu", "rank_exchange", T::string, "\"auto\"", -inf, inf, false, "auto|staged|ipc", "",
     "how the CUDA step engine's ranks move device data to each other (the ghost refresh, the PM's slab "
     "transposes): ipc copies device to device through CUDA IPC (every rank on one node, their GPUs the "
     "same or peer-accessible; an error otherwise), staged through pinned host memory and MPI, auto ipc "
     "where it works (else staged, the reason logged). The environment's ORBIS_RANK_EXCHANGE applies "
     "where this is auto"},
    {"gpu", "tree_max_refits", T::integer, "0", 0, 1e6, false, nullptr, "",
     "the CUDA step engine builds its tree afresh after this many refits in a row at any step, sub-steps "
     "included; 0: no limit, sub-steps refit (since positions are wrapped only at builds the refitted "
     "leaves stay compact: on the 256^3 headline limit 8 built at 91 sub-steps for 2.2 s more and the "
     "same P(k); over ranks sub-steps always refit). Isolated systems ([gravity] boundary = \"vacuum\") "
     "take 4 unless it is given: a cusp's particles leave a refitted leaf within tens of sub-steps"},
};

std::string format_number(double v) {
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return fmt::format("{:g}", v);
}

}  // namespace

const std::vector<ParamSpec>& param_schema() { return kSchema; }

const std::vector<std::string>& param_sections() {
  static const std::vector<std::string> sections = [] {
    std::vector<std::string> out;
    for (const auto& spec : kSchema)
      if (out.empty() || out.back() != spec.section) out.emplace_back(spec.section);
    return out;
  }();
  return sections;
}

const ParamSpec* find_param(const std::string& section, const std::string& key) {
  for (const auto& spec : kSchema)
    if (section == spec.section && key == spec.key) return &spec;
  return nullptr;
}

std::string type_name(ParamType type) {
  switch (type) {
    case ParamType::integer: return "integer";
    case ParamType::real: return "number";
    case ParamType::boolean: return "boolean";
    case ParamType::string: return "string";
    case ParamType::real_list: return "list of numbers";
  }
  return "?";
}

std::string accepted_range(const ParamSpec& spec) {
  if (spec.choices) {
    std::string list = spec.choices;
    for (auto& c : list)
      if (c == '|') c = ',';
    std::string out;
    for (std::size_t i = 0; i < list.size(); ++i) {
      out += list[i];
      if (list[i] == ',') out += ' ';
    }
    return "one of: " + out;
  }
  if (spec.type == ParamType::boolean) return "true or false";
  if (spec.type == ParamType::string) return "any string";
  const bool has_min = !std::isinf(spec.min), has_max = !std::isinf(spec.max);
  std::string what = spec.type == ParamType::real_list ? "each value" : "value";
  if (has_min && has_max)
    return fmt::format("{} {} {} <= {}", format_number(spec.min), spec.min_exclusive ? "<" : "<=",
                       what, format_number(spec.max));
  if (has_min)
    return fmt::format("{} {} {}", what, spec.min_exclusive ? ">" : ">=", format_number(spec.min));
  if (has_max) return fmt::format("{} <= {}", what, format_number(spec.max));
  return "any " + type_name(spec.type);
}

std::string scope_name(ParamScope scope) {
  switch (scope) {
    case ParamScope::periodic: return "periodic";
    case ParamScope::vacuum: return "vacuum";
    case ParamScope::both: return "both";
  }
  return "?";
}

std::string schema_markdown() {
  std::ostringstream out;
  out << "# orbis parameters\n\n"
      << "Generated from `src/core/params_schema.cpp` by `orbis params`; a unit test keeps it in\n"
      << "step. Parameter files are TOML; a key missing from this table is an error, and so is a\n"
      << "required key left out, a value of the wrong type or out of range. Keys marked *(periodic)*\n"
      << "belong to cosmological boxes, *(vacuum)* to isolated systems ([gravity] boundary): a key of\n"
      << "the other kind is an error, and a required one is required only in its own kind.\n";
  for (const auto& section : param_sections()) {
    out << "\n## [" << section << "]\n\n"
        << "| key | type | default | accepted | unit | meaning |\n"
        << "| --- | --- | --- | --- | --- | --- |\n";
    for (const auto& spec : kSchema) {
      if (section != spec.section) continue;
      std::string def = spec.default_toml == nullptr ? "**required**"
                        : *spec.default_toml == '\0' ? "(derived)"
                                                     : fmt::format("`{}`", spec.default_toml);
      out << "| `" << spec.key << "` | " << type_name(spec.type) << " | " << def << " | "
          << accepted_range(spec) << " | " << spec.unit << " | "
          << (spec.scope == ParamScope::both ? "" : "*(" + scope_name(spec.scope) + ")* ") << spec.help << " |\n";
    }
  }
  return out.str();
}

}  // namespace orbis
