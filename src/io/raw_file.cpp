#include "io/raw_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.hpp"

namespace orbis {

RawFile::RawFile(const std::string& path, const std::string& final_name) : final_name_(final_name) {
  fd_ = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd_ < 0) fail("cannot open '{}' (the temporary file of '{}') to write into it: {}", path, final_name, std::strerror(errno));
}

RawFile::~RawFile() {
  if (fd_ >= 0) ::close(fd_);
}

void RawFile::write_at(std::uint64_t offset, const void* data, std::size_t bytes) {
  const char* from = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::pwrite(fd_, from, bytes, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail("cannot write {} bytes at byte {} of '{}': {}", bytes, offset, final_name_,
                     n < 0 ? std::strerror(errno) : "nothing written");
    from += n;
    offset += static_cast<std::uint64_t>(n);
    bytes -= static_cast<std::size_t>(n);
  }
}

void RawFile::sync_and_close() {
  if (fd_ < 0) return;
  const int synced = ::fdatasync(fd_);
  const int saved = errno;
  const int closed = ::close(fd_);
  fd_ = -1;
  if (synced != 0) fail("cannot flush '{}' to disk: {}", final_name_, std::strerror(saved));
  if (closed != 0) fail("cannot close '{}': {}", final_name_, std::strerror(errno));
}

}  // namespace orbis
