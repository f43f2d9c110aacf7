// A rank's part of a distributed run's particles (issue #17): its domain is a run of the
// global ORB tree's top nodes (domain/node_domains.hpp), its particles are those nodes'
// members in the order the serial tree puts them, and its ghosts are the whole remote top
// nodes within reach. The step engines call it; on one rank it does nothing.
//
// At every PM step (update): the top tree of depth d over all ranks' current positions
// (domain/global_top_tree.hpp, bit for bit the serial OrbTree's top; d is the walk's
// ShortRangeSettings::top_levels, set from N alone), its G leaves ("groups", tree order)
// cut into one run per rank, every particle migrates to the rank owning its group, and each
// rank orders its particles group by group in subtree order (the order OrbTree::build of the
// group alone gives). A group's subtree in the serial tree depends on its members alone, so
// a rank's forest of own and ghost groups (OrbTree::assemble_forest) holds bitwise the serial
// tree's depth-d subtrees, and the walk (which splits every node above depth d) meets the
// same pairs below them: the forces equal the one-rank run's but for the summation order.
//
// Balance: each rank reports the work of its last force computations (interactions counted
// by the short-range solver: deterministic, unlike timings, so a run's domains and results
// are the same every time). The runs are rebuilt when the largest exceeds the mean by more
// than kRebalance (and at the first update), each group weighted by its members' ranks' work
// per particle, no rank above NodeDomains::kMaxParticleShare times the mean particle count;
// otherwise the same runs of groups are kept (the groups themselves are the new top tree's).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/comm.hpp"
#include "core/particles.hpp"
#include "core/vec3.hpp"
#include "domain/global_top_tree.hpp"
#include "domain/node_domains.hpp"
#include "domain/particle_exchange.hpp"

namespace orbis {

struct DomainReport {
  double imbalance = 1;         // largest rank's measured work / the mean (1: none measured)
  bool rebuilt = false;         // the runs were (re)built at the last update
  std::uint64_t migrated = 0;   // particles that left this rank at the last update
  std::uint64_t ghosts = 0;     // ghosts imported at the last with_ghosts()
  std::uint64_t ghost_groups = 0;   // the whole top nodes they make up
  bool rechosen = false;        // the last with_ghosts() (plan_ghosts()) chose the ghosts (else refreshed them)
  // The ghosts' positions of the last choice or refresh (24 bytes each): what this rank sends
  // to and receives from the others at each exchange (with GPUs, also what crosses its bus).
  std::uint64_t ghost_bytes_sent = 0, ghost_bytes_received = 0;
  // Where the time went (this rank, wall seconds, collectives' waiting included): of the last
  // update() and of the last with_ghosts().
  struct Times {
    double top_tree = 0;        // GlobalTopTree::build
    double top_comm = 0;        //   of which inside its reductions
    int top_levels = 0;         //   levels split
    int top_rounds = 0;         //   histogram rounds, all levels
    double runs = 0;            // each particle's group, the runs (re)built
    double migrate = 0;         // the migration (update()'s part 2)
    double order = 0;           // subtree order and the permutation
    double ghost_choice = 0;    // boxes gathered, pairs tested, routes (0 when refreshed)
    double ghost_tests = 0;     //   of which the pairs' tests
    double ghost_routes = 0;    //   of which the routes rebuilt (when a pair changed)
    double ghost_exchange = 0;  // with_ghosts(): copy, boxes, the ghosts' positions sent
  } times;
};

class RankDomains {
 public:
  static constexpr double kRebalance = 1.1;
  // The ghosts' reach beyond r_cut, and so how far the groups' boxes may grow before the
  // choice is made again. The ghosts are whole top nodes, several r_cut wide, which touch
  // their neighbours: a longer reach adds few. Over the headline run (256^3 on 2 ranks sharing
  // an H200, 2026-11-30) 0.25, 0.5 and 1.0 brought the same ghosts (45.75 GB received over the
  // run) with 498, 259 and 26 re-choices, and 5.2, 3.9 and 3.6 s of domain work in 33.8, 32.3
  // and 32.1 s of steps; tests/bench/bench_domains (128^3 in 500 Mpc/h, r_cut 25.8 Mpc/h) 0.97,
  // 0.99 and 1.01 ghosts per own particle. 0.5 takes most of the gain for a third of the
  // volume's cost (0.1 against 0.25 had been 723 against 461 re-choices).
  static constexpr double kGhostMargin = 0.5;

