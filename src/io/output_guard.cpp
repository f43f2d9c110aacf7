#include "io/output_guard.hpp"

#include <fcntl.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <limits>

#include <fmt/format.h>

#include "core/error.hpp"
#include "io/atomic_file.hpp"

namespace orbis {

void check_folder_writable(const std::string& directory, const std::string& what) {
  namespace fs = std::filesystem;
  const std::string dir = directory.empty() ? "." : directory;
  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec)) fail("{}: '{}' exists and is not a folder", what, dir);
  fs::create_directories(dir, ec);
  if (ec) fail("{}: cannot create the folder '{}': {}", what, dir, ec.message());
  // A hidden name, so that a command killed right here leaves nothing that looks like an output.
  const std::string probe = join_path(dir, ".orbis_write_probe." + std::to_string(::getpid()));
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) fail("{}: the folder '{}' is not writable: {}", what, dir, std::strerror(errno));
  const char byte = 0;
  const bool written = ::write(fd, &byte, 1) == 1 && ::fsync(fd) == 0;
  const int saved = errno;
  ::close(fd);
  ::unlink(probe.c_str());
  if (!written) fail("{}: cannot write in the folder '{}': {}", what, dir, std::strerror(saved));
}

std::uint64_t free_disk_bytes(const std::string& directory) {
  struct statvfs s {};
  if (::statvfs(directory.empty() ? "." : directory.c_str(), &s) != 0) return std::numeric_limits<std::uint64_t>::max();
  return static_cast<std::uint64_t>(s.f_bavail) * s.f_frsize;
}

void check_free_disk(const std::string& directory, std::uint64_t bytes, const std::string& what,
                     const std::string& lowered_by) {
  const std::uint64_t free = free_disk_bytes(directory);
  if (bytes <= free) return;
  fail("the folder '{}' has {} free, but {} needs about {}: free some space, choose another [output] directory, "
       "or lower {}", directory, format_bytes(static_cast<double>(free)), what,
       format_bytes(static_cast<double>(bytes)), lowered_by);
}

void refuse_to_replace(const std::vector<std::string>& paths, bool overwrite, const std::string& command,
                       const std::string& remedy) {
  if (overwrite) return;
  std::vector<std::string> found;
  for (const auto& path : paths) {
    std::error_code ec;
    if (std::filesystem::exists(path, ec)) found.push_back(path);
  }
  if (found.empty()) return;
  std::string list;
  for (std::size_t i = 0; i < found.size() && i < 4; ++i) list += (i ? ", '" : "'") + found[i] + "'";
  if (found.size() > 4) list += fmt::format(" and {} more", found.size() - 4);
  fail("{} would replace {} existing file{} that it did not write: {}; nothing was done ({})", command,
       found.size(), found.size() == 1 ? "" : "s", list, remedy);
}

std::string parent_folder(const std::string& path) {
  const std::string parent = std::filesystem::path(path).parent_path().string();
  return parent.empty() ? "." : parent;
}

std::string format_bytes(double bytes) {
  constexpr double kib = 1024.0, mib = kib * 1024, gib = mib * 1024, tib = gib * 1024;
  if (bytes >= tib) return fmt::format("{:.1f} TiB", bytes / tib);
  if (bytes >= gib) return fmt::format("{:.1f} GiB", bytes / gib);
  if (bytes >= mib) return fmt::format("{:.0f} MiB", bytes / mib);
  if (bytes >= kib) return fmt::format("{:.1f} KiB", bytes / kib);
  return fmt::format("{:.0f} bytes", bytes);
}

}  // namespace orbis
