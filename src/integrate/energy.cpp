#include "integrate/energy.hpp"

#include <algorithm>
#include <cmath>
#include <optional>

#include "core/error.hpp"
#include "core/log.hpp"
#include "core/params.hpp"
#include "core/periodic_extent.hpp"
#include "core/units.hpp"
#include "domain/particle_exchange.hpp"
#include "fmm/pair_energy.hpp"
#include "integrate/step_engine.hpp"
#if defined(ORBIS_HAVE_CUDA)
#include "gpu/pm_cuda.hpp"
#include "gpu/pm_cuda_ranks.hpp"
#endif

namespace orbis {
namespace {

// int_0^X u erfc(u) du = X^2 erfc(X) / 2 - X exp(-X^2) / (2 sqrt(pi)) + erf(X) / 4 (-> 1/4).
double integral_u_erfc(double x) {
  return 0.5 * x * x * std::erfc(x) - x * std::exp(-x * x) / (2 * std::sqrt(units::pi)) + 0.25 * std::erf(x);
}

}  // namespace

// The mesh term's solver (energy.hpp): on one rank cuFFT's on the pair sum's device when that
// runs on CUDA; over ranks with a backend other than "cpu" the PM over ranks on the GPUs when
// every rank has a usable GPU (the CUDA step engine's condition for its own CudaPmRanks;
// collective); the host's (FFTW, over the ranks of comm) otherwise. The host's meshes are its
// own, kept between checks; the devices' come from the device pool for each check and go back.
struct EnergyCheck::MeshSolver {
  std::unique_ptr<PmSolver> host;
#if defined(ORBIS_HAVE_CUDA)
  std::unique_ptr<CudaPmSolver> device;
  std::unique_ptr<CudaPmRanks> devices;   // built for the energy: no slabs held between checks
#endif

  MeshSolver(const PmSettings& settings, const Comm& comm, const P2PEvaluator* pairs, const std::string& backend,
             int device_index) {
#if defined(ORBIS_HAVE_CUDA)
    if (comm.size() == 1 && pairs && pairs->name() == "cuda") {
      device = std::make_unique<CudaPmSolver>(settings, device_index);
      return;
    }
    if (comm.size() > 1 && backend != "cpu") {
      std::string why;
      devices = make_cuda_pm_ranks(settings, comm, device_index, &why, CudaPmRanks::Use::energy);
      if (devices) {
        log::info("energy check: {}", devices->describe());
        return;
      }
      log::info("energy check: the mesh term on the host's x slabs ({})", why);
    }
#else
    (void)pairs;
    (void)backend;
    (void)device_index;
#endif
    host = std::make_unique<PmSolver>(settings, comm);
  }

