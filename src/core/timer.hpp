// Wall-clock timers. PhaseTimes accumulates named phases of a step (PM, tree, walk, P2P,
// M2L, I/O) for the step log line and the end-of-run summary.
#pragma once
#include <chrono>
#include <map>
#include <string>

namespace orbis {

class Stopwatch {
 public:
  Stopwatch() : start_(std::chrono::steady_clock::now()) {}
  double seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }
  void restart() { start_ = std::chrono::steady_clock::now(); }

 private:
  std::chrono::steady_clock::time_point start_;
};

class PhaseTimes {
 public:
  void add(const std::string& phase, double seconds) { seconds_[phase] += seconds; }
  double get(const std::string& phase) const {
    auto it = seconds_.find(phase);
    return it == seconds_.end() ? 0.0 : it->second;
  }
  const std::map<std::string, double>& all() const { return seconds_; }
  void clear() { seconds_.clear(); }

 private:
  std::map<std::string, double> seconds_;
};

// Times a scope into a PhaseTimes entry.
class ScopedPhase {
 public:
  ScopedPhase(PhaseTimes& times, std::string phase) : times_(times), phase_(std::move(phase)) {}
  ~ScopedPhase() { times_.add(phase_, watch_.seconds()); }
  ScopedPhase(const ScopedPhase&) = delete;
  ScopedPhase& operator=(const ScopedPhase&) = delete;

 private:
  PhaseTimes& times_;
  std::string phase_;
  Stopwatch watch_;
};

}  // namespace orbis
