#include "io/hdf5_file.hpp"

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "core/error.hpp"

namespace orbis {
namespace {

// HDF5 prints its own error stack by default; orbis reports errors itself. A thread-safe
// HDF5 keeps that setting per thread, and files are also written from the background output
// thread: every thread that opens a file silences its own stack first.
void silence_hdf5_in_this_thread() {
  thread_local const bool silenced = H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr) >= 0;
  (void)silenced;
}

// Closes an HDF5 identifier at scope exit.
class Handle {
 public:
  Handle(hid_t id, herr_t (*close)(hid_t)) : id_(id), close_(close) {}
  ~Handle() { if (id_ >= 0) close_(id_); }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  operator hid_t() const { return id_; }
  bool ok() const { return id_ >= 0; }

 private:
  hid_t id_;
  herr_t (*close_)(hid_t);
};

// The most specific description on HDF5's error stack ("truncated file: eof = 96, ...") and,
// when a system call failed, its errno text ("File too large"): what a message should say.
std::string hdf5_error_detail() {
  std::string detail;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD,
           [](unsigned, const H5E_error2_t* e, void* data) -> herr_t {
             auto* text = static_cast<std::string*>(data);
             if (text->empty() && e->desc && *e->desc) *text = e->desc;
             return 0;
           },
           &detail);
  H5Eclear2(H5E_DEFAULT);
  return detail.empty() ? std::string("no detail from HDF5") : detail;
}

// The detail plus errno's text when the failure came from the file system (disk full, ...).
std::string write_error_detail(int saved_errno) {
  std::string detail = hdf5_error_detail();
  if (saved_errno != 0) detail += std::string("; ") + std::strerror(saved_errno);
  return detail;
}

}  // namespace

