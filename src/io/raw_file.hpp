// Plain writes at given offsets into a file that exists already: the values of a snapshot's
// datasets, written by every rank at once at the offsets its HDF5 writer allocated for them
// (io/snapshot_write.cpp; serial HDF5 cannot share a file between processes, plain writes
// into disjoint ranges can). Errors name the file by its final name and give the system's
// reason (disk full, ...).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace orbis {

class RawFile {
 public:
  // Opens `path` for writing; it must exist (it is never created or truncated here).
  // `final_name`: the name errors give (the file's, not its temporary one).
  RawFile(const std::string& path, const std::string& final_name);
  ~RawFile();
  RawFile(const RawFile&) = delete;
  RawFile& operator=(const RawFile&) = delete;

  // `bytes` bytes at byte `offset`, whole (short writes and interruptions retried).
  void write_at(std::uint64_t offset, const void* data, std::size_t bytes);
  // This process's writes to the file on disk (fdatasync), then closed.
  void sync_and_close();

 private:
  int fd_ = -1;
  std::string final_name_;
};

}  // namespace orbis
