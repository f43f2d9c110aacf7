// SIGTERM, SIGINT and SIGUSR1 (a batch system's notice, Ctrl-C, a user's request) ask the run
// to stop cleanly: it finishes the PM step in progress, writes a checkpoint and exits 0. The
// handler only records the signal (all it may safely do) and gives the signal back its
// default action, so a second Ctrl-C ends the process at once.
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
