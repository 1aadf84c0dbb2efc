#pragma once
// A program started for one job: it leads its own process group and talks through pipes.

#include <sys/types.h>

#include <optional>
#include <string>
#include <system_error>
#include <vector>

#include "handlers/unique_fd.hpp"

namespace pgjobd {

// The daemon's ends of the child's standard streams, all non-blocking and close-on-exec.
struct ChildPipes {
  UniqueFd stdin_write;
  UniqueFd stdout_read;
  UniqueFd stderr_read;
};

// The program could not be started at all; code() holds the errno (ENOENT, EACCES, ...).
class SpawnError : public std::system_error {
 public:
  SpawnError(int error_number, std::string program)
      : std::system_error(error_number, std::generic_category(), "cannot run " + program),
        program_(std::move(program)) {}
  const std::string& program() const { return program_; }

 private:
  std::string program_;
};

class ChildProcess {
 public:
  // Starts argv[0] with posix_spawnp: a name without a slash is searched in the daemon's
  // PATH (not in `environment`'s). The child gets its own process group, an empty signal
  // mask, default dispositions for the signals a daemon commonly blocks or ignores, the
  // scheduling policy the daemon started with (runtime/scheduling.hpp), the three pipes on
  // fds 0-2 and no other descriptor. Throws SpawnError if the program
  // cannot be started and std::system_error if pipes cannot be made.
  ChildProcess(const std::vector<std::string>& argv, const std::vector<std::string>& environment);
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  // A child still unreaped (an exception unwound past it) is killed with its group and reaped.
  ~ChildProcess();

  pid_t pid() const { return pid_; }
  // Moves the daemon's pipe ends out; call once.
  ChildPipes take_pipes() { return std::move(pipes_); }
  // Becomes readable when the child exits (a pidfd); -1 when the kernel has no pidfd, in
  // which case callers must poll has_exited() on a short tick.
  int exit_fd() const { return exit_fd_.get(); }
  // Whether the child has exited, without reaping it.
  bool has_exited() const;
  // Sends `signal` to the child's whole process group; a group already gone is fine.
  void signal_group(int signal) const;
  // SIGKILLs whatever is left of the group (grandchildren included), waits for the child
  // and returns its wait status; nullopt if it was reaped elsewhere (SIGCHLD ignored).
  std::optional<int> kill_group_and_reap();

 private:
  pid_t pid_ = -1;
  bool reaped_ = false;
  ChildPipes pipes_;
  UniqueFd exit_fd_;
};

}  // namespace pgjobd
