// Running the orbis executable from a test: a shell command's exit status with its output in
// a log file (or a started process to signal and wait for), and reading files back whole.
#pragma once
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

namespace orbis::test {

// Runs `command` in a shell with stdout and stderr into `log`; its exit status (-1: killed
// by a signal).
inline int run_command(const std::string& command, const std::string& log) {
  const int status = std::system((command + " > '" + log + "' 2>&1").c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

inline std::string read_whole_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

inline void write_whole_file(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

// Starts `command` through sh with stdout and stderr into `log`; returns the process id. To
// signal the program itself, the command must end by exec'ing it ("cd DIR && exec PROGRAM").
inline pid_t start_command(const std::string& command, const std::string& log) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    const std::string line = command + " > '" + log + "' 2>&1";
    ::execl("/bin/sh", "sh", "-c", line.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  return pid;
}

// Waits for a started command: its exit status, or -signal when a signal ended it.
inline int wait_command(pid_t pid) {
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
}

}  // namespace orbis::test
