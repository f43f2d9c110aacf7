// orbis::Error is the one exception type that reaches main(): its message is meant for the
// user (file, line, key, what was expected) and main() turns it into a non-zero exit.
#pragma once
#include <stdexcept>
#include <string>

#include <fmt/format.h>

namespace orbis {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) {
  throw Error(fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace orbis
