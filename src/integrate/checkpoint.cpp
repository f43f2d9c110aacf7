#include "integrate/checkpoint.hpp"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/log.hpp"
#include "core/params.hpp"
#include "io/atomic_file.hpp"
#include "io/checked_file.hpp"

namespace orbis {
namespace {

const std::string kPrefix = "checkpoint_", kSuffix = ".orbis", kRank = "_rank_", kOf = "_of_";

// RunState as bytes: its fields in a fixed order, then the ETA's measured costs.
class Bytes {
 public:
  template <typename T>
  void put(const T& value) {
    const auto* p = reinterpret_cast<const char*>(&value);
    text_.append(p, sizeof(T));
  }
  const std::string& text() const { return text_; }

 private:
  std::string text_;
};

class BytesReader {
 public:
  BytesReader(const std::string& text, const std::string& path) : text_(text), path_(path) {}
  template <typename T>
  void get(T& value) {
    if (at_ + sizeof(T) > text_.size()) fail("'{}': its run state is shorter than this orbis expects", path_);
    std::memcpy(&value, text_.data() + at_, sizeof(T));
    at_ += sizeof(T);
  }
  bool done() const { return at_ == text_.size(); }

 private:
  const std::string& text_;
  const std::string& path_;
  std::size_t at_ = 0;
};

std::string state_bytes(const RunState& s, const MeasuredCosts& costs) {
  Bytes b;
  b.put(s.a);
  b.put(s.pm_a_begin);
  b.put(s.pm_a_end);
  b.put(s.tick);
  b.put(s.bins);
  b.put(s.steps);
  b.put(s.pm_steps);
  b.put(s.particle_steps);
  b.put(s.output_index);
  b.put(s.seconds);
  // The four measured numbers of each cost record (the ETA's extra ones are not kept).
  const auto put_cost = [&](const CostRecord& c) { b.put(c.ln_a), b.put(c.dln_a), b.put(c.particle_steps), b.put(c.seconds); };
  put_cost(costs.pm_step);
  b.put(static_cast<std::uint64_t>(costs.history.size()));
  for (const CostRecord& c : costs.history) put_cost(c);
  return b.text();
}

RunState state_from(const std::string& text, const std::string& path, MeasuredCosts& costs) {
  RunState s;
  BytesReader r(text, path);
  r.get(s.a);
  r.get(s.pm_a_begin);
  r.get(s.pm_a_end);
  r.get(s.tick);
  r.get(s.bins);
  r.get(s.steps);
  r.get(s.pm_steps);
  r.get(s.particle_steps);
  r.get(s.output_index);
  r.get(s.seconds);
  const auto get_cost = [&](CostRecord& c) { r.get(c.ln_a), r.get(c.dln_a), r.get(c.particle_steps), r.get(c.seconds); };
  get_cost(costs.pm_step);
  std::uint64_t history = 0;
  r.get(history);
  if (history > (std::uint64_t{1} << 32)) fail("'{}': a step history of {} entries", path, history);
  costs.history.resize(history);
  for (CostRecord& c : costs.history) get_cost(c);
  if (!r.done()) fail("'{}': its run state is longer than this orbis expects", path);
  return s;
}

// "section.key\tvalue\n" per parameter.
std::string parameter_text(const std::vector<std::pair<std::string, std::string>>& parameters) {
  std::string text;
  for (const auto& [name, value] : parameters) text += name + '\t' + value + '\n';
  return text;
}

std::vector<std::pair<std::string, std::string>> parameters_from(const std::string& text) {
  std::vector<std::pair<std::string, std::string>> out;
  std::size_t at = 0;
  while (at < text.size()) {
    const std::size_t end = text.find('\n', at), tab = text.find('\t', at);
    if (end == std::string::npos || tab == std::string::npos || tab > end) break;
    out.emplace_back(text.substr(at, tab - at), text.substr(tab + 1, end - tab - 1));
    at = end + 1;
  }
  return out;
}

// What a checkpoint file's name says: checkpoint_SSSSSSSS.orbis (rank 0 of 1) or
// checkpoint_SSSSSSSS_rank_RRRR_of_NNNN.orbis; steps < 0: not a checkpoint's name.
struct FileName {
  std::int64_t steps = -1;
  int rank = 0, ranks = 1;
};

bool all_digits(const std::string& text) {
  return !text.empty() && text.size() <= 18 &&
         std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
}

FileName parse_name(const std::string& file_name) {
  FileName out;
  if (file_name.size() <= kPrefix.size() + kSuffix.size() || file_name.rfind(kPrefix, 0) != 0 ||
      file_name.compare(file_name.size() - kSuffix.size(), kSuffix.size(), kSuffix) != 0)
    return out;
  const std::string body = file_name.substr(kPrefix.size(), file_name.size() - kPrefix.size() - kSuffix.size());
  const std::size_t rank_at = body.find(kRank), of_at = body.find(kOf);
  if (rank_at == std::string::npos) {
    if (all_digits(body)) out.steps = std::stoll(body);
    return out;
  }
  if (of_at == std::string::npos || of_at < rank_at) return out;
  const std::string steps = body.substr(0, rank_at);
  const std::string rank = body.substr(rank_at + kRank.size(), of_at - rank_at - kRank.size());
  const std::string ranks = body.substr(of_at + kOf.size());
  if (!all_digits(steps) || !all_digits(rank) || !all_digits(ranks) || ranks.size() > 9) return out;
  out.rank = std::stoi(rank);
  out.ranks = std::stoi(ranks);
  if (out.ranks < 2 || out.rank >= out.ranks) return out;
  out.steps = std::stoll(steps);
  return out;
}

// The checkpoints of a folder: for each (steps, ranks), how many of its files are there.
struct FileSet {
  std::int64_t steps = 0;
  std::int32_t ranks = 1;
  std::int32_t present = 0;
  bool complete() const { return present == ranks; }
};

// Newest first (most steps; at equal steps, more ranks first: an order, nothing more).
std::vector<FileSet> list_sets(const std::string& directory) {
  std::map<std::pair<std::int64_t, int>, std::set<int>> found;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(directory.empty() ? "." : directory, ec)) {
    const FileName name = parse_name(entry.path().filename().string());
    if (name.steps >= 0) found[{name.steps, name.ranks}].insert(name.rank);
  }
  std::vector<FileSet> sets;
  for (const auto& [key, ranks] : found)
    sets.push_back(FileSet{key.first, key.second, static_cast<std::int32_t>(ranks.size())});
  std::sort(sets.begin(), sets.end(), [](const FileSet& x, const FileSet& y) {
    return x.steps != y.steps ? x.steps > y.steps : x.ranks > y.ranks;
  });
  return sets;
}

std::string set_name(const std::string& directory, const FileSet& set) {
  return set.ranks == 1 ? fmt::format("'{}'", checkpoint_path(directory, set.steps))
                        : fmt::format("the {} files of step {} ('{}', ...)", set.ranks, set.steps,
                                      checkpoint_path(directory, set.steps, 0, set.ranks));
}

void remove_set(const std::string& directory, const FileSet& set) {
  std::error_code ec;
  for (int r = 0; r < set.ranks; ++r) std::filesystem::remove(checkpoint_path(directory, set.steps, r, set.ranks), ec);
}

}  // namespace

