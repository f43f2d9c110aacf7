// SIGTERM, SIGINT and SIGUSR1 (a batch system's notice, Ctrl-C, a user's request) ask the run
// to stop cleanly: it finishes the PM step in progress, writes a checkpoint and exits 0. The
// handler only records the signal (all it may safely do). Signals within 1 s of the first are
// the same request (timeout(1) sends SIGTERM to the process and again to its process group);
// a signal later than that (a second Ctrl-C) ends the process at once, by the default action.
#pragma once

namespace orbis {

class StopSignals {
 public:
  StopSignals();    // installs the handlers
  ~StopSignals();   // restores the previous ones
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  // The signal received since construction (0: none).
  int received() const;
  static const char* name(int signal);   // "SIGTERM", ...
};

}  // namespace orbis
