#include "integrate/stop_signals.hpp"

#include <time.h>

#include <atomic>
#include <csignal>
#include <cstdint>

namespace orbis {
namespace {

volatile std::sig_atomic_t g_received = 0;
// When the first signal came (CLOCK_MONOTONIC, ms); lock-free, so the handler may use it.
std::atomic<std::int64_t> g_first_ms{0};
static_assert(std::atomic<std::int64_t>::is_always_lock_free);
constexpr int kSignals[] = {SIGTERM, SIGINT, SIGUSR1};
struct sigaction g_previous[3];

// A signal within this long of the first one is the same request: timeout(1) signals both the
// process and its process group, batch systems and mpirun may signal more than once.
constexpr std::int64_t kSameRequestMs = 1000;

std::int64_t monotonic_ms() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);   // async-signal-safe
  return static_cast<std::int64_t>(t.tv_sec) * 1000 + t.tv_nsec / 1000000;
}

extern "C" void record_signal(int signal) {
  const std::int64_t now = monotonic_ms();
  if (g_received == 0) {
    g_first_ms.store(now);
    g_received = signal;
    return;
  }
  if (now - g_first_ms.load() < kSameRequestMs) return;
  // A second request, later: the user insists (a second Ctrl-C); the default action now.
  std::signal(signal, SIG_DFL);
  std::raise(signal);
}

}  // namespace

StopSignals::StopSignals() {
  g_received = 0;
  for (int i = 0; i < 3; ++i) {
    struct sigaction action {};
    action.sa_handler = record_signal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    sigaction(kSignals[i], &action, &g_previous[i]);
  }
}

StopSignals::~StopSignals() {
  // Once a stop was asked for, the process is on its way out: a late duplicate of the request
  // must not kill it with its default action after the checkpoint, so the handlers stay.
  if (g_received != 0) return;
  for (int i = 0; i < 3; ++i) sigaction(kSignals[i], &g_previous[i], nullptr);
}

int StopSignals::received() const { return g_received; }

const char* StopSignals::name(int signal) {
  switch (signal) {
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    case SIGUSR1: return "SIGUSR1";
    default: return "a signal";
  }
}

}  // namespace orbis