std::string checkpoint_path(const std::string& directory, std::int64_t steps, int rank, int ranks) {
  if (ranks == 1) return join_path(directory, fmt::format("{}{:08d}{}", kPrefix, steps, kSuffix));
  return join_path(directory,
                   fmt::format("{}{:08d}{}{:04d}{}{:04d}{}", kPrefix, steps, kRank, rank, kOf, ranks, kSuffix));
}

std::vector<std::string> find_checkpoints(const std::string& directory) {
  std::vector<std::pair<std::int64_t, std::string>> found;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(directory.empty() ? "." : directory, ec)) {
    const std::int64_t steps = parse_name(entry.path().filename().string()).steps;
    if (steps >= 0) found.emplace_back(steps, entry.path().string());
  }
  std::sort(found.begin(), found.end(), [](const auto& x, const auto& y) {
    return x.first != y.first ? x.first > y.first : x.second < y.second;
  });
  std::vector<std::string> paths;
  for (auto& f : found) paths.push_back(std::move(f.second));
  return paths;
}

std::string write_checkpoint(const std::string& directory, const Particles& particles, const RunState& state,
                             const MeasuredCosts& costs, const Params& params, const std::string& domains,
                             const Comm& comm) {
  const std::string path = checkpoint_path(directory, state.steps, comm.rank(), comm.size());
  run_collectively(comm, [&] {
    const auto parameters = params.flat();
    const std::uint64_t hash = physics_hash(parameters);
    CheckedFileWriter file(path);
    file.section("parameters", parameter_text(parameters).data(), parameter_text(parameters).size());
    file.section("physics_hash", &hash, sizeof hash);
    const std::string state_text = state_bytes(state, costs);
    file.section("run_state", state_text.data(), state_text.size());
    file.section("energy_budget", &state.energy, sizeof state.energy);   // apart: older checkpoints lack it
    // Which share of which checkpoint (a file renamed by hand is not taken for another).
    const std::int64_t share[3] = {state.steps, comm.rank(), comm.size()};
    file.section("share", share, sizeof share);
    if (!domains.empty()) file.section("domains", domains.data(), domains.size());
    file.section("mass", &particles.mass, sizeof particles.mass);
    file.section("pos", particles.pos);
    file.section("mom", particles.mom);
    file.section("id", particles.id);
    file.section("time_bin", particles.time_bin);
    // An isolated system's individual masses and types, only where it has them (so a run of one
    // mass and type writes the checkpoint it always did).
    if (particles.has_individual_masses()) file.section("masses", particles.masses);
    if (!particles.type.empty()) file.section("type", particles.type);
    file.commit();
  });
  // Every rank's file is complete (run_collectively waited for all): the previous complete
  // checkpoint stays (a fallback should this one be damaged later), older ones go, and so do
  // the pieces of older interrupted writes. Newer ones are left: a restart from an older
  // checkpoint passes their steps again and replaces them.
  run_collectively(comm, [&] {
    if (!comm.is_root()) return;
    bool kept_previous = false;
    for (const FileSet& set : list_sets(directory)) {
      if (set.steps > state.steps || (set.steps == state.steps && set.ranks == comm.size())) continue;
      if (!kept_previous && set.complete() && set.steps < state.steps) {
        kept_previous = true;
        continue;
      }
      remove_set(directory, set);
    }
  });
  return path;
}

