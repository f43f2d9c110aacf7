#include "io/atomic_file.hpp"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/error.hpp"

namespace orbis {
namespace {

void fsync_path(const std::string& path, bool directory) {
  int fd = ::open(path.c_str(), directory ? O_RDONLY | O_DIRECTORY : O_RDONLY);
  if (fd < 0) fail("cannot open '{}' to flush it to disk: {}", path, std::strerror(errno));
  int rc = ::fsync(fd);
  int saved = errno;
  ::close(fd);
  // Some file systems refuse fsync on folders (EINVAL); the data itself was synced.
  if (rc != 0 && !(directory && saved == EINVAL))
    fail("cannot flush '{}' to disk: {}", path, std::strerror(saved));
}

std::string parent_of(const std::string& path) {
  auto parent = std::filesystem::path(path).parent_path().string();
  return parent.empty() ? "." : parent;
}

}  // namespace

AtomicFile::AtomicFile(std::string final_path) : final_path_(std::move(final_path)) {
  auto name = std::filesystem::path(final_path_).filename().string();
  temp_path_ = join_path(parent_of(final_path_), "." + name + ".tmp." + std::to_string(::getpid()));
}

AtomicFile::~AtomicFile() {
  if (!committed_) std::remove(temp_path_.c_str());
}

void AtomicFile::commit() {
  fsync_path(temp_path_, false);
  if (std::rename(temp_path_.c_str(), final_path_.c_str()) != 0)
    fail("cannot rename '{}' to '{}': {}", temp_path_, final_path_, std::strerror(errno));
  committed_ = true;
  fsync_path(parent_of(final_path_), true);
}

void write_text_atomically(const std::string& path, const std::string& text) {
  AtomicFile file(path);
  {
    std::ofstream out(file.temp_path(), std::ios::binary);
    if (!out) fail("cannot create '{}': {}", file.temp_path(), std::strerror(errno));
    out << text;
    out.close();
    if (!out) fail("cannot write '{}' (disk full?)", file.temp_path());
  }
  file.commit();
}

int remove_stale_temporaries(const std::string& directory) {
  int removed = 0;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(directory.empty() ? "." : directory, ec)) {
    const std::string name = entry.path().filename().string();
    const std::size_t mark = name.rfind(".tmp.");
    if (name.empty() || name[0] != '.' || mark == std::string::npos || mark + 5 >= name.size()) continue;
    const std::string digits = name.substr(mark + 5);
    if (digits.find_first_not_of("0123456789") != std::string::npos || digits.size() > 9) continue;
    const auto pid = static_cast<pid_t>(std::stol(digits));
    if (pid == ::getpid() || ::kill(pid, 0) == 0 || errno != ESRCH) continue;   // its writer may still run
    if (std::filesystem::remove(entry.path(), ec)) ++removed;
  }
  return removed;
}

void make_directories(const std::string& path) {
  std::error_code ec;
  std::filesystem::create_directories(path, ec);
  if (ec) fail("cannot create the folder '{}': {}", path, ec.message());
}

std::string join_path(const std::string& directory, const std::string& name) {
  if (directory.empty() || directory == ".") return name;
  return (std::filesystem::path(directory) / name).string();
}

}  // namespace orbis
