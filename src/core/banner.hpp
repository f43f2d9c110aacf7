// The start banner (STYLE.md §10): version, build options, ranks, threads, GPUs.
#pragma once
#include <string>

namespace orbis {

std::string banner(const std::string& command);

}  // namespace orbis