  // max_leaf, top_depth: the short-range tree's (ShortRangeSettings::max_leaf, top_levels).
  RankDomains(double box_mpc_h, int max_leaf, int top_depth, const Comm& comm);

  // Collective. At a PM step, before the forces: the top tree over the current positions,
  // the runs (re)built if there are none, they are for another group count, or the work
  // reported since the last update is out of balance; then every particle moves to its
  // group's rank and each rank's particles are put group by group in subtree order.
  // work: this rank's interactions since the last update.
  void update(Particles& particles, double work);

  // update() in three parts, for a caller that keeps the particles elsewhere (the CUDA engine,
  // on the device: gpu/domain_update_cuda.cuh); update() calls them in sequence.
  // 1. Collective, several ranks: the groups of `top` (the top tree of this rank's particles
  //    at their positions now, built by the caller in top_seconds, top_comm_seconds of them in
  //    collectives) and the runs, (re)built as update() says. Returns each particle's group
  //    (tree order); the particle belongs to rank domains().owner(group).
  std::vector<std::uint32_t> assign_groups(const GlobalTopTree& top, double work, double top_seconds,
                                           double top_comm_seconds);
  // 1, for a caller that maps its particles to the groups itself (the CUDA engine, on the
  //    device, from top built without particle_node): particle i's group is the position of
  //    its top node in group_nodes(top) (the groups' nodes' shape indices, ascending: the
  //    std::lower_bound of the node, which is one of them). local_count[g]: this rank's
  //    particles in group g (one entry a group), counted in count_seconds (part of the groups'
  //    time in the log). The same runs as assign_groups(top, ...) above.
  static std::vector<std::int32_t> group_nodes(const GlobalTopTree& top);
  void assign_groups(const GlobalTopTree& top, const std::vector<std::uint64_t>& local_count, double work,
                     double top_seconds, double top_comm_seconds, double count_seconds);
  // 2. The caller moves the particles to their ranks: migrate_particles, or its own packing
  //    around exchange_migrants (domain/particle_exchange.hpp).
  // 3. The caller put its n particles group by group, each in subtree order
  //    (OrbTree::subtree_order_by_group's order and offsets, of the groups less
  //    domains().begin(rank)); own_offsets: where each own group begins, n last. migrated: how
  //    many left this rank; the seconds parts 2 and 3 took, for the log. Checks the groups'
  //    counts against the top tree's, and logs the update.
  void finish_update(std::vector<std::uint32_t> own_offsets, std::size_t n, std::uint64_t migrated,
                     double migrate_seconds, double order_seconds);

  // Collective: pos (this rank's particles as update() left them, moved since) followed by
  // the ghosts: every other rank's group whose box comes within r_cut (1 + kGhostMargin) of
  // one of this rank's groups' boxes (walk_pair's gap test, nearest image), whole, by source
  // rank and group, each in its owner's order. group_offsets() then delimits the groups of
  // the result (own first). One rank: pos itself, one group.
  // The choice is kept, only the positions exchanged, while no group's box sticks out of its
  // reference box (the box its pairs were last tested at) by more than
  // r_cut kGhostMargin / (2 sqrt 3) on any side (then no pair of groups left out can come
  // within r_cut: every group the walk keeps with an own group is there, also one whose
  // particle crossed a face of the box and whose box spans it); else the groups' current
  // boxes are allgathered and the choice is made again incrementally: the groups that stuck
  // out take their current box as reference and only their pairs are tested again (all pairs
  // at the first choice after update()), the groups' order within each the same.
  // *same_set: the result holds the same particles in the same order as at the last call
  // (the short-range solver may refit its tree): also after a new choice that found the same
  // groups.
  const std::vector<Vec3d>& with_ghosts(const std::vector<Vec3d>& pos, double r_cut, bool* same_set = nullptr);

