// Starts a job's program with posix_spawnp in a new process group, and ends and reaps it.

#include "handlers/child_process.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

#include "runtime/scheduling.hpp"

extern char** environ;

namespace pgjobd {
namespace {

// Signals a daemon typically blocks or ignores. Ignored dispositions and the signal mask
// survive exec, so without resetting them a child could not be stopped by SIGTERM or would
// see EPIPE instead of dying on SIGPIPE like a normal command-line program.
constexpr int kSignalsResetToDefault[] = {SIGHUP,  SIGINT,  SIGQUIT, SIGPIPE, SIGTERM, SIGCHLD,
                                          SIGALRM, SIGUSR1, SIGUSR2, SIGTSTP, SIGTTIN, SIGTTOU};

[[noreturn]] void throw_errno(int error_number, const char* what) {
  throw std::system_error(error_number, std::generic_category(), what);
}

// posix_spawn* functions return an error number instead of setting errno.
void check_spawn_call(int error_number, const char* what) {
  if (error_number != 0) throw_errno(error_number, what);
}

// The child's dup2 onto 0, 1 and 2 would clobber a pipe end that itself sits on 0-2 (only
// possible if the daemon runs with a standard descriptor closed), so keep ends above 2.
UniqueFd move_above_standard_fds(UniqueFd fd) {
  if (fd.get() > STDERR_FILENO) return fd;
  const int moved = ::fcntl(fd.get(), F_DUPFD_CLOEXEC, STDERR_FILENO + 1);
  if (moved < 0) throw_errno(errno, "fcntl(F_DUPFD_CLOEXEC)");
  return UniqueFd(moved);
}

void set_nonblocking(const UniqueFd& fd) {
  const int flags = ::fcntl(fd.get(), F_GETFL);
  if (flags < 0 || ::fcntl(fd.get(), F_SETFL, flags | O_NONBLOCK) < 0) {
    throw_errno(errno, "fcntl(O_NONBLOCK)");
  }
}

struct Pipe {
  UniqueFd read_end;
  UniqueFd write_end;
};

// O_CLOEXEC so that a child spawned concurrently for another job never inherits this pipe
// (an inherited stdin write end would keep that job's child from ever seeing EOF).
Pipe make_pipe() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw_errno(errno, "pipe2");
  Pipe pipe{UniqueFd(fds[0]), UniqueFd(fds[1])};
  pipe.read_end = move_above_standard_fds(std::move(pipe.read_end));
  pipe.write_end = move_above_standard_fds(std::move(pipe.write_end));
  return pipe;
}

class SpawnAttributes {
 public:
  SpawnAttributes() { check_spawn_call(::posix_spawnattr_init(&attributes_), "posix_spawnattr"); }
  ~SpawnAttributes() { ::posix_spawnattr_destroy(&attributes_); }
  SpawnAttributes(const SpawnAttributes&) = delete;
  SpawnAttributes& operator=(const SpawnAttributes&) = delete;
  posix_spawnattr_t* get() { return &attributes_; }

 private:
  posix_spawnattr_t attributes_;
};

class SpawnFileActions {
 public:
  SpawnFileActions() {
    check_spawn_call(::posix_spawn_file_actions_init(&actions_), "posix_spawn_file_actions");
  }
  ~SpawnFileActions() { ::posix_spawn_file_actions_destroy(&actions_); }
  SpawnFileActions(const SpawnFileActions&) = delete;
  SpawnFileActions& operator=(const SpawnFileActions&) = delete;
  posix_spawn_file_actions_t* get() { return &actions_; }

