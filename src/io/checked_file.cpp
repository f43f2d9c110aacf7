#include "io/checked_file.hpp"

#include <cerrno>
#include <cstring>
#include <exception>

#include "core/error.hpp"

namespace orbis {
namespace {

constexpr char kMagic[8] = {'O', 'R', 'B', 'I', 'S', 'C', 'H', 'K'};
constexpr char kEnd[8] = {'O', 'R', 'B', 'I', 'S', 'E', 'N', 'D'};
constexpr std::uint32_t kVersion = 1;

std::uint64_t rotl(std::uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

}  // namespace

// One round per 8-byte word: bijective in the state for a given word and injective in the
// word for a given state, so one changed word always changes the result.
void Checksum64::mix(std::uint64_t word) {
  state_ = rotl(state_ ^ (word * 0x87c37b91114253d5ull), 31) * 0x4cf5ad432745937full;
}

void Checksum64::add(const void* data, std::size_t bytes) {
  const auto* p = static_cast<const unsigned char*>(data);
  length_ += bytes;
  while (bytes > 0 && pending_bytes_ > 0) {
    pending_[pending_bytes_++] = *p++;
    --bytes;
    if (pending_bytes_ == 8) {
      std::uint64_t w;
      std::memcpy(&w, pending_, 8);
      mix(w);
      pending_bytes_ = 0;
    }
  }
  for (; bytes >= 8; bytes -= 8, p += 8) {
    std::uint64_t w;
    std::memcpy(&w, p, 8);
    mix(w);
  }
  for (; bytes > 0; --bytes) pending_[pending_bytes_++] = *p++;
}

std::uint64_t Checksum64::value() const {
  Checksum64 last = *this;
  std::uint64_t tail = 0;
  std::memcpy(&tail, pending_, pending_bytes_);
  last.mix(tail);
  last.mix(length_);
  return last.state_;
}

// ------------------------------------------------------------------------------- writer
CheckedFileWriter::CheckedFileWriter(const std::string& final_path) : file_(final_path) {
  out_ = std::fopen(file_.temp_path().c_str(), "wb");
  if (!out_) fail("cannot create '{}': {}", file_.temp_path(), std::strerror(errno));
  put(kMagic, 8);
  put(&kVersion, 4);
}

CheckedFileWriter::~CheckedFileWriter() {
  if (out_) std::fclose(out_);
}

void CheckedFileWriter::put(const void* data, std::size_t bytes) {
  if (bytes > 0 && std::fwrite(data, 1, bytes, out_) != bytes)
    fail("cannot write '{}': {}", file_.final_path(), std::strerror(errno));
  sum_.add(data, bytes);
}

void CheckedFileWriter::section(const std::string& name, const void* data, std::size_t bytes) {
  const auto name_bytes = static_cast<std::uint32_t>(name.size());
  const auto count = static_cast<std::uint64_t>(bytes);
  put(&name_bytes, 4);
  put(name.data(), name.size());
  put(&count, 8);
  put(data, bytes);
}

void CheckedFileWriter::commit() {
  const std::uint32_t end_mark = 0;
  put(&end_mark, 4);
  const std::uint64_t sum = sum_.value();
  put(&sum, 8);
  put(kEnd, 8);
  const bool flushed = std::fflush(out_) == 0;
  const int saved = errno;
  const bool closed = std::fclose(out_) == 0;
  out_ = nullptr;
  if (!flushed || !closed)
    fail("cannot finish writing '{}': {}", file_.final_path(), std::strerror(flushed ? errno : saved));
  file_.commit();
}

// ------------------------------------------------------------------------------- reader
CheckedFileReader::CheckedFileReader(const std::string& path) : path_(path) {
  std::FILE* in = std::fopen(path.c_str(), "rb");
  if (!in) fail("cannot open '{}': {}", path, std::strerror(errno));
  struct Closer {
    std::FILE* f;
    ~Closer() { std::fclose(f); }
  } closer{in};
  Checksum64 sum;
  const auto get = [&](void* data, std::size_t bytes, const std::string& what) {
    if (bytes > 0 && std::fread(data, 1, bytes, in) != bytes)
      fail("'{}' ends inside {}: a truncated file (a write that did not finish)", path, what);
    sum.add(data, bytes);
  };
  char magic[8];
  std::uint32_t version = 0;
  get(magic, 8, "its header");
  if (std::memcmp(magic, kMagic, 8) != 0) fail("'{}' is not an orbis checkpoint (no ORBISCHK at its start)", path);
  get(&version, 4, "its header");
  if (version != kVersion) fail("'{}' has format version {}; this orbis reads version {}", path, version, kVersion);
  for (;;) {
    std::uint32_t name_bytes = 0;
    get(&name_bytes, 4, "a section header");
    if (name_bytes == 0) break;   // the end mark
    if (name_bytes > 4096) fail("'{}' is corrupt (a section name of {} bytes)", path, name_bytes);
    std::string name(name_bytes, '\0');
    get(name.data(), name_bytes, "a section name");
    std::uint64_t count = 0;
    get(&count, 8, "a section header");
    std::string data;
    try {
      data.resize(count);
    } catch (const std::exception&) {
      fail("'{}' is corrupt (section '{}' of {} bytes)", path, name, count);
    }
    get(data.data(), count, "section '" + name + "'");
    sections_[name] = std::move(data);
  }
  const std::uint64_t expected = sum.value();
  std::uint64_t stored = 0;
  char end[8];
  get(&stored, 8, "its checksum");
  get(end, 8, "its end mark");
  if (std::memcmp(end, kEnd, 8) != 0) fail("'{}' is corrupt (no end mark after its checksum)", path);
  if (stored != expected)
    fail("'{}' is corrupt: its checksum is {:016x} but its bytes give {:016x}", path, stored, expected);
  if (std::fgetc(in) != EOF) fail("'{}' is corrupt (bytes after its end mark)", path);
}

const std::string& CheckedFileReader::bytes(const std::string& name) const {
  const auto it = sections_.find(name);
  if (it == sections_.end()) fail("'{}' has no section '{}' (written by another version of orbis?)", path_, name);
  return it->second;
}

void CheckedFileReader::check_multiple(const std::string& name, std::size_t bytes, std::size_t size) const {
  if (bytes % size != 0) fail("'{}': section '{}' holds {} bytes, not a multiple of {}", path_, name, bytes, size);
}

}  // namespace orbis
