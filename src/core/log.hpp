// Logging: messages carry the elapsed wall time. Only rank 0 prints information (monofonIC's
// rule: a run on 64 ranks must not print everything 64 times); warnings and errors are
// printed by whichever rank raises them, and name that rank when there are several
// (SWIFT's rule: a warning must say where it came from). A warning every rank would raise
// alike (it depends on global data) is raised by rank 0 only: warn_root.
#pragma once
#include <cstdio>
#include <string>

#include <fmt/format.h>

namespace orbis::log {

enum class Level { debug = 0, info = 1, warning = 2, error = 3 };

void set_level(Level level);
void set_rank(int rank, int ranks = 1);   // non-zero ranks print warnings and errors only
double elapsed_seconds();           // since the first call into the logger
void write(Level level, const std::string& message, bool every_rank = true);
bool stdout_is_terminal();

template <typename... Args> void info(fmt::format_string<Args...> f, Args&&... args) {
  write(Level::info, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args> void warn(fmt::format_string<Args...> f, Args&&... args) {
  write(Level::warning, fmt::format(f, std::forward<Args>(args)...));
}
// A warning that every rank would raise alike: printed once, by rank 0, without a rank tag.
template <typename... Args> void warn_root(fmt::format_string<Args...> f, Args&&... args) {
  write(Level::warning, fmt::format(f, std::forward<Args>(args)...), /*every_rank=*/false);
}
template <typename... Args> void debug(fmt::format_string<Args...> f, Args&&... args) {
  write(Level::debug, fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace orbis::log
