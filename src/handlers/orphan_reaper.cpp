// Kills and reaps the adopted leftovers of finished exec jobs (see orphan_reaper.hpp).

#include "handlers/orphan_reaper.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <string_view>
#include <vector>

#include "handlers/unique_fd.hpp"

namespace pgjobd {
namespace {

constexpr std::string_view kJobIdVariable = "PGJOBD_JOB_ID=";

// The whole of a /proc file; empty if it cannot be read (the process is gone, or a zombie).
std::string read_proc_file(const std::string& path) {
  std::string text;
  const UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return text;
  char buffer[4096];
  while (true) {
    const ssize_t got = ::read(fd.get(), buffer, sizeof buffer);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    text.append(buffer, static_cast<std::size_t>(got));
  }
  return text;
}

// The children the kernel hands this process as subreaper. It gives them to the first live
// thread of the process, the main thread, which never spawns a job's program (workers do),
// so every pid listed here is an adopted process, never a job's own child still awaited.
std::vector<pid_t> adopted_children() {
  const pid_t self = ::getpid();
  const std::string text = read_proc_file("/proc/" + std::to_string(self) + "/task/" +
                                          std::to_string(self) + "/children");
  std::vector<pid_t> pids;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find(' ', start);
    if (end == std::string::npos) end = text.size();
    if (end > start) pids.push_back(static_cast<pid_t>(std::stol(text.substr(start, end - start))));
    start = end + 1;
  }
  return pids;
}

// The PGJOBD_JOB_ID value a process was started with; empty when it has none (cleared by
// the program, or a zombie whose memory is gone).
std::string job_id_of(pid_t pid) {
  const std::string environment = read_proc_file("/proc/" + std::to_string(pid) + "/environ");
  std::size_t start = 0;
  while (start < environment.size()) {
    std::size_t end = environment.find('\0', start);
    if (end == std::string::npos) end = environment.size();
    const std::string_view entry(environment.data() + start, end - start);
    if (entry.starts_with(kJobIdVariable)) return std::string(entry.substr(kJobIdVariable.size()));
    start = end + 1;
  }
  return {};
}

}  // namespace

OrphanReaper& OrphanReaper::instance() {
  static OrphanReaper reaper;
  return reaper;
}

bool OrphanReaper::become_subreaper() {
  if (::prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0) return false;
  subreaper_ = true;
  return true;
}

void OrphanReaper::job_started(std::int64_t job_id) {
  std::lock_guard lock(mutex_);
  ++running_[std::to_string(job_id)];
}

void OrphanReaper::job_ended(std::int64_t job_id) {
  {
    std::lock_guard lock(mutex_);
    const auto it = running_.find(std::to_string(job_id));
    if (it != running_.end() && --it->second == 0) running_.erase(it);
  }
  // Most jobs leave nothing behind: then the ending workers need not queue for the lock.
  if (!subreaper_ || adopted_children().empty()) return;
  std::lock_guard lock(mutex_);
  sweep();
}

void OrphanReaper::sweep() {
  // Each pass kills what is adopted now; reaping a killed process hands its own children
  // over, so passes repeat until one finds nothing to kill. Killing before reaping, under
  // the lock, keeps every pid signalled reserved (a zombie until reaped here).
  bool killed = true;
  while (killed) {
    killed = false;
    for (const pid_t pid : adopted_children()) {
      if (running_.contains(job_id_of(pid))) continue;
      // Not ours to kill (a set-user-ID program): waiting for it could take forever.
      if (::kill(pid, SIGKILL) != 0 && errno == EPERM) continue;
      int status = 0;
      while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      killed = true;
    }
  }
}

}  // namespace pgjobd
