// A binary file of named sections closed by a checksum, for checkpoints: written under a
// temporary name and renamed when complete (atomic_file.hpp), read back only after the
// checksum of every byte has been verified, so that a truncated or corrupted file is
// recognised as such, never half-used.
//
// Layout (little-endian, as written by the host): "ORBISCHK", u32 format version, then per
// section: u32 name length (> 0), name, u64 byte count, bytes; then u32 0 (the end of the
// sections), the u64 checksum of everything before it, and "ORBISEND". The checksum (checksum64) is a 64-bit multiply-rotate hash of
// 8-byte words: any single changed word changes it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "io/atomic_file.hpp"

namespace orbis {

// The streaming checksum of the file layout above.
class Checksum64 {
 public:
  void add(const void* data, std::size_t bytes);
  std::uint64_t value() const;

 private:
  void mix(std::uint64_t word);
  std::uint64_t state_ = 0x9e3779b97f4a7c15ull, length_ = 0;
  unsigned char pending_[8] = {};
  std::size_t pending_bytes_ = 0;
};

class CheckedFileWriter {
 public:
  explicit CheckedFileWriter(const std::string& final_path);
  ~CheckedFileWriter();   // an uncommitted file leaves nothing behind
  CheckedFileWriter(const CheckedFileWriter&) = delete;
  CheckedFileWriter& operator=(const CheckedFileWriter&) = delete;

  void section(const std::string& name, const void* data, std::size_t bytes);
  template <typename T>
  void section(const std::string& name, const std::vector<T>& values) {
    section(name, values.data(), values.size() * sizeof(T));
  }
  // Writes the checksum, flushes and renames onto the final name.
  void commit();

 private:
  void put(const void* data, std::size_t bytes);
  AtomicFile file_;
  std::FILE* out_ = nullptr;
  Checksum64 sum_;
};

// The sections of a checked file whose checksum matched; an Error (naming the file and what
// is wrong: not a checkpoint, truncated, checksum mismatch) otherwise.
class CheckedFileReader {
 public:
  explicit CheckedFileReader(const std::string& path);
  bool has(const std::string& name) const { return sections_.count(name) > 0; }
  const std::string& bytes(const std::string& name) const;   // an Error when absent
  // The section as an array of T, which it then no longer holds (one copy of the particles
  // in memory at a time, besides the file's).
  template <typename T>
  std::vector<T> take(const std::string& name) {
    std::string raw = bytes(name);
    sections_.erase(name);
    check_multiple(name, raw.size(), sizeof(T));
    std::vector<T> out(raw.size() / sizeof(T));
    if (!out.empty()) std::memcpy(out.data(), raw.data(), raw.size());
    return out;
  }
  const std::string& path() const { return path_; }

 private:
  void check_multiple(const std::string& name, std::size_t bytes, std::size_t size) const;
  std::string path_;
  std::map<std::string, std::string> sections_;
};

}  // namespace orbis