 private:
  posix_spawn_file_actions_t actions_;
};

void configure_group_signals_and_policy(SpawnAttributes& attributes) {
  sigset_t empty_mask;
  sigemptyset(&empty_mask);
  sigset_t defaults;
  sigemptyset(&defaults);
  for (const int signal : kSignalsResetToDefault) sigaddset(&defaults, signal);
  // Process group 0: the child leads a new group whose id is its pid, so one kill(-pid)
  // reaches everything it starts.
  check_spawn_call(::posix_spawnattr_setpgroup(attributes.get(), 0), "posix_spawnattr_setpgroup");
  // The daemon blocks SIGTERM in every thread and the mask is inherited: clear it.
  check_spawn_call(::posix_spawnattr_setsigmask(attributes.get(), &empty_mask),
                   "posix_spawnattr_setsigmask");
  check_spawn_call(::posix_spawnattr_setsigdefault(attributes.get(), &defaults),
                   "posix_spawnattr_setsigdefault");
  short flags = POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF;
  // The daemon's threads may run under SCHED_BATCH (worker.scheduling), which a child
  // inherits: it gets the policy the daemon had before, as if that had never changed.
  if (const std::optional<SchedulingPolicy> policy = programs_scheduling_policy()) {
    check_spawn_call(::posix_spawnattr_setschedpolicy(attributes.get(), policy->policy),
                     "posix_spawnattr_setschedpolicy");
    sched_param param{};
    param.sched_priority = policy->priority;
    check_spawn_call(::posix_spawnattr_setschedparam(attributes.get(), &param),
                     "posix_spawnattr_setschedparam");
    flags |= POSIX_SPAWN_SETSCHEDULER;
  }
  check_spawn_call(::posix_spawnattr_setflags(attributes.get(), flags), "posix_spawnattr_setflags");
}

void connect_standard_streams(SpawnFileActions& actions, const Pipe& in, const Pipe& out,
                              const Pipe& err) {
  check_spawn_call(::posix_spawn_file_actions_adddup2(actions.get(), in.read_end.get(), 0),
                   "posix_spawn_file_actions_adddup2");
  check_spawn_call(::posix_spawn_file_actions_adddup2(actions.get(), out.write_end.get(), 1),
                   "posix_spawn_file_actions_adddup2");
  check_spawn_call(::posix_spawn_file_actions_adddup2(actions.get(), err.write_end.get(), 2),
                   "posix_spawn_file_actions_adddup2");
  // Belt and braces for O_CLOEXEC: libraries may open descriptors without it, and a child
  // holding another job's pipe end would stall that job.
  check_spawn_call(::posix_spawn_file_actions_addclosefrom_np(actions.get(), STDERR_FILENO + 1),
                   "posix_spawn_file_actions_addclosefrom_np");
}

std::vector<char*> to_exec_array(const std::vector<std::string>& strings) {
  std::vector<char*> array;
  array.reserve(strings.size() + 1);
  // posix_spawn takes char* const[] for historical reasons; it does not write through them.
  for (const std::string& text : strings) array.push_back(const_cast<char*>(text.c_str()));
  array.push_back(nullptr);
  return array;
}

}  // namespace

ChildProcess::ChildProcess(const std::vector<std::string>& argv,
                           const std::vector<std::string>& environment) {
  if (argv.empty()) throw SpawnError(EINVAL, "(empty argv)");
  Pipe in = make_pipe();
  Pipe out = make_pipe();
  Pipe err = make_pipe();
  set_nonblocking(in.write_end);
  set_nonblocking(out.read_end);
  set_nonblocking(err.read_end);

  SpawnAttributes attributes;
  configure_group_signals_and_policy(attributes);
  SpawnFileActions actions;
  connect_standard_streams(actions, in, out, err);

  std::vector<char*> argv_array = to_exec_array(argv);
  std::vector<char*> environment_array = to_exec_array(environment);
  // glibc reports exec failures (ENOENT, EACCES, ...) as posix_spawnp's return value.
  const int error_number = ::posix_spawnp(&pid_, argv[0].c_str(), actions.get(), attributes.get(),
                                          argv_array.data(), environment_array.data());
  if (error_number != 0) throw SpawnError(error_number, argv[0]);

  // The child's ends close here, when `in`, `out` and `err` go out of scope: EOF on stdout
  // and stderr then depends only on the child's group.
  pipes_ = ChildPipes{std::move(in.write_end), std::move(out.read_end), std::move(err.read_end)};
  // Optional: without a pidfd (old kernel, seccomp) callers fall back to polling. Called via
  // syscall() because glibc 2.36's <sys/pidfd.h> lacks extern "C" and will not link from C++.
  exit_fd_.reset(static_cast<int>(::syscall(SYS_pidfd_open, pid_, 0)));
}

ChildProcess::~ChildProcess() {
  if (!reaped_) kill_group_and_reap();
}

bool ChildProcess::has_exited() const {
  if (reaped_) return true;
  siginfo_t info{};
  // WNOWAIT leaves the child a zombie, so its pid (our group id) stays reserved until
  // kill_group_and_reap() has signalled the group.
  while (::waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOHANG | WNOWAIT) != 0) {
    if (errno != EINTR) return errno == ECHILD;  // ECHILD: reaped elsewhere, so gone
  }
  return info.si_pid == pid_;
}

void ChildProcess::signal_group(int signal) const {
  // After reaping, the group id could belong to someone else.
  if (!reaped_) ::kill(-pid_, signal);
}

std::optional<int> ChildProcess::kill_group_and_reap() {
  if (reaped_) return std::nullopt;
  // Signal before reaping: until waitpid the child's pid, which is the group id, cannot be
  // reused, so this SIGKILL can only reach the job's own leftovers. ESRCH is fine.
  ::kill(-pid_, SIGKILL);
  int status = 0;
  pid_t waited = 0;
  do {
    waited = ::waitpid(pid_, &status, 0);
  } while (waited < 0 && errno == EINTR);
  reaped_ = true;
  exit_fd_.reset();
  if (waited != pid_) return std::nullopt;
  return status;
}

}  // namespace pgjobd