Checkpoint read_checkpoint(const std::string& path) {
  CheckedFileReader file(path);
  Checkpoint c;
  c.path = path;
  c.parameters = parameters_from(file.bytes("parameters"));
  const auto hash = file.take<std::uint64_t>("physics_hash");
  if (hash.size() != 1) fail("'{}': its parameter hash is not one number", path);
  c.physics_hash = hash[0];
  c.state = state_from(file.bytes("run_state"), path, c.costs);
  if (file.has("share")) {   // older checkpoints (one rank only) lack it
    const auto share = file.take<std::int64_t>("share");
    if (share.size() != 3 || share[2] < 1 || share[1] < 0 || share[1] >= share[2] || share[0] != c.state.steps)
      fail("'{}': its share record is damaged", path);
    c.rank = static_cast<int>(share[1]);
    c.ranks = static_cast<int>(share[2]);
  }
  if (file.has("domains")) c.domains = file.bytes("domains");
  if (file.has("energy_budget")) {
    const auto energy = file.take<EnergyBudget>("energy_budget");
    if (energy.size() != 1) fail("'{}': its energy budget is not one record", path);
    c.state.energy = energy[0];
  }
  const auto mass = file.take<double>("mass");
  if (mass.size() != 1) fail("'{}': its particle mass is not one number", path);
  c.particles.mass = mass[0];
  c.particles.pos = file.take<Vec3d>("pos");
  c.particles.mom = file.take<Vec3d>("mom");
  c.particles.id = file.take<std::uint64_t>("id");
  c.particles.time_bin = file.take<std::uint8_t>("time_bin");
  if (file.has("masses")) c.particles.masses = file.take<double>("masses");
  if (file.has("type")) c.particles.type = file.take<std::uint8_t>("type");
  const std::size_t n = c.particles.pos.size();
  if (c.particles.mom.size() != n || c.particles.id.size() != n || c.particles.time_bin.size() != n)
    fail("'{}': its particle arrays differ in length ({} positions, {} momenta, {} IDs, {} bins)", path, n,
         c.particles.mom.size(), c.particles.id.size(), c.particles.time_bin.size());
  if ((c.particles.has_individual_masses() && c.particles.masses.size() != n) ||
      (!c.particles.type.empty() && c.particles.type.size() != n))
    fail("'{}': its particle arrays differ in length ({} positions, {} masses, {} types)", path, n,
         c.particles.masses.size(), c.particles.type.size());
  return c;
}