// ------------------------------------------------------------------------------- writer
H5Writer::H5Writer(const std::string& final_path) : file_(final_path) {
  errno = 0;
  silence_hdf5_in_this_thread();
  id_ = H5Fcreate(file_.temp_path().c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  if (id_ < 0) {
    const int saved = errno;
    fail("cannot create the HDF5 file '{}': {}", file_.temp_path(), write_error_detail(saved));
  }
}

H5Writer::~H5Writer() {
  if (id_ >= 0) H5Fclose(id_);
}

void H5Writer::create_group(const std::string& path) {
  Handle properties(H5Pcreate(H5P_GROUP_CREATE), H5Pclose);
  H5Pset_obj_track_times(properties, false);   // reproducible bytes, as for datasets
  Handle group(H5Gcreate2(id_, path.c_str(), H5P_DEFAULT, properties, H5P_DEFAULT), H5Gclose);
  if (!group.ok()) fail("cannot create group '{}' in '{}'", path, file_.final_path());
}

void H5Writer::write_raw(const std::string& path, hid_t type, const void* data, std::size_t rows,
                         std::size_t cols) {
  hsize_t dims[2] = {rows, cols};
  Handle space(H5Screate_simple(cols ? 2 : 1, dims, nullptr), H5Sclose);
  // No modification times in the object headers: the same data gives the same bytes (a
  // restarted run's outputs are identical files to an uninterrupted run's).
  Handle properties(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
  H5Pset_obj_track_times(properties, false);
  Handle set(H5Dcreate2(id_, path.c_str(), type, space, H5P_DEFAULT, properties, H5P_DEFAULT), H5Dclose);
  if (!set.ok()) fail("cannot create dataset '{}' in '{}'", path, file_.final_path());
  errno = 0;
  if (rows > 0 && H5Dwrite(set, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) < 0) {
    const int saved = errno;
    fail("cannot write dataset '{}' of '{}': {}", path, file_.final_path(), write_error_detail(saved));
  }
}

std::optional<std::uint64_t> H5Writer::create_raw(const std::string& path, hid_t type, std::size_t rows,
                                                  std::size_t cols) {
  hsize_t dims[2] = {rows, cols};
  Handle space(H5Screate_simple(cols ? 2 : 1, dims, nullptr), H5Sclose);
  Handle properties(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
  H5Pset_obj_track_times(properties, false);   // as write_raw
  // Contiguous (the default layout) and allocated now, so that its offset is known before any
  // value is written; no fill values are written (none is set), the values come later.
  H5Pset_alloc_time(properties, H5D_ALLOC_TIME_EARLY);
  Handle set(H5Dcreate2(id_, path.c_str(), type, space, H5P_DEFAULT, properties, H5P_DEFAULT), H5Dclose);
  if (!set.ok()) fail("cannot create dataset '{}' in '{}': {}", path, file_.final_path(), hdf5_error_detail());
  if (rows == 0) return std::nullopt;   // no storage to write into
  const haddr_t offset = H5Dget_offset(set);
  if (offset == HADDR_UNDEF)
    fail("internal: dataset '{}' in '{}' has no contiguous storage allocated", path, file_.final_path());
  return static_cast<std::uint64_t>(offset);
}

void H5Writer::attribute_raw(const std::string& object, const std::string& name, hid_t type,
                             const void* data, std::size_t n, bool scalar) {
  hsize_t dims[1] = {n};
  // An empty list (e.g. output_redshifts = []) gets a null dataspace: HDF5 has no 0-length array.
  Handle space(scalar ? H5Screate(H5S_SCALAR) : n == 0 ? H5Screate(H5S_NULL) : H5Screate_simple(1, dims, nullptr),
               H5Sclose);
  Handle attr(H5Acreate_by_name(id_, object.c_str(), name.c_str(), type, space, H5P_DEFAULT,
                                H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  if (!attr.ok() || (n > 0 && H5Awrite(attr, type, data) < 0))
    fail("cannot write attribute '{}' of '{}' in '{}'", name, object, file_.final_path());
}

void H5Writer::attribute(const std::string& object, const std::string& name, const std::string& value) {
  Handle type(H5Tcopy(H5T_C_S1), H5Tclose);
  H5Tset_size(type, value.empty() ? 1 : value.size());   // fixed-length, as GADGET-4 writes
  H5Tset_strpad(type, H5T_STR_NULLPAD);
  Handle space(H5Screate(H5S_SCALAR), H5Sclose);
  Handle attr(H5Acreate_by_name(id_, object.c_str(), name.c_str(), type, space, H5P_DEFAULT,
                                H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  std::string padded = value.empty() ? std::string(1, '\0') : value;
  if (!attr.ok() || H5Awrite(attr, type, padded.data()) < 0)
    fail("cannot write attribute '{}' of '{}' in '{}'", name, object, file_.final_path());
}

void H5Writer::close() {
  if (id_ < 0) return;
  // Closing flushes what HDF5 still holds in its caches: a full disk often shows only here.
  errno = 0;
  const herr_t closed = H5Fclose(id_);
  const int saved = errno;
  id_ = -1;
  if (closed < 0) fail("cannot finish writing '{}': {}", file_.final_path(), write_error_detail(saved));
}

void H5Writer::commit() {
  close();
  file_.commit();
}

// ------------------------------------------------------------------------------- reader
H5Reader::H5Reader(const std::string& path) : path_(path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) fail("'{}' does not exist", path);
  if (std::filesystem::is_directory(path, ec)) fail("'{}' is a folder, not an HDF5 file", path);
  if (H5Fis_hdf5(path.c_str()) <= 0) {
    H5Eclear2(H5E_DEFAULT);
    fail("'{}' is not an HDF5 file (no HDF5 signature at its start: another format, or a corrupt file)", path);
  }
  silence_hdf5_in_this_thread();
  id_ = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (id_ < 0) {
    const std::string detail = hdf5_error_detail();
    const bool truncated = detail.find("truncated") != std::string::npos;
    fail("cannot open the HDF5 file '{}': {}{}", path, detail,
         truncated ? " (the file is shorter than its header says: a write or a copy that did not finish)"
                   : " (a corrupt or incomplete file?)");
  }
}

H5Reader::~H5Reader() {
  if (id_ >= 0) H5Fclose(id_);
}

bool H5Reader::has(const std::string& object) const {
  // Check each level: H5Oexists_by_name fails rather than answering for a missing parent.
  std::size_t pos = 0;
  while ((pos = object.find('/', pos + 1)) != std::string::npos)
    if (H5Lexists(id_, object.substr(0, pos).c_str(), H5P_DEFAULT) <= 0) return false;
  return H5Lexists(id_, object.c_str(), H5P_DEFAULT) > 0;
}

bool H5Reader::has_attribute(const std::string& object, const std::string& name) const {
  if (object != "/" && !has(object)) return false;
  return H5Aexists_by_name(id_, object.c_str(), name.c_str(), H5P_DEFAULT) > 0;
}

std::vector<std::size_t> H5Reader::shape(const std::string& dataset) const {
  Handle set(H5Dopen2(id_, dataset.c_str(), H5P_DEFAULT), H5Dclose);
  if (!set.ok()) fail("'{}' has no dataset '{}'", path_, dataset);
  Handle space(H5Dget_space(set), H5Sclose);
  int rank = H5Sget_simple_extent_ndims(space);
  std::vector<hsize_t> dims(rank > 0 ? rank : 0);
  if (rank > 0) H5Sget_simple_extent_dims(space, dims.data(), nullptr);
  return {dims.begin(), dims.end()};
}

std::size_t H5Reader::element_count(const std::string& dataset) const {
  std::size_t n = 1;
  for (auto d : shape(dataset)) n *= d;
  return n;
}

void H5Reader::read_raw(const std::string& dataset, hid_t type, void* out) const {
  Handle set(H5Dopen2(id_, dataset.c_str(), H5P_DEFAULT), H5Dclose);
  if (!set.ok()) fail("'{}' has no dataset '{}'", path_, dataset);
  if (element_count(dataset) == 0) return;
  if (H5Dread(set, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, out) < 0)
    fail("cannot read dataset '{}' of '{}': {}", dataset, path_, hdf5_error_detail());
}

void H5Reader::read_rows_raw(const std::string& dataset, hid_t type, std::size_t first, std::size_t count,
                             void* out) const {
  Handle set(H5Dopen2(id_, dataset.c_str(), H5P_DEFAULT), H5Dclose);
  if (!set.ok()) fail("'{}' has no dataset '{}'", path_, dataset);
  if (count == 0) return;
  Handle space(H5Dget_space(set), H5Sclose);
  const int rank = H5Sget_simple_extent_ndims(space);
  if (rank < 1 || rank > 2) fail("dataset '{}' of '{}' has {} dimensions, expected 1 or 2", dataset, path_, rank);
  hsize_t dims[2] = {0, 1};
  H5Sget_simple_extent_dims(space, dims, nullptr);
  if (first + count > dims[0])
    fail("rows [{}, {}) of dataset '{}' of '{}', which has {}", first, first + count, dataset, path_, dims[0]);
  const hsize_t start[2] = {first, 0}, size[2] = {count, dims[1]};
  H5Sselect_hyperslab(space, H5S_SELECT_SET, start, nullptr, size, nullptr);
  Handle memory(H5Screate_simple(rank, size, nullptr), H5Sclose);
  if (H5Dread(set, type, memory, space, H5P_DEFAULT, out) < 0)
    fail("cannot read rows [{}, {}) of dataset '{}' of '{}': {}", first, first + count, dataset, path_,
         hdf5_error_detail());
}

std::size_t H5Reader::attribute_count(const std::string& object, const std::string& name) const {
  Handle attr(H5Aopen_by_name(id_, object.c_str(), name.c_str(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  if (!attr.ok()) fail("'{}' has no attribute '{}' on '{}'", path_, name, object);
  Handle space(H5Aget_space(attr), H5Sclose);
  hssize_t n = H5Sget_simple_extent_npoints(space);
  return n < 0 ? 0 : static_cast<std::size_t>(n);
}

void H5Reader::read_attribute_raw(const std::string& object, const std::string& name, hid_t type,
                                  void* out) const {
  Handle attr(H5Aopen_by_name(id_, object.c_str(), name.c_str(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  if (!attr.ok()) fail("cannot read attribute '{}' of '{}' in '{}'", name, object, path_);
  Handle space(H5Aget_space(attr), H5Sclose);
  if (H5Sget_simple_extent_type(space) == H5S_NULL) return;   // an empty list
  if (H5Aread(attr, type, out) < 0) fail("cannot read attribute '{}' of '{}' in '{}'", name, object, path_);
}

std::string H5Reader::attribute_string(const std::string& object, const std::string& name) const {
  Handle attr(H5Aopen_by_name(id_, object.c_str(), name.c_str(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  if (!attr.ok()) fail("'{}' has no attribute '{}' on '{}'", path_, name, object);
  Handle type(H5Aget_type(attr), H5Tclose);
  if (H5Tget_class(type) != H5T_STRING) fail("attribute '{}' of '{}' in '{}' is not a string", name, object, path_);
  if (H5Tis_variable_str(type) > 0) {
    char* text = nullptr;
    Handle memtype(H5Tcopy(H5T_C_S1), H5Tclose);
    H5Tset_size(memtype, H5T_VARIABLE);
    if (H5Aread(attr, memtype, &text) < 0) fail("cannot read attribute '{}' in '{}'", name, path_);
    std::string out = text ? text : "";
    H5free_memory(text);
    return out;
  }
  std::size_t size = H5Tget_size(type);
  std::string out(size, '\0');
  if (H5Aread(attr, type, out.data()) < 0) fail("cannot read attribute '{}' in '{}'", name, path_);
  out.resize(out.find('\0') == std::string::npos ? size : out.find('\0'));
  return out;
}

void H5Reader::throw_shape(const std::string& object, const std::string& name) const {
  fail("attribute '{}' of '{}' in '{}' is not a single value", name, object, path_);
}

}  // namespace orbis
