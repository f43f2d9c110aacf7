// Atomic output: a file is written under a temporary name in the same
// folder, flushed to disk, then renamed onto its final name, so a killed run never leaves
// a half-written file under a final name.
#pragma once
#include <string>

namespace orbis {

class AtomicFile {
 public:
  explicit AtomicFile(std::string final_path);
  ~AtomicFile();   // an uncommitted temporary file is removed
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  const std::string& temp_path() const { return temp_path_; }
  const std::string& final_path() const { return final_path_; }
  // The temporary file must be closed by its writer first. fsync, rename, fsync the folder.
  void commit();

 private:
  std::string final_path_, temp_path_;
  bool committed_ = false;
};

void write_text_atomically(const std::string& path, const std::string& text);
// Removes the temporary files in `directory` that AtomicFile left behind in a process that
// no longer runs (killed while writing: ".NAME.tmp.PID" whose PID is gone); returns how many.
int remove_stale_temporaries(const std::string& directory);
void make_directories(const std::string& path);   // mkdir -p; an error names the path
std::string join_path(const std::string& directory, const std::string& name);

}  // namespace orbis