Checkpoint read_newest_checkpoint(const std::string& directory, const Comm& comm) {
  // Rank 0's view of the folder for every rank: all take the same decisions.
  std::vector<FileSet> sets;
  if (comm.is_root()) sets = list_sets(directory);
  comm.broadcast(sets);
  if (sets.empty())
    fail("--restart: the output folder '{}' holds no checkpoint ({}*{}); nothing to continue. Run without "
         "--restart to start the run afresh", directory, kPrefix, kSuffix);
  std::string problems;
  const auto note = [&](const std::string& problem) {
    log::warn_root("checkpoint unusable: {}", problem);
    problems += (problems.empty() ? "" : "; ") + problem;
  };
  for (const FileSet& set : sets) {
    if (!set.complete()) {   // killed while writing, or a file lost
      note(fmt::format("{} of {} files of step {} are there ('{}', ...): an interrupted write", set.present, set.ranks,
                       set.steps, checkpoint_path(directory, set.steps, 0, set.ranks)));
      continue;
    }
    // This rank's file; on another rank count, the files f with f % size == rank (a rank
    // may then get several, or none).
    Checkpoint c;
    c.rank = -1;
    c.ranks = set.ranks;
    std::string message;
    try {
      for (int f = comm.rank(); f < set.ranks; f += comm.size()) {
        Checkpoint part = read_checkpoint(checkpoint_path(directory, set.steps, f, set.ranks));
        if (part.rank != f || part.ranks != set.ranks || part.state.steps != set.steps)
          fail("'{}' holds the file of rank {} of {} at step {}, not the one its name says", part.path, part.rank,
               part.ranks, part.state.steps);
        if (c.rank < 0) {
          c = std::move(part);
          continue;
        }
        if (part.particles.mass != c.particles.mass)
          fail("'{}': its particle mass {} differs from '{}''s {}", part.path, part.particles.mass, c.path,
               c.particles.mass);
        if (part.particles.has_individual_masses() || !part.particles.type.empty() ||
            c.particles.has_individual_masses() || !c.particles.type.empty())
          fail("'{}': particles of several types or individual masses (an isolated system's) are in checkpoints of "
               "one rank only", part.path);
        Particles& p = c.particles;
        p.pos.insert(p.pos.end(), part.particles.pos.begin(), part.particles.pos.end());
        p.mom.insert(p.mom.end(), part.particles.mom.begin(), part.particles.mom.end());
        p.id.insert(p.id.end(), part.particles.id.begin(), part.particles.id.end());
        p.time_bin.insert(p.time_bin.end(), part.particles.time_bin.begin(), part.particles.time_bin.end());
      }
    } catch (const Error& e) {
      message = e.what();
    }
    // The lowest failing rank's reason, for every rank's log and the error.
    const int first_bad = comm.min(message.empty() ? comm.size() : comm.rank());
    if (first_bad == comm.size()) {
      if (!problems.empty())
        log::warn_root("restart from an older checkpoint, {}: {}", set_name(directory, set), problems);
      if (set.ranks != comm.size()) {
        // Rank 0 read file 0: its record for the ranks that read none; the domains were
        // those of another rank count.
        std::string state = state_bytes(c.state, c.costs), parameters = parameter_text(c.parameters), path = c.path;
        comm.broadcast(state);
        comm.broadcast(parameters);
        comm.broadcast(path);
        EnergyBudget energy = c.state.energy;
        comm.broadcast(energy);
        comm.broadcast(c.physics_hash);
        comm.broadcast(c.particles.mass);
        if (c.rank < 0) {
          c.state = state_from(state, path, c.costs);
          c.state.energy = energy;
          c.parameters = parameters_from(parameters);
          c.path = path;
        }
        c.rank = -1;
        c.domains.clear();
      }
      return c;
    }
    comm.broadcast(message, first_bad);
    note(message);
  }
  fail("--restart: no checkpoint in '{}' reads back whole: {}", directory, problems);
}

