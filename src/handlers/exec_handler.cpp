// The exec handler: one child process per job, supervised until it exits, times out or is stopped.

#include "handlers/exec_handler.hpp"

#include <signal.h>
#include <string.h>
#include <sys/wait.h>

#include <algorithm>
#include <cerrno>
#include <stdexcept>
#include <string>
#include <utility>

#include "handlers/child_io.hpp"
#include "handlers/child_process.hpp"
#include "handlers/exec_environment.hpp"
#include "handlers/orphan_reaper.hpp"
#include "handlers/stop_event_fd.hpp"
#include "pgjobd/duration.hpp"

extern char** environ;

namespace pgjobd {
namespace {

constexpr std::size_t kStderrTailBytes = 4096;

// The stderr tail as it goes into last_error: NUL bytes removed (PostgreSQL text cannot hold
// them), trailing whitespace trimmed, and "..." in front when earlier output was dropped.
// Invalid UTF-8 is left alone here; the completer sanitises text before storing it.
std::string summarize_stderr(const TailBuffer& tail) {
  std::string text = tail.bytes();
  std::erase(text, '\0');
  const auto last = text.find_last_not_of(" \t\r\n\f\v");
  text.erase(last == std::string::npos ? 0 : last + 1);
  if (tail.truncated() && !text.empty()) text.insert(0, "...");
  return text;
}

std::string with_stderr(std::string status, const std::string& stderr_text,
                        const char* separator = ": ") {
  if (!stderr_text.empty()) status.append(separator).append(stderr_text);
  return status;
}

// "exit 3" or "killed by signal 11 (SIGSEGV)".
std::string describe_wait_status(int status) {
  if (WIFEXITED(status)) return "exit " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    const int signal = WTERMSIG(status);
    const char* abbreviation = sigabbrev_np(signal);
    std::string text = "killed by signal " + std::to_string(signal);
    if (abbreviation != nullptr) text.append(" (SIG").append(abbreviation).append(")");
    return text;
  }
  return "wait status " + std::to_string(status);
}

// Done with stdout as the result (JSON, or else a string of it; the job runner bounds it).
JobResult done_with_stdout(HeadBuffer& stdout_head) {
  JobResult done = JobResult::done(stdout_head.take());
  done.result_bytes = stdout_head.total();
  return done;
}

JobResult result_for_exit(std::optional<int> status, const std::vector<int>& permanent_exit_codes,
                          ChildIo& io, const std::string& stderr_text) {
  if (!status) return JobResult::retry(with_stderr("exit status unavailable", stderr_text));
  if (WIFEXITED(*status)) {
    const int code = WEXITSTATUS(*status);
    if (code == 0) return done_with_stdout(io.stdout_head());
    if (std::ranges::find(permanent_exit_codes, code) != permanent_exit_codes.end()) {
      return JobResult::dead(with_stderr(describe_wait_status(*status), stderr_text));
    }
  }
  return JobResult::retry(with_stderr(describe_wait_status(*status), stderr_text));
}

// A program that is missing or not executable will not appear by itself between attempts:
// that is a configuration error, so the job goes dead at once instead of burning its
// retries. Resource shortages (EAGAIN, ENOMEM, EMFILE, ...) pass, so those retry.
JobResult result_for_spawn_failure(const SpawnError& error) {
  const std::string message = "cannot run " + error.program() + ": " +
                              std::generic_category().message(error.code().value());
  switch (error.code().value()) {
    case ENOENT:
    case EACCES:
    case EPERM:
    case ENOEXEC:
    case ENOTDIR:
    case ELOOP:
    case ENAMETOOLONG:
    case EISDIR:
      return JobResult::dead(message);
    default:
      return JobResult::retry(message);
  }
}

// SIGTERM to the group, then kill_grace for it to exit (still reading its output, so a child
// writing while it shuts down is not blocked), then SIGKILL. Returns once the child exited.
void terminate_group(ChildProcess& child, ChildIo& io, Millis kill_grace) {
  child.signal_group(SIGTERM);
  const auto grace_end = ChildIo::Clock::now() + kill_grace;
  if (io.pump_until(child, grace_end, -1) == ChildIo::Wake::kChildExited) return;
  child.signal_group(SIGKILL);
  io.pump_until(child, std::nullopt, -1);
}

JobResult run_exec_job(const HandlerConfig& config, const WithheldCredentials& withheld,
                       std::size_t max_result_bytes, const Job& job, std::stop_token stop) {
  if (stop.stop_requested()) return JobResult::released();
  // Registered before the spawn, so a stop requested while spawning is not missed.
  const StopEventFd stop_event(std::move(stop));
  // Outlives `child`: once it is reaped, whatever the job left detached is ended too.
  const OrphanScope orphans(job.id);
  try {
    // The daemon never changes its environment after start-up, so reading environ from a
    // worker thread does not race with setenv.
    ChildProcess child(config.exec_argv, build_child_environment(job, withheld, environ));
    // One byte over the bound tells the job runner the result was longer (0: none kept).
    ChildIo io(child.take_pipes(), job.payload, max_result_bytes == 0 ? 0 : max_result_bytes + 1,
               kStderrTailBytes);
    std::optional<ChildIo::Clock::time_point> deadline;
    if (config.timeout > Millis::zero()) deadline = ChildIo::Clock::now() + config.timeout;

    const ChildIo::Wake wake = io.pump_until(child, deadline, stop_event.fd());
    if (wake != ChildIo::Wake::kChildExited) terminate_group(child, io, config.kill_grace);
    // Also takes down grandchildren the child left behind, however it ended.
    const std::optional<int> status = child.kill_group_and_reap();
    io.drain();
    const std::string stderr_text = summarize_stderr(io.stderr_tail());

    switch (wake) {
      case ChildIo::Wake::kStopRequested:
        return JobResult::released();
      case ChildIo::Wake::kDeadline:
        return JobResult::retry(with_stderr("timed out after " + format_duration(config.timeout),
                                            stderr_text, "; stderr: "));
      case ChildIo::Wake::kChildExited:
        break;
    }
    return result_for_exit(status, config.permanent_exit_codes, io, stderr_text);
  } catch (const SpawnError& error) {
    return result_for_spawn_failure(error);
  }
}

}  // namespace

Handler make_exec_handler(const HandlerConfig& config, WithheldCredentials withheld,
                          std::size_t max_result_bytes) {
  // Config validation rejects this with file and line; reaching here is a wiring bug.
  if (config.exec_argv.empty()) throw std::invalid_argument("exec handler: empty exec argv");
  return [config, withheld = std::move(withheld), max_result_bytes](const Job& job,
                                                                    std::stop_token stop) {
    return run_exec_job(config, withheld, max_result_bytes, job, std::move(stop));
  };
}

}  // namespace pgjobd
