#include "io/gadget_binary.hpp"

#include <cstring>
#include <fstream>

#include "core/error.hpp"

namespace orbis {
namespace {

std::uint32_t swapped(std::uint32_t v) {
  return (v >> 24) | ((v >> 8) & 0xff00u) | ((v << 8) & 0xff0000u) | (v << 24);
}
std::uint64_t swapped(std::uint64_t v) {
  return (static_cast<std::uint64_t>(swapped(static_cast<std::uint32_t>(v))) << 32) |
         swapped(static_cast<std::uint32_t>(v >> 32));
}

// The first four bytes as a record length: 256 (the header, SnapFormat 1) or 8 (SnapFormat 2's
// label record), native or byte-swapped; 0 when neither.
int first_record(const std::string& path, bool* swap) {
  std::ifstream in(path, std::ios::binary);
  std::uint32_t v = 0;
  if (!in.read(reinterpret_cast<char*>(&v), 4)) return 0;
  for (bool s : {false, true}) {
    const std::uint32_t w = s ? swapped(v) : v;
    if (w == 256 || w == 8) {
      if (swap) *swap = s;
      return static_cast<int>(w);
    }
  }
  return 0;
}

class Reader {
 public:
  Reader(const std::string& path, bool swap) : path_(path), in_(path, std::ios::binary), swap_(swap) {
    if (!in_) fail("cannot open '{}'", path);
    in_.seekg(0, std::ios::end);
    size_ = static_cast<std::uint64_t>(in_.tellg());
    in_.seekg(0);
  }
  std::uint64_t size() const { return size_; }
  std::uint64_t at() { return static_cast<std::uint64_t>(in_.tellg()); }
  void seek(std::uint64_t offset) { in_.seekg(static_cast<std::streamoff>(offset)); }
  void bytes(void* to, std::uint64_t n, const char* what) {
    if (at() + n > size_ || !in_.read(static_cast<char*>(to), static_cast<std::streamsize>(n)))
      fail("'{}' ends inside the {} block (a truncated or corrupt file)", path_, what);
  }
  std::uint32_t u32(const char* what) {
    std::uint32_t v = 0;
    bytes(&v, 4, what);
    return swap_ ? swapped(v) : v;
  }