bool is_physics_parameter(const std::string& name) {
  for (const char* section : {"output.", "analysis.", "checkpoint."})
    if (name.rfind(section, 0) == 0) return false;
  for (const char* key : {"time.z_final", "time.output_redshifts", "time.t_end", "time.output_times",
                          "time.output_interval", "gpu.backend", "gpu.device", "gpu.memory_limit_gib"})
    if (name == key) return false;
  return true;
}

std::uint64_t physics_hash(const std::vector<std::pair<std::string, std::string>>& parameters) {
  Checksum64 sum;
  for (const auto& [name, value] : parameters)
    if (is_physics_parameter(name)) {
      const std::string line = name + '=' + value + '\n';
      sum.add(line.data(), line.size());
    }
  return sum.value();
}

void check_restart_parameters(const Checkpoint& checkpoint, const Params& now) {
  const auto current = now.flat();
  if (physics_hash(current) == checkpoint.physics_hash) return;
  std::map<std::string, std::string> saved(checkpoint.parameters.begin(), checkpoint.parameters.end());
  std::string changed;
  for (const auto& [name, value] : current) {
    if (!is_physics_parameter(name)) continue;
    const auto it = saved.find(name);
    const std::string before = it == saved.end() ? "(not set)" : it->second;
    if (before != value) changed += fmt::format("{}{} = {} (the checkpoint has {})", changed.empty() ? "" : "; ",
                                                now.describe(name), value, before);
  }
  for (const auto& [name, value] : saved)
    if (is_physics_parameter(name) && !now.has(name))
      changed += fmt::format("{}{} = {} in the checkpoint, unknown now", changed.empty() ? "" : "; ", name, value);
  if (changed.empty()) changed = "(the parameter hash differs, but no value does: a checkpoint of another orbis version?)";
  fail("--restart: '{}' was written by a run with other physics parameters: {}. Only [time] z_final and "
       "output_redshifts, [output], [analysis], [checkpoint] and where P2P runs may change on a restart",
       checkpoint.path, changed);
}

}  // namespace orbis

namespace orbis {

void check_restart_schedule(const Checkpoint& checkpoint, const OutputSchedule& schedule, const Params& now) {
  const double a = checkpoint.state.a;
  if (now.has("time.t_end")) {   // an isolated system: the schedule is in time t
    if (schedule.a_end <= a * (1 + 1e-12))
      fail("--restart: '{}' is at t = {:.6g}, but {} = {} ends the run there or before: nothing to continue (a later "
           "t_end continues it)", checkpoint.path, a, now.describe("time.t_end"), schedule.a_end);
  } else if (schedule.a_end <= a * (1 + 1e-12)) {
    fail("--restart: '{}' is at z = {:.6g}, but {} = {} ends the run there or before: nothing to continue (a lower "
         "z_final continues it)", checkpoint.path, 1 / a - 1, now.describe("time.z_final"), 1 / schedule.a_end - 1);
  }
  int before = 0;
  for (double out : schedule.a_outputs) before += out <= a * (1 + 1e-12);
  if (before != checkpoint.state.output_index) {
    if (now.has("time.t_end"))
      fail("--restart: {} and {} put {} output(s) at or before the checkpoint's t = {:.6g} ('{}'), where the run wrote "
           "{}: outputs before a checkpoint cannot change (those after it may)", now.describe("time.output_times"),
           now.describe("time.output_interval"), before, a, checkpoint.path, checkpoint.state.output_index);
    fail("--restart: {} puts {} output(s) at or before the checkpoint's z = {:.6g} ('{}'), where the run wrote {}: "
         "outputs before a checkpoint cannot change (those after it may)", now.describe("time.output_redshifts"), before,
         1 / a - 1, checkpoint.path, checkpoint.state.output_index);
  }
}

}  // namespace orbis
