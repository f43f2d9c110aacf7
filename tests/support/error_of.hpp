// The bad-input tests' probe: the message of the orbis::Error that running f throws, or ""
// when it throws none.
#pragma once
#include <string>

#include "core/error.hpp"

namespace orbis::test {

template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace orbis::test