  double potential_energy(const std::vector<Vec3d>& pos, double mass) {
#if defined(ORBIS_HAVE_CUDA)
    if (device) return device->potential_energy(pos, mass);
    if (devices) return devices->potential_energy(pos, mass);
#endif
    return host->potential_energy(pos, mass);
  }
};

double split_self_energy(std::size_t n, double g_mass, double mass, double r_s) {
  return static_cast<double>(n) * g_mass * mass / (2 * std::sqrt(units::pi) * r_s);
}

// (1/2) G M rho_bar 4 pi int_0^cut r erfc(r/2r_s) dr = 8 pi G M^2 r_s^2 I(cut / 2r_s) / V;
// with the shifted cut (shift: its a and offset) the pair potential's a r - offset adds
// (1/2) G M rho_bar 4 pi (a cut^4 / 4 - offset cut^3 / 3) (softening neglected, as above).
double split_background_energy(std::size_t n, double g_mass, double mass, double box, double r_s, double cut,
                               const CutShiftTerms& shift) {
  const double total_mass = static_cast<double>(n) * mass;
  const double per_mass2 = g_mass * total_mass * static_cast<double>(n) / (box * box * box);   // G M^2 / V
  double e = 8 * units::pi * per_mass2 * r_s * r_s * integral_u_erfc(cut / (2 * r_s));
  if (shift.a != 0)
    e += 2 * units::pi * per_mass2 * (shift.a * cut * cut * cut * cut / 4 - shift.offset * cut * cut * cut / 3);
  return e;
}

EnergyCheck::EnergyCheck(const Params& params, const Comm& comm) : comm_(comm) {
  every_ = params.get_int("analysis.energy_check_every");
  warning_ = params.get_real("analysis.energy_drift_warning");
  if (!params.get_bool("analysis.energy_check")) why_off_ = params.describe("analysis.energy_check") + " = false";
  else if (params.get_string("gravity.solver") != "treepm") why_off_ = "it needs the TreePM split ([gravity] solver)";
  enabled_ = why_off_.empty();
  if (!enabled_) return;
  box_ = params.get_real("box.size_mpc_h");
  short_ = short_range_settings(params, 1.0);
  cut_ = p2p_settings_of(short_).r_cut;   // the force's: min(r_cut, 6 r_s) with the table
  pm_settings_ = PmSettings::from_params(params);
  backend_ = params.get_string("gpu.backend");
  device_ = gpu_device_for_rank(params.get_int("gpu.device"), comm);
}

EnergyCheck::~EnergyCheck() = default;

PotentialEnergy EnergyCheck::potential(const Particles& particles) {
  if (!enabled()) fail("internal: energy check: potential() while off ({})", why_off_);
  if (!pairs_) pairs_ = make_p2p_evaluator(backend_, device_);
  if (!mesh_) mesh_ = std::make_unique<MeshSolver>(pm_settings_, comm_, pairs_.get(), backend_, device_);
  // The mass every rank agrees on (a rank left with no particles may not know it).
  const double m = comm_.max(particles.mass), g_mass = units::G * m;
  const auto n = static_cast<std::size_t>(comm_.sum<std::uint64_t>(particles.size()));
  PotentialEnergy w;
  w.mesh = mesh_->potential_energy(particles.pos, m);   // summed over the ranks
  PairPotentialInput pairs;
  pairs.box = box_;
  pairs.r_s = short_.r_s;
  pairs.cut = cut_;
  pairs.cut_shift = cut_shift_of(short_);
  pairs.softening = short_.softening;
  if (comm_.size() == 1) {
    pairs.positions = &particles.pos;
    w.pairs = -g_mass * m * pairs_->pair_potential_sum(pairs);
  } else {
    // This rank's particles, then the ghosts: every other rank's particle within the cut of
    // one of them (a hair more, so that no pair just inside the cut is lost to the rounding
    // of the extent's distance; the sum applies the cut itself). The extent's centre is
    // where this rank's particles are, wherever its domain lies. The sum runs where the
    // one-rank sum does (the rank's GPU with a CUDA backend).
    std::vector<Vec3d> with_ghosts = particles.pos;
    const std::vector<Vec3d> ghosts =
        import_ghosts(particles.pos, PeriodicExtent::of(particles.pos, box_).centre, cut_ * (1 + 1e-9), box_, comm_);
    with_ghosts.insert(with_ghosts.end(), ghosts.begin(), ghosts.end());
    pairs.positions = &with_ghosts;
    pairs.ghosts = ghosts.size();
    w.pairs = -g_mass * m * comm_.sum(pairs_->pair_potential_sum(pairs));
  }
  w.self = split_self_energy(n, g_mass, m, short_.r_s);
  w.background = split_background_energy(n, g_mass, m, box_, short_.r_s, cut_, shift_terms());
  return w;
}

CutShiftTerms EnergyCheck::shift_terms() const {
  PairPotentialInput in;
  in.r_s = short_.r_s;
  in.cut = cut_;
  in.softening = short_.softening;
  in.cut_shift = cut_shift_of(short_);
  return cut_shift_terms(in);
}

PotentialEnergy EnergyCheck::potential(StepEngine& engine) {
  if (!enabled()) fail("internal: energy check: potential() while off ({})", why_off_);
  // Over ranks the engine decides collectively: every rank gets terms, or none does and every
  // rank takes the particles' path.
  PotentialEnergyRequest request;
  request.box = box_;
  request.r_s = short_.r_s;
  request.cut = cut_;
  request.softening = short_.softening;
  request.cut_shift = cut_shift_of(short_);
  const std::optional<PotentialEnergyTerms> terms = engine.potential_energy_terms(request);
  last_mesh_from_forces_ = terms && terms->mesh_from_forces;
  if (!terms) return potential(engine.particles());
  if (!engine_terms_logged_) log::info("energy check: W from the particles where the step engine holds them");
  engine_terms_logged_ = true;
  const double m = terms->mass, g_mass = units::G * m;
  const auto n = static_cast<std::size_t>(terms->count);
  PotentialEnergy w;
  w.mesh = terms->mesh;
  w.pairs = -g_mass * m * terms->pair_sum;
  w.self = split_self_energy(n, g_mass, m, short_.r_s);
  w.background = split_background_energy(n, g_mass, m, box_, short_.r_s, cut_, shift_terms());
  return w;
}

double EnergyCheck::update(EnergyBudget& b, double a, double sum_p2, double mass, const PotentialEnergy* potential) {
  const double k = scaled_kinetic_energy(sum_p2, mass, a) / a;   // K itself
  if (!b.started) {
    if (!potential) return NAN;   // it starts where W is known
    b = EnergyBudget{};
    b.started = 1;
    b.a_start = b.a_last = a;
    b.k_last = k;
    b.ak_start = a * k;
    b.aw_start = potential->total();
    return 0.0;
  }
  b.k_integral += 0.5 * (k + b.k_last) * (a - b.a_last);
  b.a_last = a;
  b.k_last = k;
  if (!potential) return NAN;
  const double aw = potential->total();
  return (a * k + aw + b.k_integral - (b.ak_start + b.aw_start)) / std::max(std::abs(aw), a * k);
}

}  // namespace orbis