  // with_ghosts()'s decision from the own groups' boxes alone, for a caller that holds the
  // positions elsewhere (the GPU engine: gpu/ghost_exchange_cuda.cuh). Collective, several
  // ranks, after update(). own_lo/own_hi: each own group's tight box at the current positions
  // (own_offsets() delimits the groups; an empty group's is lo = +inf, hi = -inf). Keeps or
  // chooses again the ghosts as with_ghosts() does, and sets group_offsets(), groups() and
  // report(); the caller then sends its particles routes->sent (by destination rank,
  // routes->counts) and receives routes->recv_counts from each rank, in rank order, after
  // its own particles: with_ghosts()'s result. It is what with_ghosts() itself calls.
  struct GhostPlan {
    bool kept = false;                     // the same ghosts as at the last call (same_set; chosen
                                           // again or not: report().rechosen)
    const GhostRoutes* routes = nullptr;   // valid until the next plan_ghosts() or update()
  };
  GhostPlan plan_ghosts(const std::vector<Vec3d>& own_lo, const std::vector<Vec3d>& own_hi, double r_cut);
  // Where this rank's groups begin in its particles, as update() ordered them (own group k:
  // [own_offsets()[k], own_offsets()[k + 1])); empty before the first update and on one rank.
  const std::vector<std::uint32_t>& own_offsets() const { return own_offsets_; }
  // [group_offsets()[k], group_offsets()[k + 1]): group k of with_ghosts()'s result.
  const std::vector<std::uint32_t>& group_offsets() const { return group_offsets_; }
  // Their top-tree group numbers (tree order), own groups first, then the ghosts'.
  const std::vector<std::uint32_t>& groups() const { return groups_; }

  // What decides the domains of the steps to come, for a checkpoint written at the end of a
  // PM step (right after update()): the runs in force ("" while there are none: one rank, or
  // before the first update). restore() takes it back in a fresh RankDomains; its first
  // update() then keeps those runs (the work it is given is what the restart measured since,
  // none), as the uninterrupted run's next update does when balanced. The rest is a function
  // of the particles: the top tree, the migration and the order are made afresh at every
  // update(), the ghosts chosen there, and the work since the update is counted again by the
  // restart's first force computation, which repeats the one after it.
  std::string state() const;
  void restore(const std::string& state, const std::string& what);

  const NodeDomains& domains() const { return domains_; }
  const DomainReport& report() const { return report_; }
  const Comm& comm() const { return comm_; }
  int top_depth() const { return top_depth_; }
  int max_leaf() const { return max_leaf_; }

 private:
  // The pairs (own group, other rank's group) walk_pair keeps at `reach` between the
  // reference boxes: all of them (full) or those of the groups `moved` marks; then the routes,
  // rebuilt where a pair changed its answer on some rank. True: other ghosts or routes than
  // before.
  bool choose_ghosts(double reach, bool full, const std::vector<unsigned char>& moved);
  // Both assign_groups' work past each particle's group: the report, the groups' counts and
  // boxes from top (`nodes`: group_nodes(top)), the runs (re)built as update() says for the n
  // particles here; local_count() (this rank's particles per group) is called only then.
  // groups_seconds: spent by the caller on the particles' groups.
  void assign_runs(const GlobalTopTree& top, const std::vector<std::int32_t>& nodes, std::size_t n, double work,
                   double top_seconds, double top_comm_seconds, double groups_seconds,
                   const std::function<std::vector<std::uint64_t>()>& local_count);
  void routes_from_near();

  Comm comm_;
  double box_;
  int max_leaf_, top_depth_;
  bool built_ = false;
  NodeDomains domains_;
  DomainReport report_;
  // Of the last update: every group's member count and box (tree order), and where this
  // rank's groups begin in its particles (own_offsets_[k]: group domains_.begin(rank) + k).
  std::vector<std::uint32_t> group_count_;
  std::vector<Vec3d> group_lo_, group_hi_;
  std::vector<std::uint32_t> own_offsets_;
  bool updated_ = false;
  bool top_boxes_current_ = false;   // group_lo_/hi_ are the boxes at the current positions
  // with_ghosts()'s result and its groups.
  std::vector<Vec3d> with_ghosts_;
  std::vector<std::uint32_t> group_offsets_, groups_;
  // The current ghost choice: what was sent where, at which positions and r_cut.
  bool ghosts_chosen_ = false;
  GhostRoutes routes_;
  std::vector<Vec3d> ghost_send_;   // refresh_ghosts' packing buffer, kept between calls
  // Every group's reference box (the same on every rank): the box its pairs were last tested
  // at; near_[(a - own begin) * groups + b]: own group a and group b of another rank were
  // kept there. near_ranks_[(a - own begin) * ranks + r]: rank r's groups near own group a;
  // near_own_[b]: own groups near group b.
  std::vector<Vec3d> ref_lo_, ref_hi_;
  std::vector<unsigned char> near_;
  std::vector<std::uint32_t> near_ranks_, near_own_;
  std::vector<Vec3d> own_lo_, own_hi_;         // with_ghosts(): the own groups' boxes at its call
  double chosen_r_cut_ = 0;
};

}  // namespace orbis