 private:
  std::string path_;
  std::ifstream in_;
  bool swap_;
  std::uint64_t size_ = 0;
};

template <typename T>
T field(const unsigned char* header, std::size_t offset, bool swap) {
  T v;
  std::memcpy(&v, header + offset, sizeof(T));
  if (!swap) return v;
  if constexpr (sizeof(T) == 4) {
    std::uint32_t u;
    std::memcpy(&u, &v, 4);
    u = swapped(u);
    std::memcpy(&v, &u, 4);
  } else {
    std::uint64_t u;
    std::memcpy(&u, &v, 8);
    u = swapped(u);
    std::memcpy(&v, &u, 8);
  }
  return v;
}

}  // namespace

bool GadgetBinaryFile::detect(const std::string& path) { return first_record(path, nullptr) != 0; }

GadgetBinaryFile::GadgetBinaryFile(const std::string& path) : path_(path) {
  const int first = first_record(path, &swap_);
  if (first == 0) fail("'{}' is not a GADGET binary file (its first record is neither 256 nor 8 bytes)", path);
  format_ = first == 8 ? 2 : 1;
  Reader in(path, swap_);
  // One record: SnapFormat 2's label record first (checked against `label`), then the data
  // framed by equal byte counts; returns where the data starts and its length.
  const auto record = [&](const char* label, const char* name) {
    if (format_ == 2) {
      if (in.u32(name) != 8) fail("'{}': the label record before the {} block is not 8 bytes", path, name);
      char tag[4];
      in.bytes(tag, 4, name);
      in.u32(name);   // the length of the block that follows, with its two counts
      if (in.u32(name) != 8) fail("'{}': the label record before the {} block is not 8 bytes", path, name);
      if (std::strncmp(tag, label, 4) != 0)
        fail("'{}': found the block labelled '{}' where {} ('{}') was expected", path, std::string(tag, 4), name,
             label);
    }
    const std::uint64_t bytes = in.u32(name);
    const std::uint64_t offset = in.at();
    if (offset + bytes + 4 > in.size()) fail("'{}' ends inside the {} block (a truncated or corrupt file)", path, name);
    in.seek(offset + bytes);
    const std::uint64_t after = in.u32(name);
    if (after != bytes)
      fail("'{}': the {} block's record lengths differ ({} and {} bytes): a corrupt file, or not GADGET's binary "
           "format", path, name, bytes, after);
    return Block{offset, bytes, 0};
  };

  const Block head = record("HEAD", "header");
  if (head.bytes != 256) fail("'{}': the header record is {} bytes, GADGET's is 256", path, head.bytes);
  unsigned char raw[256];
  in.seek(head.offset);
  in.bytes(raw, 256, "header");
  for (int t = 0; t < 6; ++t) {
    header_.npart[t] = field<std::uint32_t>(raw, 4 * t, swap_);
    header_.massarr[t] = field<double>(raw, 24 + 8 * t, swap_);
    header_.npart_total[t] = field<std::uint32_t>(raw, 96 + 4 * t, swap_);
    header_.npart_total_high[t] = field<std::uint32_t>(raw, 168 + 4 * t, swap_);
  }
  header_.time = field<double>(raw, 72, swap_);
  header_.redshift = field<double>(raw, 80, swap_);
  header_.num_files = field<std::int32_t>(raw, 124, swap_);
  header_.box = field<double>(raw, 128, swap_);
  header_.omega0 = field<double>(raw, 136, swap_);
  header_.omega_lambda = field<double>(raw, 144, swap_);
  header_.hubble = field<double>(raw, 152, swap_);
  in.seek(head.offset + 256 + 4);

  std::uint64_t n_all = 0, n_mass = 0;
  for (int t = 0; t < 6; ++t) {
    n_all += header_.npart[t];
    if (header_.massarr[t] == 0) n_mass += header_.npart[t];
  }
  // A block of `values` values a particle for n particles: 4- or 8-byte values.
  const auto sized = [&](Block b, const char* name, std::uint64_t values) {
    if (values == 0) {
      b.element = 4;
      return b;
    }
    if (b.bytes == 4 * values) b.element = 4;
    else if (b.bytes == 8 * values) b.element = 8;
    else
      fail("'{}': the {} block holds {} bytes, not {} values of 4 or 8 bytes (the header's particle counts)", path,
           name, b.bytes, values);
    return b;
  };
  pos_ = sized(record("POS ", "POS"), "POS", 3 * n_all);
  vel_ = sized(record("VEL ", "VEL"), "VEL", 3 * n_all);
  id_ = sized(record("ID  ", "ID"), "ID", n_all);
  if (n_mass > 0) {
    if (in.at() >= in.size()) {
      std::string types;
      for (int t = 0; t < 6; ++t)
        if (header_.massarr[t] == 0 && header_.npart[t] > 0)
          types += fmt::format("{}{} of type {}", types.empty() ? "" : ", ", header_.npart[t], t);
      fail("'{}': no masses: the header's mass table (massarr) is 0 for {} particles ({}), so a MASS block must "
           "follow the ID block, but the file ends there", path, n_mass, types);
    }
    mass_ = sized(record("MASS", "MASS"), "MASS", n_mass);
  }
}

std::uint64_t GadgetBinaryFile::first_of_type(int type) const {
  std::uint64_t first = 0;
  for (int t = 0; t < type; ++t) first += header_.npart[t];
  return first;
}

std::uint64_t GadgetBinaryFile::first_mass_of_type(int type) const {
  std::uint64_t first = 0;
  for (int t = 0; t < type; ++t)
    if (header_.massarr[t] == 0) first += header_.npart[t];
  return first;
}

std::vector<double> GadgetBinaryFile::reals(const Block& block, const char* name, int per_particle,
                                            std::uint64_t first, std::uint64_t count) const {
  const std::uint64_t values = count * static_cast<std::uint64_t>(per_particle);
  std::vector<double> out(values);
  if (values == 0) return out;
  Reader in(path_, swap_);
  const std::uint64_t offset = block.offset + first * static_cast<std::uint64_t>(per_particle) * block.element;
  if (offset + values * block.element > block.offset + block.bytes)
    fail("internal: particles [{}, {}) of the {} block of '{}' are beyond it", first, first + count, name, path_);
  in.seek(offset);
  std::vector<unsigned char> raw(values * block.element);
  in.bytes(raw.data(), raw.size(), name);
  for (std::uint64_t i = 0; i < values; ++i)
    out[i] = block.element == 4 ? static_cast<double>(field<float>(raw.data(), 4 * i, swap_))
                                : field<double>(raw.data(), 8 * i, swap_);
  return out;
}

std::vector<double> GadgetBinaryFile::positions(std::uint64_t first, std::uint64_t count) const {
  return reals(pos_, "POS", 3, first, count);
}
std::vector<double> GadgetBinaryFile::velocities(std::uint64_t first, std::uint64_t count) const {
  return reals(vel_, "VEL", 3, first, count);
}
std::vector<double> GadgetBinaryFile::masses(std::uint64_t first, std::uint64_t count) const {
  if (!has_masses()) fail("internal: '{}' has no MASS block", path_);
  return reals(mass_, "MASS", 1, first, count);
}

std::vector<std::uint64_t> GadgetBinaryFile::ids(std::uint64_t first, std::uint64_t count) const {
  std::vector<std::uint64_t> out(count);
  if (count == 0) return out;
  Reader in(path_, swap_);
  in.seek(id_.offset + first * id_.element);
  std::vector<unsigned char> raw(count * id_.element);
  in.bytes(raw.data(), raw.size(), "ID");
  for (std::uint64_t i = 0; i < count; ++i)
    out[i] = id_.element == 4 ? field<std::uint32_t>(raw.data(), 4 * i, swap_)
                              : field<std::uint64_t>(raw.data(), 8 * i, swap_);
  return out;
}

}  // namespace orbis
