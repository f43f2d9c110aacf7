// Logging: messages carry the elapsed wall time; only rank 0 speaks unless told otherwise
// (monofonIC's rule: a run on 64 ranks must not print everything 64 times).
#pragma once
#include <cstdio>
#include <string>

#include <fmt/format.h>

namespace orbis::log {

enum class Level { debug = 0, info = 1, warning = 2, error = 3 };

void set_level(Level level);
void set_rank(int rank);            // non-zero ranks are silent except for errors
double elapsed_seconds();           // since the first call into the logger
void write(Level level, const std::string& message);
bool stdout_is_terminal();

template <typename... Args> void info(fmt::format_string<Args...> f, Args&&... args) {
  write(Level::info, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args> void warn(fmt::format_string<Args...> f, Args&&... args) {
  write(Level::warning, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args> void debug(fmt::format_string<Args...> f, Args&&... args) {
  write(Level::debug, fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace orbis::log
