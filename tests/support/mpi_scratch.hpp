// A scratch folder shared by the ranks of an MPI test: rank 0 makes it (named after its
// process), every rank gets its path, and rank 0 removes it once all ranks are done.
#pragma once
#include <unistd.h>

#include <filesystem>
#include <string>

#include "core/comm.hpp"

namespace orbis::test {

class SharedScratchDir {
 public:
  SharedScratchDir(const std::string& name, const Comm& comm) : comm_(comm) {
    std::string path;
    if (comm.is_root()) {
      path = (std::filesystem::temp_directory_path() / ("orbis_mpi_" + name + "_" + std::to_string(::getpid()))).string();
      std::filesystem::remove_all(path);
      std::filesystem::create_directories(path);
    }
    comm.broadcast(path);
    path_ = path;
  }
  ~SharedScratchDir() {
    comm_.barrier();
    std::error_code ignored;
    if (comm_.is_root()) std::filesystem::remove_all(path_, ignored);
  }
  SharedScratchDir(const SharedScratchDir&) = delete;
  SharedScratchDir& operator=(const SharedScratchDir&) = delete;
  std::string path() const { return path_.string(); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  Comm comm_;
  std::filesystem::path path_;
};

}  // namespace orbis::test
