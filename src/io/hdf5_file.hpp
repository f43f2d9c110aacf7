// A thin RAII layer over the HDF5 C API: what snapshots, catalogues and power spectra need.
// H5Writer writes atomically (AtomicFile); H5Reader converts on read, so float or double
// positions and 32- or 64-bit IDs all arrive in the caller's type.
#pragma once
#include <hdf5.h>

#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "io/atomic_file.hpp"

namespace orbis {

template <typename T> hid_t h5_native_type() {
  if constexpr (std::is_same_v<T, double>) return H5T_NATIVE_DOUBLE;
  else if constexpr (std::is_same_v<T, float>) return H5T_NATIVE_FLOAT;
  else if constexpr (std::is_same_v<T, std::int32_t>) return H5T_NATIVE_INT32;
  else if constexpr (std::is_same_v<T, std::uint32_t>) return H5T_NATIVE_UINT32;
  else if constexpr (std::is_same_v<T, std::int64_t>) return H5T_NATIVE_INT64;
  else if constexpr (std::is_same_v<T, std::uint64_t>) return H5T_NATIVE_UINT64;
  else static_assert(sizeof(T) == 0, "no HDF5 type for this C++ type");
}

class H5Writer {
 public:
  explicit H5Writer(const std::string& final_path);
  ~H5Writer();
  H5Writer(const H5Writer&) = delete;
  H5Writer& operator=(const H5Writer&) = delete;

  void create_group(const std::string& path);
  // A dataset of `rows` x `cols` (cols = 0: one-dimensional) elements, row-major.
  template <typename T>
  void write(const std::string& path, const T* data, std::size_t rows, std::size_t cols = 0) {
    write_raw(path, h5_native_type<T>(), data, rows, cols);
  }
  template <typename T> void write(const std::string& path, const std::vector<T>& data) {
    write(path, data.data(), data.size());
  }
  // A dataset of `rows` x `cols` elements (cols = 0: one-dimensional) whose values are
  // written later, not through HDF5: its storage is allocated now, in one contiguous piece,
  // and the byte offset of that piece in the file is returned (none for 0 rows: there is
  // nothing to write). After close(), any process may write the rows there, row-major, as the
  // elements lie in memory (the dataset's file type is T's native type), with plain file
  // writes: a snapshot file filled by every rank at once (io/snapshot_write.cpp).
  template <typename T> std::optional<std::uint64_t> create_dataset(const std::string& path, std::size_t rows,
                                                                    std::size_t cols = 0) {
    return create_raw(path, h5_native_type<T>(), rows, cols);
  }
  // The file under its temporary name: where create_dataset's values go.
  const std::string& temp_path() const { return file_.temp_path(); }
  // Closes the HDF5 file (its metadata written) without renaming it; commit() then flushes
  // and renames it once its datasets' values are written.
  void close();
  template <typename T>
  void attribute(const std::string& object, const std::string& name, const T& value) {
    attribute_raw(object, name, h5_native_type<T>(), &value, 1, true);
  }
  template <typename T>
  void attribute(const std::string& object, const std::string& name, const std::vector<T>& values) {
    attribute_raw(object, name, h5_native_type<T>(), values.data(), values.size(), false);
  }
  void attribute(const std::string& object, const std::string& name, const std::string& value);
  void attribute(const std::string& object, const std::string& name, const char* value) {
    attribute(object, name, std::string(value));
  }
  // Closes (unless close() did), flushes and renames onto the final name. Without it the
  // file is discarded.
  void commit();

 private:
  void write_raw(const std::string& path, hid_t type, const void* data, std::size_t rows, std::size_t cols);
  std::optional<std::uint64_t> create_raw(const std::string& path, hid_t type, std::size_t rows, std::size_t cols);
  void attribute_raw(const std::string& object, const std::string& name, hid_t type,
                     const void* data, std::size_t n, bool scalar);
  AtomicFile file_;
  hid_t id_ = -1;
};

class H5Reader {
 public:
  explicit H5Reader(const std::string& path);
  ~H5Reader();
  H5Reader(const H5Reader&) = delete;
  H5Reader& operator=(const H5Reader&) = delete;

  const std::string& path() const { return path_; }
  bool has(const std::string& object) const;   // group or dataset
  bool has_attribute(const std::string& object, const std::string& name) const;
  std::vector<std::size_t> shape(const std::string& dataset) const;

  template <typename T> std::vector<T> read(const std::string& dataset) const {
    std::vector<T> out(element_count(dataset));
    read_raw(dataset, h5_native_type<T>(), out.data());
    return out;
  }
  // Rows [first, first + count) of a one- or two-dimensional dataset (a rank's share of a
  // snapshot), row-major.
  template <typename T> std::vector<T> read_rows(const std::string& dataset, std::size_t first, std::size_t count) const {
    const auto dims = shape(dataset);
    std::size_t per_row = 1;
    for (std::size_t d = 1; d < dims.size(); ++d) per_row *= dims[d];
    std::vector<T> out(count * per_row);
    read_rows_raw(dataset, h5_native_type<T>(), first, count, out.data());
    return out;
  }
  template <typename T> std::vector<T> attribute_array(const std::string& object, const std::string& name) const {
    std::vector<T> out(attribute_count(object, name));
    read_attribute_raw(object, name, h5_native_type<T>(), out.data());
    return out;
  }
  template <typename T> T attribute(const std::string& object, const std::string& name) const {
    auto values = attribute_array<T>(object, name);
    if (values.size() != 1) throw_shape(object, name);
    return values[0];
  }
  std::string attribute_string(const std::string& object, const std::string& name) const;

 private:
  std::size_t element_count(const std::string& dataset) const;
  std::size_t attribute_count(const std::string& object, const std::string& name) const;
  void read_raw(const std::string& dataset, hid_t type, void* out) const;
  void read_rows_raw(const std::string& dataset, hid_t type, std::size_t first, std::size_t count, void* out) const;
  void read_attribute_raw(const std::string& object, const std::string& name, hid_t type, void* out) const;
  [[noreturn]] void throw_shape(const std::string& object, const std::string& name) const;
  std::string path_;
  hid_t id_ = -1;
};

}  // namespace orbis
