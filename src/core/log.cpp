#include "core/log.hpp"

#include <unistd.h>

#include <chrono>

namespace orbis::log {
namespace {
Level g_level = Level::info;
int g_rank = 0, g_ranks = 1;
const auto g_start = std::chrono::steady_clock::now();
}  // namespace

void set_level(Level level) { g_level = level; }
void set_rank(int rank, int ranks) {
  g_rank = rank;
  g_ranks = ranks;
}

double elapsed_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - g_start).count();
}

bool stdout_is_terminal() { return isatty(fileno(stdout)) != 0; }

void write(Level level, const std::string& message, bool every_rank) {
  if (level < g_level) return;
  if (g_rank != 0 && (level < Level::warning || !every_rank)) return;
  static const char* tags[] = {"debug", "", "warning", "error"};
  std::string tag = tags[static_cast<int>(level)];
  if (level >= Level::warning && every_rank && g_ranks > 1) tag += fmt::format(" (rank {} of {})", g_rank, g_ranks);
  std::FILE* stream = level >= Level::warning ? stderr : stdout;
  if (stream == stdout && stdout_is_terminal()) fmt::print(stream, "\r\033[K");   // over a progress bar
  if (!tag.empty())
    fmt::print(stream, "[{:9.2f}s] {}: {}\n", elapsed_seconds(), tag, message);
  else
    fmt::print(stream, "[{:9.2f}s] {}\n", elapsed_seconds(), message);
  std::fflush(stream);
}

}  // namespace orbis::log
