// Checks a command makes before any work on the files it will write: the folder can be
// created and written, its disk has room, and no existing file that the command did not
// write itself would be replaced (unless the user said --overwrite).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace orbis {

// Creates `directory` (mkdir -p) and proves it writable by creating, writing, flushing and
// removing a small probe file in it: root passes permission checks, so asking access() is
// not enough, and a read-only file system refuses only the write. `what` says which setting
// chose the folder ("[output] directory", "--out").
void check_folder_writable(const std::string& directory, const std::string& what);

// Bytes an unprivileged writer may still use on the file system holding `directory`
// (UINT64_MAX when it cannot be asked).
std::uint64_t free_disk_bytes(const std::string& directory);

// An error unless `directory`'s file system has `bytes` free for `what` ("the first output");
// the message names the parameter that lowers it (`lowered_by`).
void check_free_disk(const std::string& directory, std::uint64_t bytes, const std::string& what,
                     const std::string& lowered_by);

// An error naming those of `paths` that exist, unless `overwrite`: a command never replaces a
// file it did not write. `command` starts the message ("orbis fof"); `remedy` says how to go on.
void refuse_to_replace(const std::vector<std::string>& paths, bool overwrite, const std::string& command,
                       const std::string& remedy = "pass --overwrite to replace them, or choose another output");

// The folder of a file path ("." for a bare name).
std::string parent_folder(const std::string& path);

// "1.5 GiB", "312 MiB", "4.0 KiB", "17 bytes".
std::string format_bytes(double bytes);

}  // namespace orbis
